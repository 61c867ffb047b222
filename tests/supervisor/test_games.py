"""End to end through real sockets and ptys, for each game: a full shoe with the cover card and
the batch swap; a jam mid-shuffle and its recovery; a reader failure that stops dealing until the
reader is replaced; a wrong stub count in DJ Wild voiding the round."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from controller.supervisor.health import DeviceHealth
from controller.supervisor.rig import Rig
from devices.events import Key
from sim.wire_dealer import TableStopped
from tests.supervisor.conftest import BLACKJACK, GAMES, assert_journal_sound, journal_kinds

SHUFFLE_FAILED = {"double-back-jack": "673a.13(k)", "double-attack": "665a.13(j)",
                  "down-under": "685a.12(j)", "dj-wild": "687a.9(a)(1)"}  # fmt: skip
READER_FAILED = {"double-back-jack": "673a.13(j)", "double-attack": "665a.13(i)", "down-under": "685a.12(i)"}

MakeRig = Callable[..., Awaitable[Rig]]


@pytest.mark.parametrize("game", GAMES)
async def test_a_full_shoe_with_the_cover_card_and_the_batch_swap(game: str, table_rig: MakeRig) -> None:
    rig = await table_rig(game)
    await rig.dealer.open_table()
    first = rig.supervisor.table.shoe_back
    while rig.dealer.stats.shoes < 2:  # the second shoe has started: the batches swapped
        await rig.dealer.play_round()
    t = rig.supervisor.table
    await rig.dealer.until(lambda: t.shoe_back is not None, "the next batch")  # DJ Wild: a deck a round
    records = journal_kinds(rig.supervisor.journal_path)
    kinds = [k for k, _ in records]
    loads = [p["back"] for k, p in records if k == "batch_to_shoe"]
    # 673a.3(b)(4): the batches alternate, shoe after shoe (DJ Wild: deck after deck, 687a.9(a)).
    assert len(loads) >= 2 and loads[0] == first
    assert all(a != b for a, b in itertools.pairwise(loads))
    if t.blackjack:
        covers = [p for k, p in records if k == "reshuffle_ordered" and p["reason"] == "cover"]
        assert covers and covers[0]["by"] == "cover card" and "seat" in covers[0]
        assert kinds.index("reshuffle_ordered") < kinds.index("shoe_ended")
        # 673a.5(b)-(d) at the batch shuffler: each stack is cut and given its cover card before
        # it goes into the shoe, and the shoe saw it come in (BatchLoaded), no eject into it.
        for load in [i for i, k in enumerate(kinds) if k == "batch_to_shoe"]:
            before = kinds[:load]
            last_offer = len(before) - 1 - before[::-1].index("cut_offered")
            assert {"cut_made", "cover_card_placed"} <= set(before[last_offer:])
        # The second stack: the cover card's box refuses the cut (5(c)), the dealer cuts, the
        # floor orders a recut (5(e)) and the last cutter cuts again.
        second = kinds[kinds.index("batch_to_shoe") + 1 :]
        assert "cut_refused" in second and "recut_ordered" in second
        assert second.count("cut_made") == 2
        # 673a.10(a), 665a.10(a), 685a.9(a): the players double a soft hand for less, keyed with
        # its amount on the keypad's key_amount; it is journalled and settled on that amount.
        for_less = [p for k, p in records if k == "decision" and "amount" in p]
        assert for_less, "no double for less in a whole shoe"
        settled = {p["round"]: p["settlements"] for k, p in records if k == "round_settled"}
        for d in for_less:
            lines = [s for s in settled[d["round"]] if (s["seat"], s["hand"]) == (d["seat"], d["hand"])]
            assert d["amount"] in [s["stake"] for s in lines if s["wager"] == "bet"]
    assert "alarm_raised" not in kinds
    assert all(h is DeviceHealth.ONLINE for h in rig.supervisor.health.values())
    assert_journal_sound(rig)


@pytest.mark.parametrize("game", GAMES)
async def test_a_jam_mid_shuffle_reshuffles_the_batch(game: str, table_rig: MakeRig) -> None:
    rig = await table_rig(game)
    await rig.dealer.open_table()
    slots = rig.dealer.shuffler.slots.values()
    await rig.dealer.until(lambda: any(s.state.value == "shuffling" for s in slots), "the second shuffle")
    shuffling = [s for s in slots if s.state.value == "shuffling"]
    assert len(shuffling) == 1  # the second batch is being shuffled while the first is dealt
    rig.dealer.shuffler.faults.jam_at_card = len(shuffling[0].cards) // 2
    jammed_back = shuffling[0].back
    while rig.dealer.stats.shoes < 2:
        await rig.dealer.play_round()
    records = journal_kinds(rig.supervisor.journal_path)
    mine = [(k, p) for k, p in records if p.get("back") == jammed_back]
    kinds = [k for k, _ in mine]
    failed = kinds.index("shuffle_failed")
    # 673a.13(k): the batch is shuffled again from the start and only then goes into the shoe.
    assert kinds[failed + 1 : failed + 3] == ["shuffle_started", "shuffle_completed"]
    assert kinds.index("batch_to_shoe") > failed
    alarms = [p for k, p in records if k == "alarm_raised"]
    assert [a["section"] for a in alarms] == [SHUFFLE_FAILED[game]] and not alarms[0]["halts"]
    assert rig.supervisor.health["shuffler"] is DeviceHealth.ONLINE  # cleared after the jam
    assert_journal_sound(rig)


@pytest.mark.parametrize("game", BLACKJACK)
async def test_a_failed_reader_stops_dealing_until_it_is_replaced(game: str, table_rig: MakeRig) -> None:
    rig = await table_rig(game)
    sup, dealer = rig.supervisor, rig.dealer
    await dealer.open_table()
    await dealer.play_round()
    dealer.reader.faults.dead = True
    await sup.settle("reader")
    assert sup.table.reader_failed and sup.health["reader"] is DeviceHealth.FAULT
    assert [a.section for a in sup.table.halted] == [READER_FAILED[game]]
    with capture_logs() as logs:
        with pytest.raises(TableStopped, match=READER_FAILED[game].replace("(", r"\(").replace(")", r"\)")):
            await dealer.play_round()
        dealer.keypad.press(Key.START_GAME)  # the dealer tries anyway: refused, no round journalled
        before = sup.jt.journal.last_seq if sup.jt else 0
        await sup.settle("keypad")
    refused = [e for e in logs if e["event"] == "refused"]
    assert refused and refused[-1]["error"].startswith(READER_FAILED[game])
    assert sup.jt is not None
    # The press locked the sensors at once (the shipped keypad's own latch, 687a.9(b)); the refusal
    # unlocked them, and the journal says both, in that order, with the key read (its counter in
    # the last record, issue 11): a restart must not replay the refused press later.
    added = journal_kinds(sup.journal_path)[before:]
    assert [k for k, _ in added] == ["sensors_locked", "sensors_unlocked"]
    assert added[1][1]["section"] == READER_FAILED[game] and added[1][1]["device_seen"]["device"] == "keypad"
    assert not dealer.keypad.locked
    # Acknowledging the alarm is not enough; the reader must be replaced (673a.13(j)).
    alarm = sup.table.halted[0].id
    result = await sup.command("alarm_acknowledged", {"alarm": alarm}, "floor-2", "floor")
    assert not result["ok"] and result["error"].startswith(READER_FAILED[game])
    dealer.reader.faults.dead = False  # the technician swaps the reader
    await sup.settle("reader")
    assert sup.health["reader"] is DeviceHealth.ONLINE and sup.table.reader_failed
    assert (await sup.command("reader_replaced", {}, "floor-2", "floor"))["ok"]
    assert not sup.table.halted
    dealer.keypad.remove_bet(1, 1)  # the chips of the refused Start Game stay; a fresh round
    rounds = dealer.stats.rounds
    for _ in range(2):
        await dealer.play_round()
    assert dealer.stats.rounds == rounds + 2
    records = journal_kinds(sup.journal_path)
    assert ("reader_replaced", {"by": "floor-2"}) in records
    assert_journal_sound(rig)


async def test_a_wrong_stub_count_voids_the_dj_wild_round(table_rig: MakeRig) -> None:
    rig = await table_rig("dj-wild")
    sup, dealer = rig.supervisor, rig.dealer
    await dealer.open_table()
    await dealer.play_round()
    stub = dealer.sim.devices["stub"].model
    stub.faults.miscount = -1  # 687a.9(h): the counter finds one card short
    t = sup.table
    with pytest.raises(TableStopped, match=r"687a\.9\(h\)"):
        await dealer.play_round()  # the count is wrong: dealing stops for the dealer's decision
    assert [a.section for a in t.halted] == ["687a.9(h)"]
    counted = [p for k, p in journal_kinds(sup.journal_path) if k == "stub_counted"][-1]
    assert counted["ok"] is False and counted["count"] == counted["expected"] - 1
    # The dealer determines the cards were misdealt: every hand is void, wagers returned.
    result = await sup.command("misdeal_determined", {"misdealt": True}, "dealer-1", "dealer")
    assert result["ok"] and "round_voided" in result["events"]
    assert not t.in_round and not t.halted
    stub.faults.miscount = 0
    dealer.hands.clear_bets(dealer.boxes)
    rounds = dealer.stats.rounds
    for _ in range(2):
        await dealer.play_round()  # the voided deck goes back to its slot when the next comes out
    assert dealer.stats.rounds == rounds + 2
    voided = [p for k, p in journal_kinds(sup.journal_path) if k == "round_voided"]
    assert [v["section"] for v in voided] == ["687a.9(h)"]
    assert_journal_sound(rig)


async def test_the_used_batch_may_come_back_to_its_slot_late(table_rig: MakeRig) -> None:
    """shuffler.md, "the used batch after an eject": the used batch is due in its slot before the
    first card of the new batch is drawn (673a.3(b)(5): one batch in the discard rack). Brought
    back five minutes late, the draw raises the non-halting 3(b)(5) alarm naming the batch and
    the table asks for no bets (it says what it waits for) until it is back; then the table
    takes it as loaded, starts its shuffle, asks for bets by a new ask id and plays on."""
    import asyncio

    from devices.events import ShufflerState
    from devices.profiles import DeviceKind

    rig = await table_rig("double-back-jack")
    await rig.dealer.open_table()
    model = rig.sim.devices["shuffler"].model
    late: list[asyncio.Task[None]] = []
    t = rig.supervisor.table

    async def bring_back(slot: object, cards: list[object]) -> None:
        await rig.clock.sleep(300)  # five minutes of the table's clock after the new batch went in
        back = model.slots[slot].back
        assert t.batches[back].location.value == "discard"  # the table still has it in the rack
        model.load(slot, cards)
        await rig.link.touched(DeviceKind.SHUFFLER)

    load_shoe = rig.sim.load_shoe

    def slow_dealer(cards: list[Any], back: str, cover_from_bottom: int | None = None) -> None:
        load_shoe(cards, back, cover_from_bottom)  # the simulator puts the used batch back at once ...
        for slot, s in model.slots.items():  # ... this dealer takes it back out and comes back later
            if s.state is ShufflerState.IDLE and s.cards and not late:
                used = [dc.card for dc in s.cards]
                s.cards, s.state = [], ShufflerState.EMPTY
                late.append(asyncio.create_task(bring_back(slot, used)))

    rig.sim.load_shoe = slow_dealer  # type: ignore[method-assign]
    for _ in range(400):  # bounded: a table that never asks again fails here, not by hanging
        if rig.dealer.stats.shoes >= 2 and late and late[0].done():
            break
        await rig.dealer.play_round()
    else:
        raise AssertionError(f"the used batch never came back late: {len(late)} taken out")
    await late[0]
    for _ in range(2):
        await rig.dealer.play_round()
    kinds = [k for k, _ in journal_kinds(rig.supervisor.journal_path)]
    raised = [p for k, p in journal_kinds(rig.supervisor.journal_path) if k == "alarm_raised"]
    assert kinds.count("batch_to_shuffler") >= 3
    assert [(a["section"], a["halts"]) for a in raised] == [("673a.3(b)(5)", False)], raised
    assert "load the blue batch into the shuffler" in raised[0]["floor_action"]
    assert_journal_sound(rig)
