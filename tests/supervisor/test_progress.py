"""Waiting on the supervisor's progress (controller/supervisor/progress.py): whoever waits in
``wait_for`` is told of every change its predicate can depend on, the table's lock let go among
them. The whole table over the wire is tests/supervisor/test_stalls.py (the stall alarm's step)."""

from __future__ import annotations

import asyncio

from controller.supervisor.progress import Progress
from devices import events as dev

GUARD_S = 60.0  # failure guard only


async def test_the_lock_let_go_after_the_last_notice_ends_the_wait_for_idle() -> None:
    """A step a timer takes (the stall check's alarm) holds the lock across its journal commit
    and tells nobody when it ends; a poll finishing meanwhile notifies while the table is not
    idle. Letting the lock go must wake the waiter: nothing else will."""
    events: asyncio.Queue[dev.DeviceEvent] = asyncio.Queue()
    progress = Progress(events, {}, unsent=lambda: 0)
    async with progress.lock:  # the timer's step
        waiter = asyncio.create_task(progress.wait_for(progress.idle))
        await asyncio.sleep(0)  # the waiter looks: the lock is held, not idle
        await progress.notify()  # a poll finished during the step
        await asyncio.sleep(0)  # the waiter looks again: still held
        assert not waiter.done()
    await asyncio.wait_for(waiter, GUARD_S)
    assert progress.idle()
