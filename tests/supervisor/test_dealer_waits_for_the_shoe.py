"""The virtual dealer takes bets only once the batch in play is in the shoe. The table shows a
batch in play as soon as it has journalled the shuffler's eject, a moment before the shuffler
carries it out; a dealer who pressed Start Game then drew from an empty shoe (the wire dealer
beside `tablectl run` did, now and then, once the journal committed off the event loop)."""

from __future__ import annotations

import asyncio

from controller.cards import parse_card
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import table_file
from devices.profiles import DeviceKind
from sim.actions import TableHands
from sim.clock import VirtualClock
from sim.models import DealtCard
from sim.table import SimTable


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
