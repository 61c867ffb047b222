"""The virtual dealer takes bets only once the batch in play is in the shoe. The table shows a
batch in play as soon as it has journalled the shuffler's eject, a moment before the shuffler
carries it out; a dealer who pressed Start Game then drew from an empty shoe (the wire dealer
beside `tablectl run` did, now and then, once the journal committed off the event loop)."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.cards import parse_card
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import table_file
from devices.events import ShufflerState, Slot
from devices.profiles import DeviceKind
from sim.actions import TableHands
from sim.clock import VirtualClock
from sim.models import DealtCard
from sim.table import SimTable
from sim.wire_dealer import WireDealer


async def test_the_dealer_sees_the_batch_arrive_in_the_shoe() -> None:
    config = load_table_config(table_file("down-under"), side="both")
    sim = SimTable(list(config.devices), config.options.spec, seed=3, clock=VirtualClock())
    hands = TableHands(sim)
    shoe = hands.model(DeviceKind.SHOE)
    waiting = asyncio.create_task(hands.shoe_holds("blue", within_s=60))
    await asyncio.sleep(0)  # the dealer is now looking at the empty shoe
    assert not waiting.done()
    shoe.load([DealtCard(parse_card("AS"), face_up=False)], "red")  # another batch: still waiting
    await asyncio.sleep(0)
    assert not waiting.done()
    shoe.load([DealtCard(parse_card("KH"), face_up=False)], "blue")
    assert await waiting
    assert shoe.on_load == []  # the dealer stopped watching


async def test_a_batch_that_never_comes_is_said() -> None:
    config = load_table_config(table_file("down-under"), side="both")
    sim = SimTable(list(config.devices), config.options.spec, seed=3, clock=VirtualClock())
    assert not await TableHands(sim).shoe_holds("blue", within_s=0)


class _QuietTable:
    """A table that has asked for the cut and then says nothing more: once it has journalled the
    eject its public state does not change until the dealer acts, so a dealer who waited for a
    new state to see the stack come out waited for ever (seen beside `tablectl run` under load,
    when the state reached the dealer before the eject reached the shuffler)."""

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self.snapshot = snapshot
        self.floor_commands: list[tuple[str, dict[str, Any]]] = []

    async def state(self) -> dict[str, Any]:
        return self.snapshot

    async def wait(self) -> dict[str, Any]:
        await asyncio.Event().wait()  # nothing new is ever published
        raise AssertionError("unreachable")

    async def touched(self, kind: DeviceKind) -> None:
        return None

    async def floor(self, command: str, args: dict[str, Any]) -> None:
        self.floor_commands.append((command, args))


def _eject(sim: SimTable, slot: Slot) -> None:
    """The shuffler carries out an eject written to its command registers."""
    info = sim.by_kind(DeviceKind.SHUFFLER)
    assert info is not None and info.register_sim is not None and info.register_sim.on_command is not None
    info.register_sim.on_command("eject_to_shoe", info.model.eject(slot))


async def test_the_dealer_cuts_a_stack_that_comes_out_after_the_cut_is_asked() -> None:
    config = load_table_config(table_file("down-under"), side="both")
    sim = SimTable(list(config.devices), config.options.spec, seed=3, clock=VirtualClock())
    shuffler = sim.by_kind(DeviceKind.SHUFFLER)
    assert shuffler is not None
    slot = next(iter(Slot))
    shuffler.model.start(slot)
    sim.clock.advance(shuffler.model.cycle_s + 1)
    shuffler.model.update()
    assert shuffler.model.slots[slot].state is ShufflerState.READY
    ask = {"what": "cut", "seat": 0, "id": "cut-1"}
    table = _QuietTable({"asking": ask, "batch_in_shoe": None, "batches": {}})
    dealer = WireDealer(sim, table, boxes=2)
    cutting = asyncio.create_task(dealer._act(ask, table.snapshot))
    await asyncio.sleep(0)  # the dealer has read the ask; the stack is not out yet
    assert not cutting.done()
    _eject(sim, slot)
    async with asyncio.timeout(60):  # a guard only: the cut follows the eject at once
        await cutting
    assert [c for c, _ in table.floor_commands] == ["cut_made"]


async def test_a_stack_that_never_comes_out_is_said() -> None:
    config = load_table_config(table_file("down-under"), side="both")
    sim = SimTable(list(config.devices), config.options.spec, seed=3, clock=VirtualClock())
    assert not await TableHands(sim).stack_out(within_s=0)
    assert sim.on_tray == []  # the dealer stopped watching
