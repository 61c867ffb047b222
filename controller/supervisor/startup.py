"""The connect grace: a device not heard from since the controller started is still connecting.

Started before its simulators (or a device powered up after the controller), every device fails
its first polls: without a grace the first ``offline_after`` refused connects made a halting
alarm (the reader malfunctioned, the shoe failed) out of devices that were simply not up yet.
Until a device has answered once, its connection failures (``DeviceDegraded``,
``DeviceOffline``) are held back for its ``connect_grace_s``: it stays ``connecting`` and the
supervisor logs ``waiting_for_device``. A device still silent when the grace runs out fails then,
with the alarm its failure raises. What a device says about itself (a jam, a failed reader) is an
answer, never held back; a device that answered once fails as before, at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from controller.clock import Clock
from devices import events as dev
from devices.config import DeviceConfig


class ConnectGrace:
    def __init__(self, clock: Clock, devices: list[DeviceConfig]) -> None:
        self.clock = clock
        now = clock.now()
        self.grace = {d.name: d.connect_grace_s for d in devices}
        self.deadline = {d.name: now + d.connect_grace_s for d in devices}
        self.held: dict[str, dev.DeviceDegraded | dev.DeviceOffline] = {}

    def holds(self, event: dev.DeviceEvent, answered: bool) -> bool:
        """Whether ``event`` is held back: a connection failure of a device that has not answered
        since start, within its grace. The last one held is kept for when the grace runs out."""
        name = event.device
        if answered or self.clock.now() >= self.deadline.get(name, 0.0):
            self.held.pop(name, None)
            return False
        if isinstance(event, dev.DeviceDegraded | dev.DeviceOffline):
            self.held[name] = event
            return True
        return False

    async def run(self, events: asyncio.Queue[dev.DeviceEvent], answered: Callable[[str], bool]) -> None:
        """At each device's deadline, hand its last held failure on (the drivers do not repeat
        one: a device offline stays offline without a new event) if it has still not answered."""
        for name, deadline in sorted(self.deadline.items(), key=lambda item: item[1]):
            wait = deadline - self.clock.now()
            if wait > 0:
                await self.clock.sleep(wait)
            event = self.held.pop(name, None)
            if event is None or answered(name):
                continue
            why = f"no answer in the {self.grace[name]:g} s after start ({event.reason})"
            await events.put(type(event)(name, why))
