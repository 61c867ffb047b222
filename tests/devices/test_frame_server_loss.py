"""The MQTT sink's loss handling: a publish waiting on an ack ends when the connection is lost,
however many times the loss is reported (the pump's end and close() both report it)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from sim.frame_server import _Connection


async def test_a_second_loss_after_the_deadline_fired_is_harmless() -> None:
    conn = _Connection(cast(Any, None), contextlib.AsyncExitStack())
    entered = asyncio.Event()
    outcome: list[str] = []

    async def waiting_publish() -> None:
        try:
            async with asyncio.timeout(None) as deadline:
                conn.waiting.add(deadline)
                entered.set()
                await asyncio.Event().wait()  # an ack that never comes
        except TimeoutError:
            outcome.append("ended by the loss")

    task = asyncio.create_task(waiting_publish())
    await entered.wait()
    loop = asyncio.get_running_loop()
    conn.lost()  # schedules the deadline's expiry with call_soon
    # Queued after the expiry, so it runs with the deadline expiring but its task not yet resumed:
    # exactly the moment close() hit in the flaky run.
    second: asyncio.Future[None] = loop.create_future()

    def lost_again() -> None:
        try:
            conn.lost()
        except RuntimeError as e:  # what the old code raised here
            second.set_exception(e)
        else:
            second.set_result(None)

    loop.call_soon(lost_again)
    await second
    await task
    assert outcome == ["ended by the loss"]
