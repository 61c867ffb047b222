"""Put a frame-speaking model (the stub counter) on a pty serial line or on MQTT."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from typing import Protocol

import aiomqtt
import structlog

from controller.backoff import Backoff, BackoffPolicy
from controller.clock import REAL_CLOCK, Clock
from controller.errors import short_reason
from devices.config import LINE_FRAMING, Framing, MqttAccess, tls_context
from devices.drivers.base import stop_if_cancelling
from devices.errors import LinkDown
from devices.framing import Frame, LineDecoder, encode_frame
from devices.profiles import Profile
from devices.transport.links import close_quietly, login_refused
from devices.transport.mqtt_session import session
from sim.faults import WireFaults
from sim.models import StubCounterModel
from sim.pty import Pty, link_line, unlink_line

_log = structlog.get_logger("sim.frames")


class FrameSink(Protocol):
    where: str

    async def open(self, on_bytes: _OnBytes) -> None: ...
    async def send(self, data: bytes) -> None: ...
    async def close(self) -> None: ...


class _OnBytes(Protocol):
    def __call__(self, data: bytes) -> None: ...


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class PtySink:
    """A serial line on a pty; with ``link``, reached through a symlink at that path (the path the
    table's config names), which ``where`` then is."""

    def __init__(self, link: str = "", framing: Framing = LINE_FRAMING) -> None:
        self._pty: Pty | None = None
        self.link = link
        self.framing = framing
        self.where = ""

    async def open(self, on_bytes: _OnBytes) -> None:
        self._pty = Pty(self.framing)
        if self.link:
            link_line(self.link, self._pty.path)
        self.where = self.link or self._pty.path
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

    async def send_all(self, data: bytes, chunk: int = 4096) -> None:
        """Every byte of ``data``, as fast as the other end reads (a flood; ``send`` writes what
        the pty takes at once and drops the rest, as a UART with a full buffer would)."""
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        while view and self._pty is not None:
            fd = self._pty.fd
            try:
                view = view[os.write(fd, view[:chunk]) :]
                continue
            except BlockingIOError:
                pass
            except OSError:
                return
            writable: asyncio.Future[None] = loop.create_future()
            loop.add_writer(fd, _resolve, writable)
            try:
                await writable
            finally:
                loop.remove_writer(fd)

    async def close(self) -> None:
        if self._pty is not None:
            asyncio.get_running_loop().remove_reader(self._pty.fd)
            if self.link:
                unlink_line(self.link, self._pty.path)
            self._pty.close()
            self._pty = None


class MqttSink:
    """The device's side of an MQTT device: publishes on ``<topic>/out``, listens on ``/in``.

    It logs in as the device (``access``: the device's own account, with the TLS the appliance's
    link uses, so the shipped ACL lets it write its ``out`` topic) and, like a real device, rides
    out a broker restart: a lost connection is retried after the backoff policy's capped, doubling,
    jittered delay and ``<topic>/in`` subscribed again. Frames sent while it is away are dropped, as
    a stub counter without a buffer drops them. Only the first connection can fail ``open`` (one
    LinkDown line): a refused login is not worth retrying, and a simulator that never came up should
    say so rather than look like a device the appliance cannot see.
    """

    def __init__(
        self,
        host: str,
        port: int,
        topic: str,
        *,
        label: str = "",
        access: MqttAccess | None = None,
        backoff: BackoffPolicy | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.host, self.port, self.topic = host, port, topic
        self.access = access or MqttAccess()
        scheme = "mqtts" if self.access.tls else "mqtt"
        self.where = f"{scheme}://{host}:{port}/{topic}"  # one token: `tablectl sim` lists key=value
        self.label = label or self.where  # "<file>: devices.<name>" from SimTable, for messages
        self.clock = clock
        self._backoff = Backoff(backoff or BackoffPolicy(), clock=clock)
        self._conn: _Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()  # set by close(): the reconnect loop stops
        if self.access.password is not None and not self.access.tls:
            _log.warning("sim_mqtt_password_without_tls", device=self.label)

    async def _connect(self) -> _Connection:
        a = self.access
        stack = contextlib.AsyncExitStack()
        try:
            # The TLS context is built per connection, as the appliance's link builds it.
            client = aiomqtt.Client(
                self.host,
                self.port,
                identifier=f"tablectl-sim-{secrets.token_hex(4)}",
                username=a.username,
                password=a.password,
                timeout=5,
                keepalive=10,
                tls_context=tls_context(a.tls, a.ca_file),
            )
            await stack.enter_async_context(session(client))
            await client.subscribe(f"{self.topic}/in", qos=1)
        except BaseException:
            await close_quietly(stack)
            raise
        return _Connection(client, stack)

    async def open(self, on_bytes: _OnBytes) -> None:
        self._closing.clear()
        try:
            conn = await self._connect()
        except (aiomqtt.MqttError, OSError) as exc:
            raise LinkDown(self._first_failure(exc)) from None
        self._conn = conn
        self._task = asyncio.create_task(self._run(on_bytes), name=f"sim-mqtt {self.topic}")

    def _first_failure(self, exc: BaseException) -> str:
        reason = short_reason(exc)
        if login_refused(exc):
            who = f" as {self.access.username}" if self.access.username else " without an account"
            return (
                f"{self.label}: the broker at {self.host}:{self.port} refused the sim's login{who} ({reason})"
            )
        return f"{self.label}: the sim cannot connect to the broker at {self.host}:{self.port} ({reason})"

    async def _run(self, on_bytes: _OnBytes) -> None:
        """Pump ``/in`` while connected; after a loss, reconnect until closed."""
        while not self._closing.is_set():
            conn = self._conn
            if conn is not None:
                await _pump(conn.client, on_bytes)
                self._conn = None
                conn.lost()
                await close_quietly(conn.stack)
                if self._closing.is_set():
                    return
                _log.warning("sim_mqtt_lost", device=self.label, at=self.where)
            await self.clock.sleep(self._backoff.failed())
            stop_if_cancelling()  # aiomqtt's wait_for can swallow the cancel of close()
            if self._closing.is_set():
                return
            try:
                conn = await self._connect()
            except (aiomqtt.MqttError, OSError) as exc:
                # Retried even when the login is refused: mid-run that is a broker being
                # reconfigured, and the device would keep trying too.
                event = "sim_mqtt_login_refused" if login_refused(exc) else "sim_mqtt_reconnect_failed"
                _log.warning(event, device=self.label, at=self.where, reason=short_reason(exc))
                continue
            if self._closing.is_set():
                await close_quietly(conn.stack)
                return
            self._conn = conn
            self._backoff.succeeded()
            _log.info("sim_mqtt_reconnected", device=self.label, at=self.where)

    async def send(self, data: bytes) -> None:
        conn = self._conn
        if conn is None or not data:
            return  # away from the broker: the frame is gone, as on the real device
        try:
            async with asyncio.timeout(None) as deadline:
                # A QoS 1 publish waits for the broker's ack, which a dead connection never sends;
                # the loss ends the wait (see _Connection.lost) instead of aiomqtt's 5 s timeout.
                conn.waiting.add(deadline)
                try:
                    await conn.client.publish(f"{self.topic}/out", data, qos=1)
                finally:
                    conn.waiting.discard(deadline)
        except (aiomqtt.MqttError, TimeoutError):
            pass  # the frame went down with the connection; never the simulator's problem

    async def close(self) -> None:
        self._closing.set()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.lost()
            # Disconnecting first ends the pump's message loop; the cancel alone can be lost on
            # Python 3.11 when it lands as one of aiomqtt's wait_for calls completes.
            await close_quietly(conn.stack)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _Connection:
    """One login to the broker, and the publishes waiting on its acks."""

    def __init__(self, client: aiomqtt.Client, stack: contextlib.AsyncExitStack) -> None:
        self.client, self.stack = client, stack
        self.waiting: set[asyncio.Timeout] = set()

    def lost(self) -> None:
        now = asyncio.get_running_loop().time()
        for deadline in list(self.waiting):
            # lost() runs twice for one loss (the pump's end, then close()); the first call's
            # deadline may already have fired, and a Timeout that is expiring refuses reschedule().
            if not deadline.expired():
                deadline.reschedule(now)


async def _pump(client: aiomqtt.Client, on_bytes: _OnBytes) -> None:
    """Hand on what arrives on ``/in`` until the connection ends (MqttError, or a disconnect)."""
    with contextlib.suppress(aiomqtt.MqttError):
        async for msg in client.messages:
            if isinstance(msg.payload, bytes | bytearray):
                on_bytes(bytes(msg.payload))


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
