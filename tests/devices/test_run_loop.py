"""The supervisor's view: build every driver of a table, run them as tasks, read one queue."""

from __future__ import annotations

import asyncio

from controller.clock import REAL_CLOCK
from devices.commands import LockSensors
from devices.drivers.factory import build_drivers
from devices.events import BetSensed, DeviceEvent, DeviceOnline, SensorsLocked
from tests.devices.conftest import GUARD_S, Rig, fast


async def test_all_drivers_of_a_table_feed_one_queue(rig: Rig) -> None:
    events: asyncio.Queue[DeviceEvent] = asyncio.Queue()
    configs = [fast(c, poll_interval_s=0.01) for c in rig.table.driver_configs()]
    drivers, buses = build_drivers(configs, clock=REAL_CLOCK, events=events)
    tasks = [asyncio.create_task(d.run(), name=d.name) for d in drivers]
    try:
        online: set[str] = set()
        async with asyncio.timeout(GUARD_S):
            while online != {"shuffler", "shoe", "reader", "keypad"}:
                ev = await events.get()
                if isinstance(ev, DeviceOnline):
                    online.add(ev.device)
            rig.model("keypad").place_bet(2, 1)
            keypad = next(d for d in drivers if d.name == "keypad")
            await keypad.send(LockSensors())
            seen: list[DeviceEvent] = []
            while not any(isinstance(e, SensorsLocked) and e.locked for e in seen):
                seen.append(await events.get())
        # Placed before the lock, so sensed no later than the poll that sees the lock.
        assert BetSensed("keypad", 2, 1, True) in seen
    finally:
        for t in tasks:
            t.cancel()
        # Bounded: a driver that ignored its cancellation fails the test instead of hanging it.
        _, pending = await asyncio.wait(tasks, timeout=GUARD_S)
        buses.close()
        assert not pending, f"drivers outlived their cancellation: {[t.get_name() for t in pending]}"
