"""The broker on its own event loop in a daemon thread, for synchronous callers (``tablectl demo``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sim.mqtt_broker.broker import EmbeddedBroker

START_GUARD_S = 30.0  # binding a socket takes milliseconds; this only keeps a broken start from hanging


@dataclass
class _Started:
    port: int = 0
    loop: asyncio.AbstractEventLoop | None = None
    stop: asyncio.Event | None = None
    error: BaseException | None = None


@contextlib.contextmanager
def embedded_broker_thread(
    host: str = "127.0.0.1", port: int = 0, *, users: Mapping[str, str] | None = None
) -> Iterator[int]:
    """Run an ``EmbeddedBroker`` in a daemon thread with its own event loop; yield its port.

    On exit the broker stops (closing every client) and the thread ends. An error in starting
    (the port is taken) is raised here, in the caller's thread.
    """
    started = _Started()
    ready = threading.Event()

    async def serve() -> None:
        broker = EmbeddedBroker(users=users)
        try:
            started.port = await broker.start(host, port)
        except BaseException as e:
            started.error = e
            ready.set()
            return
        started.loop, started.stop = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        try:
            await started.stop.wait()
        finally:
            await broker.stop()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name="mqtt-broker", daemon=True)
    thread.start()
    if not ready.wait(START_GUARD_S):
        raise RuntimeError("the embedded MQTT broker did not start")
    if started.error is not None:
        thread.join()
        raise started.error
    try:
        yield started.port
    finally:
        assert started.loop is not None and started.stop is not None
        with contextlib.suppress(RuntimeError):  # the loop already closed: nothing left to stop
            started.loop.call_soon_threadsafe(started.stop.set)
        thread.join(START_GUARD_S)
