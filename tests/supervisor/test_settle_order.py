"""The settle window's own rules, on the virtual clock (controller/supervisor/settle.py): what it
holds, what goes past it, the order it hands events back in, and what closes it. The whole table
over the wire is tests/supervisor/test_settle_window.py."""

from __future__ import annotations

import asyncio

import structlog

from controller.cards import parse_card
from controller.supervisor.progress import Progress
from controller.supervisor.settle import SETTLE_READS, SETTLE_S, Settled, SettleWindow
from devices import events as dev
from devices.drivers.base import Wake
from sim.clock import VirtualClock

SHUFFLER = "shuffler"
GUARD_S = 60.0  # failure guard only


def window(clock: VirtualClock) -> tuple[SettleWindow, Progress, asyncio.Queue[dev.DeviceEvent]]:
    events: asyncio.Queue[dev.DeviceEvent] = asyncio.Queue()
    progress = Progress(events, {}, unsent=lambda: 0)
    progress.polls_started[SHUFFLER] = progress.polls_done[SHUFFLER] = progress.read_ok[SHUFFLER] = 0
    progress.poke[SHUFFLER] = Wake()
    log = structlog.get_logger("test")
    settle = SettleWindow(shuffler=SHUFFLER, clock=clock, events=events, progress=progress, log=log)
    return settle, progress, events


def burn(seq: int) -> dev.CardDrawn:
    return dev.CardDrawn("shoe", parse_card("7H"), face_up=False, sequence=seq)


START = dev.ButtonPressed("keypad", dev.Key.START_GAME, sequence=4)
SLOT = dev.BatchSlotChanged(SHUFFLER, dev.Slot.A, dev.ShufflerState.IDLE, "red", 8)
CHIPS = dev.BetSensed("keypad", 1, 1, True)


async def polled(progress: Progress, ok: bool = True) -> None:
    """A poll of the shuffler, as the supervisor's poll hooks count it."""
    progress.polls_started[SHUFFLER] += 1
    progress.polls_done[SHUFFLER] += 1
    if ok:
        progress.read_ok[SHUFFLER] = progress.polls_started[SHUFFLER]
    await progress.notify()


async def test_held_until_the_shuffler_is_read_then_handed_on_in_order() -> None:
    clock = VirtualClock()
    settle, progress, events = window(clock)
    task = asyncio.create_task(settle.run())
    try:
        assert settle.sort(CHIPS, lambda: True) == [CHIPS]  # chips alone open nothing
        assert settle.sort(burn(1), lambda: True) == []  # held: the rack is in doubt
        assert progress.poke[SHUFFLER].is_set()  # the shuffler is read now, not at its turn
        assert settle.sort(START, lambda: True) == []  # behind the burn
        assert settle.sort(SLOT, lambda: True) == [SLOT]  # the shuffler's own go straight on
        await polled(progress, ok=False)  # a failed poll is no read
        await asyncio.sleep(0)
        assert events.empty()
        await polled(progress)
        marker = await asyncio.wait_for(events.get(), GUARD_S)
        assert isinstance(marker, Settled) and marker.by == "shuffler_read"
        assert settle.sort(marker, lambda: False) == [burn(1), START]
        assert not settle.holding
        assert settle.sort(marker, lambda: False) == []  # a marker twice hands on nothing
    finally:
        task.cancel()


async def test_the_deadline_closes_it_and_one_window_a_shoe() -> None:
    clock = VirtualClock()
    settle, _, events = window(clock)
    task = asyncio.create_task(settle.run())
    try:
        assert settle.sort(burn(1), lambda: True) == []
        await asyncio.sleep(0)
        clock.advance(SETTLE_S / 2)
        await asyncio.sleep(0)
        assert events.empty()
        clock.advance(SETTLE_S / 2)
        marker = await asyncio.wait_for(events.get(), GUARD_S)
        assert isinstance(marker, Settled) and marker.by == "deadline"
        assert settle.sort(marker, lambda: True) == [burn(1)]
        # Decided at this shoe: the alarm stands, the next cards are not held one by one ...
        assert settle.sort(burn(2), lambda: True) == [burn(2)]
        # ... until the rack is clear; the next shoe change has its window again.
        assert settle.sort(burn(3), lambda: False) == [burn(3)]
        assert settle.sort(burn(4), lambda: True) == []
    finally:
        task.cancel()


