"""The one clock every device driver and simulator takes.

Drivers poll and time out against a clock object rather than calling ``time`` directly, so a
simulated gaming day can run on a virtual clock (``sim.clock.VirtualClock``) in seconds.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale; only differences mean anything."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


REAL_CLOCK = RealClock()
