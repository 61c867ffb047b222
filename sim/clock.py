"""Clocks for simulators and tests: the real one, and a virtual one that moves only when told.

``VirtualClock.advance(seconds)`` moves time forward and wakes every sleeper that is due, so a
test can run a 30-second shuffle cycle without waiting for it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from controller.clock import REAL_CLOCK, Clock, RealClock

__all__ = ["REAL_CLOCK", "Clock", "RealClock", "VirtualClock"]


class VirtualClock:
    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), fut))
        await fut

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    @property
    def sleepers(self) -> int:
        return sum(1 for *_, f in self._sleepers if not f.done())