async def test_a_read_with_the_slot_still_empty_waits_for_the_next() -> None:
    """A shuffler may take a moment to sense the cards put into its slot (the wire soak saw 90 ms
    and 119 ms alarmed when the first read decided): a read that still shows the rack in doubt
    waits for the shuffler's next read, within the same deadline."""
    clock = VirtualClock()
    settle, progress, events = window(clock)
    task = asyncio.create_task(settle.run())
    try:
        assert settle.sort(burn(1), lambda: True) == []
        await asyncio.sleep(0)
        await polled(progress)  # read: the slot still empty
        marker = await asyncio.wait_for(events.get(), GUARD_S)
        assert marker.by == "shuffler_read"
        assert settle.sort(marker, lambda: True) == [] and settle.holding  # the next read decides
        await polled(progress)  # read again: the batch is back
        again = await asyncio.wait_for(events.get(), GUARD_S)
        assert isinstance(again, Settled) and again.window == marker.window
        assert settle.sort(again, lambda: False) == [burn(1)]
        # At the next shoe change, a used batch that never shows up: the reads go on until the
        # deadline decides.
        assert settle.sort(burn(2), lambda: False) == [burn(2)]  # the rack clear meanwhile
        assert settle.sort(burn(3), lambda: True) == []
        await asyncio.sleep(0)
        await polled(progress)
        read = await asyncio.wait_for(events.get(), GUARD_S)
        assert settle.sort(read, lambda: True) == []
        clock.advance(SETTLE_S)
        late = await asyncio.wait_for(events.get(), GUARD_S)
        assert isinstance(late, Settled) and late.by == "deadline"
        assert settle.sort(late, lambda: True) == [burn(3)]
    finally:
        task.cancel()


async def test_on_demand_polling_the_first_read_decides() -> None:
    """Where nothing polls by itself (a virtual clock: the dealer says when), no later read would
    come: the first read decides."""
    clock = VirtualClock()
    settle, progress, events = window(clock)
    settle.later_reads = False
    task = asyncio.create_task(settle.run())
    try:
        assert settle.sort(burn(1), lambda: True) == []
        await asyncio.sleep(0)
        await polled(progress)
        marker = await asyncio.wait_for(events.get(), GUARD_S)
        assert settle.sort(marker, lambda: True) == [burn(1)]
    finally:
        task.cancel()


async def test_a_read_that_comes_late_on_a_busy_machine_still_decides() -> None:
    """Issue 34 (the wire soak under CPU load): the window closed 0.5 s after the draw, a guess of
    how long a shuffler poll takes; on a busy machine the poll had not been read by then and the
    used batch, back in its slot, was alarmed. The shuffler's reads decide now, however late."""
    clock = VirtualClock()
    settle, progress, events = window(clock)
    task = asyncio.create_task(settle.run())
    try:
        assert settle.sort(burn(1), lambda: True) == []
        await asyncio.sleep(0)
        clock.advance(2.0)  # the loop starved: no shuffler poll has finished yet
        for _ in range(20):  # every task that the clock woke has run
            await asyncio.sleep(0)
        assert events.empty() and settle.holding
        await polled(progress)  # read at last: the batch is back
        marker = await asyncio.wait_for(events.get(), GUARD_S)
        assert isinstance(marker, Settled) and marker.by == "shuffler_read"
        assert settle.sort(marker, lambda: False) == [burn(1)]
    finally:
        task.cancel()


async def test_the_shuffler_decides_within_its_reads_answered_or_not() -> None:
    """A used batch that never shows up is decided at the SETTLE_READS-th read; a shuffler that
    does not answer, by its SETTLE_READS failed polls (its own alarm follows)."""
    clock = VirtualClock()
    settle, progress, events = window(clock)
    task = asyncio.create_task(settle.run())
    try:
        assert settle.sort(burn(1), lambda: True) == []
        for n in range(1, SETTLE_READS + 1):
            await polled(progress)
            marker = await asyncio.wait_for(events.get(), GUARD_S)
            handed = settle.sort(marker, lambda: True)
            assert handed == ([burn(1)] if n == SETTLE_READS else []), n
        assert settle.sort(burn(2), lambda: False) == [burn(2)]  # the rack clear: the next shoe
        assert settle.sort(burn(3), lambda: True) == []
        for _ in range(SETTLE_READS):
            await polled(progress, ok=False)
        marker = await asyncio.wait_for(events.get(), GUARD_S)
        assert isinstance(marker, Settled) and marker.by == "shuffler_silent"
        assert settle.sort(marker, lambda: True) == [burn(3)]
    finally:
        task.cancel()
