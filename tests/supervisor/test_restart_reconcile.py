"""Issue 11: reconciliation on start, and device states that survive a restart.

The simulators stay up; the supervisor is stopped and a new one is started on the same journal,
as a systemd restart does. What the devices did meanwhile is read from their histories on the
first poll: still in the history, it is handled as if seen live; fallen out of it, it is one
alarm with the count. Devices the floor marked out of order stay so across the restart, with who
did it in the journal, until the floor restores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.rules.requests import CardFor
from controller.supervisor.config import load_table_config
from controller.supervisor.health import DeviceHealth
from controller.supervisor.rig import EPOCH, SupervisorLink, fast_backoff, quiet_wire, table_file
from controller.supervisor.supervisor import Supervisor
from devices.events import Key
from sim.clock import VirtualClock
from sim.table import SimTable
from sim.wire_dealer import WireDealer
from tests.supervisor.conftest import journal_kinds

GAME = "down-under"


@dataclass
class Bench:
    sim: SimTable
    clock: VirtualClock
    journal: Path
    supervisor: Supervisor | None = None
    dealer: WireDealer | None = None

    game: str = GAME

    async def start(self) -> Supervisor:
        config = load_table_config(table_file(self.game), side="both")
        sup = Supervisor(
            config, self.journal, clock=self.clock, wall=lambda: EPOCH + self.clock.now(),
            devices=fast_backoff(quiet_wire(self.sim.driver_configs())), rng=random.Random(3),
            poll_on_demand=True,
        )  # fmt: skip
        await sup.start()
        async with asyncio.timeout(10):
            while not sup.ready.is_set():
                self.clock.advance(1.0)
                await sup.settle()
        await sup.settle()
        self.supervisor = sup
        self.dealer = WireDealer(self.sim, SupervisorLink(sup, self.sim, self.clock), boxes=2)
        return sup

    async def opened(self, rounds: int = 0) -> Supervisor:
        """Started, the table opened by the floor and ``rounds`` played by the dealer."""
        sup = await self.start()
        assert self.dealer is not None
        await self.dealer.open_table()
        for _ in range(rounds):
            await self.dealer.play_round()
        return sup

    def model(self, device: str) -> Any:
        """The simulated device's model: what the dealer's hands touch."""
        return self.sim.devices[device].model

    async def stop(self) -> None:
        assert self.supervisor is not None
        await self.supervisor.stop()
        self.supervisor = None


@contextlib.asynccontextmanager
async def bench(tmp_path: Path, game: str = GAME) -> AsyncIterator[Bench]:
    config = load_table_config(table_file(game), side="both")
    clock = VirtualClock()
    sim = SimTable(list(config.devices), config.options.spec, seed=7, clock=clock, decks=config.options.decks)
    await sim.start()
    b = Bench(sim, clock, tmp_path / "t.db", game=game)
    try:
        async with asyncio.timeout(60):
            yield b
    finally:
        if b.supervisor is not None:
            await b.supervisor.stop()
        await sim.stop()


CARD_KINDS = ("card_dealt", "hole_card_dealt", "card_burned", "card_held", "card_discarded_face_up",
              "card_discarded_extra")  # fmt: skip


def cards_in(path: Path) -> list[str]:
    records = journal_kinds(path)
    return [f"{p['card']}/{p['back']}" for k, p in records if k in CARD_KINDS and not p.get("held")]


async def test_a_card_drawn_while_down_goes_to_the_box_it_was_for(tmp_path: Path) -> None:
    async with bench(tmp_path) as b:
        sup = await b.opened(rounds=1)
        shoe, keypad = b.model("shoe"), b.model("keypad")
        for box in (1, 2):
            keypad.place_bet(box, 1)
        keypad.press(Key.START_GAME)
        await sup.settle("keypad")
        rnd = sup.table.round
        assert rnd is not None and isinstance(rnd.request, CardFor)
        seat = rnd.request.seat
        await b.stop()  # the appliance restarts ...
        dealt = shoe.draw()  # ... and the dealer draws the first card of the round meanwhile
        sup = await b.start()
        records = journal_kinds(b.journal)
        last_card = next(p for k, p in reversed(records) if k == "card_dealt")
        assert last_card["seat"] == seat and last_card["card"] == str(dealt.card)
        assert "alarm_raised" not in [k for k, _ in records]
        assert sup.table.device_seen["shoe"]["draw_seq"] == shoe.draw_seq


async def test_what_fell_out_of_the_shoe_s_history_is_one_alarm_with_the_count(tmp_path: Path) -> None:
    async with bench(tmp_path) as b:
        sup = await b.opened(rounds=1)
        shoe = b.model("shoe")
        assert (await sup.command("new_dealer", {"name": "dealer-2"}, "floor-1", "floor"))["ok"]
        before = len(journal_kinds(b.journal))
        cards_in_before = cards_in(b.journal)
        await b.stop()
        drawn = [shoe.draw() for _ in range(len(shoe.ring) + 2)]  # two more than the history holds
        await b.start()
        new = journal_kinds(b.journal)[before:]
        unaccounted = [p for k, p in new if k == "cards_unaccounted"]
        assert [p["count"] for p in unaccounted] == [2]
        gap = [p for k, p in new if k == "alarm_raised" and "unaccounted" in str(p["message"])]
        assert len(gap) == 1 and "2 cards unaccounted for" in str(gap[0]["message"])
        assert str(gap[0]["section"]) == "685a.3(b)" and gap[0]["floor_action"]
        assert not any(str(d.card) in str(gap[0]) for d in drawn)  # no card identity in the alarm
        # The ones still in the history were handled as if live (the burn first, then what the
        # table makes of cards drawn out of turn); the two that fell out are in no record.
        journalled = cards_in(b.journal)[len(cards_in_before) :]
        names = [f"{d.card}/{d.card.back}" for d in drawn]
        assert journalled and journalled == names[2 : 2 + len(journalled)]
        assert [p["card"] for k, p in new if k == "card_burned"] == [str(drawn[2].card)]


async def test_out_of_order_survives_a_restart_until_the_floor_restores_it(tmp_path: Path) -> None:
    async with bench(tmp_path) as b:
        sup = await b.opened()
        for device in ("shoe", "keypad", "reader"):
            result = await sup.command("mark_out_of_order", {"device": device}, "floor-7", "floor")
            assert result["ok"], result
        marked = [(p["device"], p["by"]) for k, p in journal_kinds(b.journal) if k == "device_out_of_order"]
        assert marked == [("shoe", "floor-7"), ("keypad", "floor-7"), ("reader", "floor-7")]
        await b.stop()
        sup = await b.start()
        for device in ("shoe", "keypad", "reader"):
            assert sup.health[device] is DeviceHealth.OUT_OF_ORDER
        assert sup.shoe_failed and sup.snapshot()["shoe_failed"] and sup.translator.progressive_closed
        assert sup.snapshot()["out_of_order"] == ["keypad", "reader", "shoe"]
        refused = await sup.command("start_round", {"boxes": [1]}, "dealer-1", "dealer")
        assert not refused["ok"] and refused["error"].startswith("685a.7(a)")
        for device in ("shoe", "keypad", "reader"):
            result = await sup.command("device_restored", {"device": device}, "floor-8", "floor")
            assert result["ok"], result
            assert sup.health[device] is DeviceHealth.ONLINE
        restored = [(p["device"], p["by"]) for k, p in journal_kinds(b.journal) if k == "device_restored"]
        assert restored == [("shoe", "floor-8"), ("keypad", "floor-8"), ("reader", "floor-8")]
        assert not sup.shoe_failed and not sup.translator.progressive_closed and not sup.table.reader_failed
        again = await sup.command("device_restored", {"device": "shoe"}, "floor-8", "floor")
        assert not again["ok"] and "not marked out of order" in again["error"]
        await b.dealer.play_round()  # dealing resumes
        await b.stop()
        sup = await b.start()
        assert sup.table.out_of_order == {} and not sup.shoe_failed


async def test_a_reader_result_while_down_is_read_on_start(tmp_path: Path) -> None:
    async with bench(tmp_path) as b:
        sup = await b.opened(rounds=1)
        shoe, keypad = b.model("shoe"), b.model("keypad")
        reader = b.model("reader")
        keypad.place_bet(1, 1)
        keypad.press(Key.START_GAME)
        await sup.settle("keypad")
        while sup.table.round is not None and isinstance(sup.table.round.request, CardFor):
            shoe.draw()
            await sup.settle("shoe")
        rnd = sup.table.round
        assert rnd is not None and type(rnd.request).__name__ == "ReaderUse"
        hole = rnd.state.dealer[1]
        before = len(journal_kinds(b.journal))
        await b.stop()
        reader.insert(hole)  # the dealer uses the reader while the appliance restarts
        sup = await b.start()
        new = [k for k, _ in journal_kinds(b.journal)[before:]]
        assert "reader_result" in new and "alarm_raised" not in new
        assert sup.table.device_seen["reader"]["insert_seq"] == reader.insert_seq
        rnd = sup.table.round
        assert rnd is None or type(rnd.request).__name__ != "ReaderUse"  # the round went on


async def test_a_stub_counted_while_down_is_read_on_start(tmp_path: Path) -> None:
    """687a.9(f)-(g): the stub counter counted while the appliance restarted; on start the driver
    asks for the last count again and the round ends as it would have."""
    async with bench(tmp_path, "dj-wild") as b:
        sup = await b.opened()
        assert b.dealer is not None
        await b.dealer.until(lambda: sup.table.shoe_back is not None, "a deck in the dealer's hand")
        keypad = b.model("keypad")
        keypad.place_bet(1, 1)
        keypad.press(Key.START_GAME)
        await sup.settle("keypad")
        keypad.press(Key.NEXT)  # the hands are dealt
        await sup.settle("keypad")
        wild = sup.table.wild
        assert wild is not None and wild.dealt
        stub_cards = wild.stub_expected
        await b.stop()
        frames = b.sim.devices["stub"].frame_sim
        assert frames is not None
        await frames.count(stub_cards)
        sup = await b.start()
        async with asyncio.timeout(10):
            await sup.wait_for(lambda: sup.table.wild is None)
        counted = [p for k, p in journal_kinds(b.journal) if k == "stub_counted"]
        assert counted[-1]["count"] == stub_cards and counted[-1]["ok"]
        assert sup.table.device_seen["stub"]["count_seq"] == b.model("stub").seq


async def test_no_command_is_taken_before_the_devices_are_read(tmp_path: Path) -> None:
    """Reconciliation comes before anything else: a floor command that arrives while the devices
    are still being read after a start is refused with one line (and changes nothing)."""
    async with bench(tmp_path) as b:
        config = load_table_config(table_file(GAME), side="both")
        devices = b.sim.driver_configs()
        sup = Supervisor(config, b.journal, clock=b.clock, devices=devices, poll_on_demand=True)
        await sup.start()
        try:
            result = await sup.command("new_dealer", {"name": "d"}, "floor-1", "floor")
            assert not result["ok"] and "reading its devices" in result["error"]
            assert [k for k, _ in journal_kinds(b.journal)] == ["table_opened"]
        finally:
            await sup.stop()


# -- issue 21: a fresh journal, a reset, a shuffle that never ends -----------------------------


def _shuffling(sup: Supervisor) -> str | None:
    return next((b.back for b in sup.table.batches.values() if b.shuffler.value == "shuffling"), None)


async def test_the_first_reading_of_every_device_is_journalled_before_anything_else(tmp_path: Path) -> None:
    """Issue 21 item 3: on a fresh journal each device's counters are journalled at its first
    reading, before any step of the table: a restart reads what the devices did against them."""
    async with bench(tmp_path) as b:
        await b.opened()
        records = journal_kinds(b.journal)
        first_step = next(i for i, (k, _) in enumerate(records) if k not in ("table_opened", "device_seen"))
        before = {p["device"] for k, p in records[:first_step] if k == "device_seen"}
        assert before == {"shoe", "shuffler", "keypad", "reader"}


async def _first_shuffle(b: Bench) -> tuple[Supervisor, str]:
    """Started on a fresh journal, the floor verifies both batches: the first one goes in to be
    shuffled at once (and nothing has journalled the shuffler's counters since its first reading)."""
    sup = await b.start()
    for back in sup.table.batches:
        args = {"back": back, "dealer": "dealer-1"}
        assert (await sup.command("inspection_verified", args, "floor-1", "floor"))["ok"]
    await sup.settle()
    back = _shuffling(sup)
    assert back is not None
    return sup, back


async def test_a_burn_drawn_while_down_on_a_fresh_journal_is_journalled(tmp_path: Path) -> None:
    """Issue 21 item 3: the first burn of the day, drawn while the appliance restarts, is read
    against the shoe's first reading and routed as if seen live (no card asked for forever)."""
    async with bench(tmp_path) as b:
        sup = await b.opened()
        assert sup.table.burns_due and "card_burned" not in [k for k, _ in journal_kinds(b.journal)]
        await b.stop()
        burn = b.model("shoe").draw()
        sup = await b.start()
        records = journal_kinds(b.journal)
        assert [p["card"] for k, p in records if k == "card_burned"] == [str(burn.card)]
        assert "alarm_raised" not in [k for k, _ in records] and not sup.table.burns_due
        await b.dealer.play_round()  # type: ignore[union-attr]


async def test_a_shuffle_finished_while_down_on_a_fresh_journal_is_completed(tmp_path: Path) -> None:
    """Issue 21 item 3: the first shuffle of the day finishes while the appliance restarts: the
    shuffler's cycle counter, journalled at its first reading, says so; the batch is shuffled."""
    async with bench(tmp_path) as b:
        sup, back = await _first_shuffle(b)
        await b.stop()
        shuffler = b.model("shuffler")
        b.clock.advance(shuffler.cycle_s)
        shuffler.update()
        sup = await b.start()
        assert sup.table.batches[back].shuffler.value != "shuffling"
        assert [p["back"] for k, p in journal_kinds(b.journal) if k == "shuffle_completed"][:1] == [back]
        assert "alarm_raised" not in [k for k, _ in journal_kinds(b.journal)]


async def test_a_shuffle_the_shuffler_shows_no_cycle_for_fails_after_max_cycle_s(tmp_path: Path) -> None:
    """Issue 21 item 3: the journal has a batch shuffling, the shuffler shows no cycle for it (it
    was aborted while the appliance was down): past max_cycle_s that is 685a.12(j), one alarm,
    and the batch is shuffled again, never "shuffling" forever."""
    async with bench(tmp_path) as b:
        sup, back = await _first_shuffle(b)
        await b.stop()
        shuffler = b.model("shuffler")
        slot = next(s for s, v in shuffler.slots.items() if v.state.value == "shuffling")
        shuffler.abort(slot)
        sup = await b.start()
        assert _shuffling(sup) == back and "alarm_raised" not in [k for k, _ in journal_kinds(b.journal)]
        assert sup.max_cycle_s is not None
        for _ in range(8):  # twice max_cycle_s, in the checker's steps
            b.clock.advance(sup.max_cycle_s / 4)
            await sup.settle()
        alarms = [p for k, p in journal_kinds(b.journal) if k == "alarm_raised"]
        assert len(alarms) == 1 and alarms[0]["section"] == "685a.12(j)" and not alarms[0]["halts"]
        assert "no cycle under way" in str(alarms[0]["message"])
        started = [p["back"] for k, p in journal_kinds(b.journal) if k == "shuffle_started"]
        assert started[:2] == [back, back]  # shuffled again (and the table went on)
        assert [p["back"] for k, p in journal_kinds(b.journal) if k == "shuffle_completed"][:1] == [back]


async def test_a_device_reset_is_one_alarm_however_often_run_restarts(tmp_path: Path) -> None:
    """Issue 21 item 4: the devices reset (their counters and histories back to zero, as a
    simulator restart does): one alarm per device, its counters journalled with it, so that the
    later restarts of the appliance raise nothing again."""
    async with bench(tmp_path) as b:
        await b.opened(rounds=1)
        await b.stop()
        shoe, keypad, reader, shuffler = (b.model(n) for n in ("shoe", "keypad", "reader", "shuffler"))
        reset = ["keypad", "shoe"] + (["reader"] if reader.insert_seq else [])
        assert shuffler.cycle  # the two batches were shuffled
        shoe.draw_seq, shoe.ring = 0, [None] * len(shoe.ring)
        keypad.key_seq, keypad.key_ring = 0, [None] * len(keypad.key_ring)
        reader.insert_seq = shuffler.cycle = 0
        sup = await b.start()
        for _ in range(3):  # the reset holds past the settle window: decided
            await sup.settle()
        alarms = [p for k, p in journal_kinds(b.journal) if k == "alarm_raised"]
        assert sorted(str(p["message"]).split(":")[0] for p in alarms) == sorted(reset)
        assert all("reset" in str(p["message"]) for p in alarms)
        assert sup.table.device_seen["shuffler"]["cycle"] == 0  # no alarm: a new baseline, once
        for _ in range(3):
            await b.stop()
            sup = await b.start()
            for _ in range(3):
                await sup.settle()
        assert len([k for k, _ in journal_kinds(b.journal) if k == "alarm_raised"]) == len(alarms)
        assert (
            sup.table.device_seen["shoe"]["draw_seq"] == 0 and sup.table.device_seen["keypad"]["key_seq"] == 0
        )


async def test_a_restart_in_the_middle_of_the_cut_goes_on_with_it(tmp_path: Path) -> None:
    """673a.5(b)-(d) at the batch shuffler across a restart: the journal has the stack out and
    the cut made; while the appliance is down the dealer places the cover card and loads the
    shoe; the new appliance asks for the cover card's record, and the shoe's report of the stack
    coming in (refused until then, 673a.5(d)) puts the batch in play once it is recorded."""
    async with bench(tmp_path) as b:
        sup = await b.start()
        for back in sup.table.batches:
            assert (await sup.command("inspection_verified", {"back": back, "dealer": "d"}, "f", "floor"))[
                "ok"
            ]
        for _ in range(60):  # the shuffle's cycle on the virtual clock, then the stack comes out
            if sup.table.cut is not None and b.sim.tray is not None:
                break
            b.clock.advance(5.0)
            await sup.settle()
        assert sup.table.cut is not None and sup.snapshot()["asking"]["what"] == "cut"
        hands = b.dealer.hands  # type: ignore[union-attr]
        stack = hands.take_stack()
        assert (await sup.command("cut_made", {"at": 100, "by": 0}, "dealer-1", "dealer"))["ok"]
        hands.cut_stack(100)
        await b.stop()  # the appliance restarts; the dealer goes on
        hands.stack_into_shoe(len(stack.cards) // 4 + 3)
        sup = await b.start()
        assert sup.table.shoe_back is None  # no cover card recorded yet: the stack is not in play
        assert sup.snapshot()["asking"]["what"] == "cover_card"
        placed = await sup.command(
            "cover_card_placed", {"from_bottom": len(stack.cards) // 4 + 3}, "d", "dealer"
        )
        assert placed["ok"]
        assert sup.table.shoe_back == stack.back  # the shoe's report, kept, taken now
        assert "alarm_raised" not in [k for k, _ in journal_kinds(b.journal)]


async def test_devices_reset_while_run_runs_are_one_alarm_each_decided_live(tmp_path: Path) -> None:
    """Issue 21 item 4, the devices switched off and on while the appliance runs (their counters
    back at zero): each reset is decided live, one alarm per device with its counters journalled,
    and a restart of the appliance afterwards raises nothing (not "went backwards" again)."""
    async with bench(tmp_path, "double-attack") as b:
        sup = await b.opened(rounds=1)
        names = ("shoe", "keypad", "reader")
        wires = {n: b.sim.devices[n].register_sim.faults for n in names}  # type: ignore[union-attr]
        for wire in wires.values():
            wire.silent = True
        while not all(sup.health[n] is not DeviceHealth.ONLINE for n in names):
            b.clock.advance(1.0)
            await sup.settle()
        shoe, keypad, reader = (b.model(n) for n in names)
        reset = ["keypad", "shoe"] + (["reader"] if reader.insert_seq else [])
        shoe.draw_seq, shoe.ring = 0, [None] * len(shoe.ring)
        keypad.key_seq = 0  # the reference keypad keeps its ring (docs/devices/keypad.md)
        reader.insert_seq = 0
        for wire in wires.values():
            wire.silent = False
        for _ in range(4):  # back, then the settle window's polls
            b.clock.advance(1.0)
            await sup.settle()
        assert all(sup.health[n] is DeviceHealth.ONLINE for n in names)
        resets = [
            p for k, p in journal_kinds(b.journal) if k == "alarm_raised" and "reset" in str(p["message"])
        ]
        assert sorted(str(p["message"]).split(":")[0] for p in resets) == sorted(reset)
        seen = sup.table.device_seen
        assert seen["shoe"]["draw_seq"] == seen["keypad"]["key_seq"] == seen["reader"]["insert_seq"] == 0
        alarms = len([k for k, _ in journal_kinds(b.journal) if k == "alarm_raised"])
        await b.stop()
        sup = await b.start()
        for _ in range(3):
            await sup.settle()
        assert len([k for k, _ in journal_kinds(b.journal) if k == "alarm_raised"]) == alarms
