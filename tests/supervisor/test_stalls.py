"""No wait without an alarm (controller/supervisor/stalls.py, docs/design.md): when the table
asks for what the devices show cannot come, or no device that could answer is there, one alarm
says what the floor must do within the stated bound; never a silent wait."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from controller.supervisor.mapping import ShoeLoad
from controller.supervisor.rig import Rig
from controller.supervisor.stalls import STALL_AFTER_S, STALL_CHECK_S, Presence, stalled
from controller.table import inputs as I
from controller.table.asking import asking
from devices.profiles import DeviceKind
from tests.support.first_stack import stack_cut
from tests.table.helpers import BJ, WILD, ready
from tests.table.helpers import Rig as CoreRig
from tests.table.test_dj_wild import _dealt, _round

UP = dict.fromkeys(DeviceKind, Presence.UP)


def _without(kind: DeviceKind, state: Presence = Presence.MISSING) -> dict[DeviceKind, Presence]:
    return {**UP, kind: state}


def test_a_card_reader_missing_when_the_round_asks_for_it() -> None:
    """673a.2(d): the reader is used every round; a round at the reader with none is a stall."""
    rig = ready(BJ)
    while rig.table.burns_due:
        rig.draw()
    rig.open_round((1,))
    cards = ["5C", "AS", "6C", "9D"]  # box 1, the dealer's ace up, box 1, the hole card
    while asking(rig.table)["what"] != "reader":
        rig.answer(cards)  # offers declined
    assert stalled(rig.table, None, UP) is None
    stall = stalled(rig.table, None, _without(DeviceKind.READER))
    assert stall is not None and stall.section == "673a.2(d)" and "no card reader" in stall.message
    gone = stalled(rig.table, None, _without(DeviceKind.READER, Presence.GONE))
    assert gone is not None and "does not answer" in gone.message
    assert stalled(rig.table, None, _without(DeviceKind.READER, Presence.MARKED)) is None


def test_the_next_batch_with_the_shuffler_gone() -> None:
    rig = CoreRig(BJ)
    rig.open_batches()
    assert asking(rig.table)["what"] == "batch"
    stall = stalled(rig.table, None, _without(DeviceKind.SHUFFLER, Presence.GONE))
    assert stall is not None and stall.section == "673a.13(l)"
    wild = CoreRig(WILD)
    wild.open_batches()
    stall = stalled(wild.table, None, _without(DeviceKind.SHUFFLER))
    assert stall is not None and stall.section == "687a.9(a)(1)"
    rig.feed(I.ShufflerOutOfOrder(by="floor-1"))  # shuffled by hand now: people answer
    assert stalled(rig.table, None, _without(DeviceKind.SHUFFLER, Presence.MARKED)) is None


def test_a_loaded_shoe_the_table_did_not_take() -> None:
    rig = ready(BJ)  # the blue batch in the shoe
    stall = stalled(rig.table, ShoeLoad("red", 312), UP)
    assert stall is not None and "the red batch" in stall.message and "blue" in stall.message


def test_nothing_while_the_floor_is_asked_already() -> None:
    rig = ready(BJ)
    rig.feed(I.DeviceGap("shoe", "cards", "test", 0, halts=True))
    assert asking(rig.table)["what"] == "floor"
    assert stalled(rig.table, ShoeLoad("red", 312), _without(DeviceKind.SHOE)) is None


async def _until_alarm(rig: Rig, seconds: float) -> list[dict[str, Any]]:
    waited = 0.0
    while waited <= seconds and not rig.supervisor.snapshot()["alarms"]:
        rig.clock.advance(STALL_CHECK_S)
        waited += STALL_CHECK_S
        await rig.supervisor.settle()
    return list(rig.supervisor.snapshot()["alarms"])


async def test_a_stack_in_the_shoe_left_unrecorded_is_an_alarm_within_the_bound(
    table_rig: Callable[..., Awaitable[Rig]],
) -> None:
    rig = await table_rig("double-back-jack")
    await stack_cut(rig)
    rig.dealer.hands.stack_into_shoe(100)
    await rig.link.touched(DeviceKind.SHOE)
    alarms = await _until_alarm(rig, STALL_AFTER_S + 2 * STALL_CHECK_S)
    assert [a["section"] for a in alarms] == ["673a.5(d)"], alarms
    assert "cover card" in alarms[0]["message"] and "record the cut" in alarms[0]["floor_action"]
    again = await _until_alarm(rig, STALL_AFTER_S * 2)  # one alarm, not one per check
    assert len(again) == 1


async def test_a_shuffler_gone_while_the_table_waits_for_a_batch_is_an_alarm(
    table_rig: Callable[..., Awaitable[Rig]],
) -> None:
    rig = await table_rig("down-under")
    assert rig.supervisor.snapshot()["asking"]["what"] == "batch"
    name = next(n for n, k in rig.supervisor.kinds.items() if k is DeviceKind.SHUFFLER)
    wire = rig.sim.devices[name].register_sim
    assert wire is not None
    wire.faults.silent = True
    alarms = await _until_alarm(rig, 120.0)
    assert [a["section"] for a in alarms] == ["685a.12(k)"], alarms
    assert "the shuffler does not answer" in alarms[0]["message"]


def test_a_batch_the_shuffler_will_not_put_out() -> None:
    """The table journalled the deck into the hand (687a.9(a)(2)) and the eject; the shuffler
    refuses it and still shows the deck ready: the dealer's hand stays empty."""
    wild = ready(WILD, counted=False)
    back = wild.table.shoe_back
    assert back is not None
    assert stalled(wild.table, None, UP, {back}) is not None
    stall = stalled(wild.table, None, UP, {back})
    assert stall is not None and stall.section == "687a.9(a)(2)" and "dealer's hand" in stall.message
    other = next(b for b in wild.table.batches if b != back)
    assert stalled(wild.table, None, UP, {other}) is None  # the other deck is meant to stay in
    rig = ready(BJ)
    stall = stalled(rig.table, None, UP, {str(rig.table.shoe_back)})
    assert stall is not None and stall.section == "673a.3(b)(3)" and "in the shoe" in stall.message


