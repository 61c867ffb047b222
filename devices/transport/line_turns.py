"""Turns on a shared bus: one request on the line at a time, the waiting served in order with the
urgent ones first.

An RTU line at 19,200 baud carries a one-register read in ~10.6 ms and a device's poll block in
tens of ms, and all the devices on it share it. A keypad's look at its key counter is the
past-posting window (687a.9(b)): it must not wait behind the other devices' polls queued before
it, only for the request already on the wire. Ordinary requests keep their order among
themselves, so every device is still polled at its rate: the urgent looks are few and short.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator


class LineTurns:
    """One request on the line at a time; the waiting go in order, urgent ones first."""

    def __init__(self) -> None:
        self._busy = False
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @contextlib.asynccontextmanager
    async def turn(self, urgent: bool = False) -> AsyncIterator[None]:
        if self._busy or self._waiting:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (0 if urgent else 1, next(self._order), fut))
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._pass_on()  # handed the line as it was cancelled: hand it on
                raise
        else:
            self._busy = True
        try:
            yield
        finally:
            self._pass_on()

    def _pass_on(self) -> None:
        while self._waiting:
            _, _, fut = heapq.heappop(self._waiting)
            if not fut.done():
                fut.set_result(None)  # the line stays busy: it is that waiter's now
                return
        self._busy = False
