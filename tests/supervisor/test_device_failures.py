"""End to end through real sockets and ptys: what a failed device means for the table (issue 5,
"Supervisor", the device health bullet; docs/install.md, the failure table): a failed shoe stops
dealing until it is back; a failed keypad closes the Progressive wagers while the main game goes on.

The failures are on the wire: the shoe's TCP listener is closed (its link dropped), the keypad's
RS-485 line (a pty bridge) is cut. Nothing sleeps: the supervisor polls when told (``settle``) on
the virtual clock, and the conftest's ``asyncio.timeout`` is the only guard.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from controller.supervisor.health import DeviceHealth
from controller.supervisor.rig import Rig
from controller.supervisor.supervisor import Supervisor
from devices.events import Key
from sim.clock import VirtualClock
from sim.modbus_server import ModbusRtuSim, ModbusTcpSim
from sim.wire_dealer import TableStopped
from tests.supervisor.conftest import assert_journal_sound, journal_kinds

MakeRig = Callable[..., Awaitable[Rig]]
MAX_POLLS = 50  # a device's health changes within a few polls; more is a failure, not a wait


async def poll_until(sup: Supervisor, clock: VirtualClock, name: str, health: DeviceHealth) -> None:
    """Poll ``name`` until its health is ``health``. The clock moves a second per poll so that the
    link's reconnect backoff (on the virtual clock) comes due."""
    for _ in range(MAX_POLLS):
        if sup.health[name] is health:
            return
        clock.advance(1.0)
        await sup.settle(name)
    raise AssertionError(f"{name} is {sup.health[name].value} after {MAX_POLLS} polls, not {health.value}")


def refusals(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] in ("refused", "command_refused")]


async def test_a_failed_shoe_stops_dealing_until_it_is_back(table_rig: MakeRig) -> None:
    """Issue 5, Supervisor: "a failed shoe stops dealing" (docs/install.md: shoe offline, the
    supervisor refuses to open rounds, ``<chapter>.7(a)``, until it is back). Down Under: 685a.7(a)."""
    rig = await table_rig("down-under")
    sup, dealer, clock = rig.supervisor, rig.dealer, rig.clock
    section = "685a.7(a)"
    assert sup.table.chapter == "685a"
    await dealer.open_table()
    await dealer.play_round()
    shoe = rig.sim.devices["shoe"].server
    assert isinstance(shoe, ModbusTcpSim)

    with capture_logs() as failing:
        await shoe.drop_link()  # the shoe is gone: listener and connections closed
        await poll_until(sup, clock, "shoe", DeviceHealth.FAULT)
    assert sup.shoe_failed and sup.snapshot()["shoe_failed"]
    halted = [e for e in failing if e["event"] == "dealing_halted"]
    assert len(halted) == 1 and halted[0]["error"].startswith(section)

    assert sup.jt is not None
    before = sup.jt.journal.last_seq
    rounds = sup.table.round_no
    # Issue 11: the failure is a journalled, halting alarm the floor sees in the retained state.
    failure = [a for a in sup.table.halted if a.section == section]
    assert len(failure) == 1 and "shoe has failed" in failure[0].message
    assert [a["section"] for a in sup.snapshot()["halted"]] == [section]
    with capture_logs() as logs:
        # The dealer sees the alarm and does not deal; Start Game pressed anyway opens no round.
        with pytest.raises(TableStopped, match=re.escape(f"dealing is stopped: {section}")):
            await dealer.play_round()
        rig.sim.devices["keypad"].model.press(Key.START_GAME)
        await sup.settle("keypad")
        # Nor through the dealer's commands (the fallback for a failed keypad).
        by_command = await sup.command("start_round", {"boxes": [1, 2]}, "dealer-1", "dealer")
        by_key = await sup.command("key", {"key": Key.START_GAME.value}, "dealer-1", "dealer")
    for result in (by_command, by_key):
        assert not result["ok"] and result["error"].startswith(section)
    refused = refusals(logs)
    assert len(refused) == 3  # the keypad's Start Game and the two commands, one line each
    for e in refused:
        assert e["input"] == "RoundOpened" and e["error"].startswith(section) and "\n" not in e["error"]
    # No round journalled: the sensors the key's press locked (the shipped keypad's own latch), the
    # refusal that unlocked them, and that the key was read (its counter in the last record).
    assert [k for k, _ in journal_kinds(sup.journal_path)][before:] == ["sensors_locked", "sensors_unlocked"]
    assert not rig.sim.devices["keypad"].model.locked
    assert sup.table.round_no == rounds and not sup.table.in_round
    assert sup.health["shoe"] is DeviceHealth.FAULT  # still failed: nothing cleared it

    with capture_logs() as recovering:
        await shoe.restore_link()  # the shoe is back on the same port
        await poll_until(sup, clock, "shoe", DeviceHealth.ONLINE)
    assert not sup.shoe_failed
    assert [e["event"] for e in recovering if e["event"].startswith("dealing_")] == ["dealing_may_resume"]

    played = dealer.stats.rounds
    for _ in range(2):
        await dealer.play_round()
    assert dealer.stats.rounds == played + 2 and sup.table.round_no == rounds + 2
    records = journal_kinds(sup.journal_path)
    started = [p["round"] for k, p in records if k == "round_started"]
    assert started == list(range(1, rounds + 3))  # no round lost or doubled by the outage
    kinds = [k for k, _ in records]
    assert kinds.count("alarm_raised") == 1 and kinds.count("device_failed") == 1
    assert kinds.count("device_back") == 1  # back online: the alarm is acknowledged by the shoe
    assert [p["by"] for k, p in records if k == "alarm_acknowledged"] == ["shoe back"]
    assert_journal_sound(rig)