def test_a_batch_in_play_that_a_restarted_shuffler_reads_in_its_slot() -> None:
    """The shuffler was restarted or swapped: it reads the deck the table has in the dealer's
    hand (687a.9(a)(2)), or the batch the table has in the shoe, back in its slot unshuffled.
    Nothing dealt from it can be trusted: the floor is told to have it reshuffled or the round
    voided (the table's own rulings), never left waiting."""
    wild = ready(WILD, counted=False)
    back = str(wild.table.shoe_back)
    other = next(b for b in wild.table.batches if b != back)
    assert stalled(wild.table, None, UP, (), {other}) is None  # the other deck is meant to be in
    stall = stalled(wild.table, None, UP, (), {back})
    assert stall is not None and stall.section == "687a.9(a)(2)" and "dealer's hand" in stall.message
    assert "reshuffle_ordered" in stall.floor_action and "void_round" in stall.floor_action
    rig = ready(BJ)
    stall = stalled(rig.table, None, UP, (), {str(rig.table.shoe_back)})
    assert stall is not None and stall.section == "673a.5(f)" and "in the shoe" in stall.message
    rig.feed(I.ShufflerOutOfOrder(by="floor-1"))  # shuffled by hand: what its slots read is no stall
    assert stalled(rig.table, None, UP, (), {str(rig.table.shoe_back)}) is None


def test_a_stub_count_due_with_the_stub_counter_gone() -> None:
    """687a.9(f): at a shuffler that does not count, Next is refused in the 5th uncounted round
    till the stub is counted; only the stub counter can end that wait."""
    rig = ready(WILD, counted=False)
    for _ in range(4):
        _round(rig)
    rig.next_shoe(counted=False)
    _dealt(rig)
    assert asking(rig.table)["what"] == "stub"
    assert stalled(rig.table, None, UP) is None
    stall = stalled(rig.table, None, _without(DeviceKind.STUB_COUNTER, Presence.GONE))
    assert (
        stall is not None and stall.section == "687a.9(f)" and "stub counter does not answer" in stall.message
    )
    counted = ready(WILD)  # a shuffler that counted 53 cards: Next puts the stub away, no count due
    _dealt(counted)
    assert stalled(counted.table, None, _without(DeviceKind.STUB_COUNTER)) is None
