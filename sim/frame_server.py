"""Put a frame-speaking model (the stub counter) on a pty serial line or on MQTT."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from typing import Protocol

import aiomqtt
import structlog

from devices.clock import REAL_CLOCK, Clock
from devices.framing import Frame, LineDecoder, encode_frame
from devices.profiles import Profile
from sim.faults import WireFaults
from sim.models import StubCounterModel
from sim.pty import Pty

_log = structlog.get_logger("sim.frames")


class FrameSink(Protocol):
    where: str

    async def open(self, on_bytes: _OnBytes) -> None: ...
    async def send(self, data: bytes) -> None: ...
    async def close(self) -> None: ...


class _OnBytes(Protocol):
    def __call__(self, data: bytes) -> None: ...


class PtySink:
    def __init__(self) -> None:
        self._pty: Pty | None = None
        self.where = ""

    async def open(self, on_bytes: _OnBytes) -> None:
        self._pty = Pty()
        self.where = self._pty.path
        fd = self._pty.fd

        def readable() -> None:
            try:
                data = os.read(fd, 4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if data:
                on_bytes(data)

        asyncio.get_running_loop().add_reader(fd, readable)

    async def send(self, data: bytes) -> None:
        if self._pty is not None and data:
            with contextlib.suppress(BlockingIOError, OSError):
                os.write(self._pty.fd, data)

    async def close(self) -> None:
        if self._pty is not None:
            asyncio.get_running_loop().remove_reader(self._pty.fd)
            self._pty.close()
            self._pty = None


class MqttSink:
    """The device's side of an MQTT device: publishes on ``<topic>/out``, listens on ``/in``."""

    def __init__(self, host: str, port: int, topic: str) -> None:
        self.host, self.port, self.topic = host, port, topic
        self.where = f"{host}:{port} {topic}"
        self._client: aiomqtt.Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stack: contextlib.AsyncExitStack | None = None

    async def open(self, on_bytes: _OnBytes) -> None:
        client = aiomqtt.Client(self.host, self.port, identifier=f"tablectl-sim-{secrets.token_hex(4)}")
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(client)
        await client.subscribe(f"{self.topic}/in", qos=1)
        self._client, self._stack = client, stack

        async def pump() -> None:
            with contextlib.suppress(aiomqtt.MqttError):
                async for msg in client.messages:
                    if isinstance(msg.payload, bytes | bytearray):
                        on_bytes(bytes(msg.payload))

        self._task = asyncio.create_task(pump())

    async def send(self, data: bytes) -> None:
        if self._client is not None and data:
            with contextlib.suppress(aiomqtt.MqttError):
                await self._client.publish(f"{self.topic}/out", data, qos=1)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()


class StubCounterSim:
    """A stub counter on the wire: heartbeat every ``heartbeat_s`` (on the clock), a count frame
    after each count, the last count again on request."""

    def __init__(
        self,
        model: StubCounterModel,
        profile: Profile,
        sink: FrameSink,
        *,
        clock: Clock = REAL_CLOCK,
        heartbeat_s: float = 1.0,
    ) -> None:
        self.model = model
        self.profile = profile
        self.sink = sink
        self.clock = clock
        self.heartbeat_s = heartbeat_s
        self.faults = WireFaults()
        self._decoder = LineDecoder(profile)
        self._task: asyncio.Task[None] | None = None
        self._sent = asyncio.Event()

    @property
    def where(self) -> str:
        return self.sink.where

    async def start(self) -> None:
        await self.sink.open(self._incoming)
        self._task = asyncio.create_task(self._heartbeats())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.sink.close()

    def _incoming(self, data: bytes) -> None:
        for item in self._decoder.feed(data):
            if isinstance(item, Frame) and item.name == "request" and self.model.seq:
                asyncio.get_running_loop().create_task(self.send_count())

    async def _heartbeats(self) -> None:
        while True:
            await self.send_frame("heartbeat", {"health": self.model.health})
            await self.clock.sleep(self.heartbeat_s)

    async def send_frame(self, name: str, values: dict[str, int]) -> None:
        await self.sink.send(self.faults.shape(encode_frame(self.profile, name, values)))

    async def send_count(self) -> None:
        m = self.model
        await self.send_frame("count", {"seq": m.seq, "count": m.count, "verified": int(m.verified)})

    async def count(self, cards: int) -> None:
        """The dealer puts a stub of ``cards`` cards in; the device counts and reports."""
        self.model.count_stub(cards)
        await self.send_count()

    async def send_raw(self, data: bytes) -> None:
        """Put arbitrary bytes on the line (for fuzz tests)."""
        await self.sink.send(data)