def progressive(rig: Rig, round_no: int) -> tuple[list[int], list[int]]:
    """The boxes whose Progressive wagers were locked and collected in ``round_no`` (687a.9(b))."""
    records = journal_kinds(rig.supervisor.journal_path)
    locked = [p["boxes"] for k, p in records if k == "progressive_locked" and p["round"] == round_no]
    collected = [p["boxes"] for k, p in records if k == "progressive_collected" and p["round"] == round_no]
    assert len(locked) == 1 and len(collected) == 1, (locked, collected)
    return locked[0], collected[0]


async def test_a_failed_keypad_closes_progressive_wagers_while_the_game_goes_on(table_rig: MakeRig) -> None:
    """Issue 5, Supervisor: "a failed keypad closes progressive wagers while the main game goes on"
    (687a.9(b): the Progressive wagers are taken on the keypad's sensors; docs/install.md: keypad
    offline, the main game goes on through the ``start_round`` and ``key`` commands)."""
    rig = await table_rig("dj-wild")
    sup, dealer, clock = rig.supervisor, rig.dealer, rig.clock
    t = sup.table
    boxes = list(range(1, dealer.boxes + 1))
    await dealer.open_table()
    await dealer.play_round()  # with the keypad: every box's Progressive wager is taken
    assert progressive(rig, t.round_no) == (boxes, boxes)

    keypad = rig.sim.devices["keypad"].server
    assert isinstance(keypad, ModbusRtuSim)
    with capture_logs() as failing:
        keypad.drop_link()  # the keypad's RS-485 cable pulled
        await poll_until(sup, clock, "keypad", DeviceHealth.FAULT)
    assert sup.translator.progressive_closed and sup.snapshot()["progressive_closed"]
    assert [e["event"] for e in failing if e["event"] == "progressive_closed"] == ["progressive_closed"]
    # The floor sees it as an alarm (not only a device health), with the section and what to do;
    # it does not stop dealing.
    (alarm,) = [a for a in sup.snapshot()["alarms"] if "keypad" in a["message"]]
    assert alarm["section"] == "687a.9(b)" and "Progressive is closed" in alarm["message"], alarm
    assert "dealer display" in alarm["floor_action"] and not t.halted, alarm

    # The round goes on without the keypad. The players' chips are on both spots of every box,
    # but no sensor reading reaches the controller; the dealer uses the commands instead.
    await dealer.until(lambda: t.shoe_back is not None, "the next deck")
    dealer.hands.take_deck()
    dealer.hands.place_bets(dealer.boxes, side=True)
    round_no = t.round_no + 1
    opened = await sup.command("start_round", {"boxes": boxes}, "dealer-1", "dealer")
    assert opened["ok"], opened
    assert t.round_no == round_no and t.wild is not None and t.wild.locked
    assert progressive(rig, round_no) == ([], [])  # 687a.9(b): no Progressive wager accepted
    dealt = await sup.command("key", {"key": Key.NEXT.value}, "dealer-1", "dealer")
    assert dealt["ok"] and dealt["events"] == ["wild_round_dealt"], dealt
    dealer.hands.deal_from_hand(5 * len(boxes) + 6)  # 687a.9(c)-(e)
    await dealer.count_stub()  # the stub counter works
    assert not t.in_round and not t.halted
    records = journal_kinds(sup.journal_path)
    assert ("round_settled", {"round": round_no, "wild": True}) in records  # the main game went on
    started = [p for k, p in records if k == "round_started" and p["round"] == round_no]
    assert [p["wild_boxes"] for p in started] == [boxes]
    dealer.hands.clear_bets(dealer.boxes)
    dealer.hands.deck_to_shuffler()
    assert sup.health["keypad"] is DeviceHealth.FAULT and sup.translator.progressive_closed

    with capture_logs():
        keypad.restore_link()  # the cable back in
        await poll_until(sup, clock, "keypad", DeviceHealth.ONLINE)
    assert not sup.translator.progressive_closed and not sup.snapshot()["progressive_closed"]
    assert not [a for a in sup.snapshot()["alarms"] if "keypad" in a["message"]]  # closed by its return

    for _ in range(2):  # the keypad again: Progressive wagers taken on every box
        await dealer.play_round()
        assert progressive(rig, t.round_no) == (boxes, boxes)
    assert t.round_no == round_no + 2
    assert_journal_sound(rig)
