"""Byte links for frame-based devices: a serial line (pyserial) or an MQTT topic pair (aiomqtt).

Both reconnect with exponential backoff and jitter, and both report failure as LinkDown or
DeviceTimeout with one line. Neither knows what a frame is; the driver's decoder does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import secrets
import ssl
from typing import Final, Protocol

import aiomqtt
import serial  # type: ignore[import-untyped]
import structlog
from paho.mqtt.reasoncodes import ReasonCode

from controller.backoff import Backoff, BackoffPolicy
from controller.clock import REAL_CLOCK, Clock
from controller.errors import short_reason
from devices.config import Endpoint, TransportKind, tls_context
from devices.errors import DeviceTimeout, LinkDown
from devices.transport.mqtt_session import session

_log = structlog.get_logger("devices.link")


# What a link holds for its driver, in bytes: far above a frame device's traffic between two reads
# (a few frames), and what a flood can cost in memory. Beyond it, bytes are dropped on arrival and
# counted (a UART overrun does the same), so a flood is bounded in memory and in decoding time.
MAX_BUFFERED_BYTES: Final = 64 * 1024
# MQTT messages received and not yet read by the driver; past it paho drops (and aiomqtt logs).
MAX_QUEUED_MESSAGES: Final = 256
# How long a serial write may wait for the line to take any more of its bytes before the link
# counts as lost (pyserial's write timeout of 1 s before, which blocked the whole event loop
# meanwhile). A stall guard, not a bound on the whole write: a line that keeps taking bytes is
# working, however long a large write takes on it.
WRITE_TIMEOUT_S: Final = 1.0


class ByteLink(Protocol):
    async def read(self, timeout_s: float) -> bytes: ...
    async def write(self, data: bytes) -> None: ...
    async def close(self) -> None: ...


class _Reconnect:
    """A link's backoff, told in the link's own terms: a try before its time is refused at once
    with LinkDown (the driver's poll goes on), and each failure is logged and becomes LinkDown."""

    def __init__(self, policy: BackoffPolicy, clock: Clock, what: str) -> None:
        self.backoff = Backoff(policy, clock=clock)
        self.what = what

    def check(self) -> None:
        wait = self.backoff.wait_left()
        if wait > 0:
            raise LinkDown(f"{self.what}: link down, reconnecting", retry_in_s=wait)

    def failed(self, reason: str) -> LinkDown:
        delay = self.backoff.failed()
        _log.warning("link_failed", link=self.what, reason=reason, retry_in_s=round(delay, 3))
        return LinkDown(f"{self.what}: {reason}")

    def succeeded(self) -> None:
        self.backoff.succeeded()


class SerialLink:
    """A serial line read through the event loop (no thread), reopened after any error.

    pyserial has no asyncio reads of its own, so the port is opened non-blocking and read from a
    loop reader callback; unplugging an adapter surfaces as an odd SerialException or OSError,
    which all mean the same thing here: the link is lost.
    """

    def __init__(self, endpoint: Endpoint, *, backoff: BackoffPolicy | None = None,
                 clock: Clock = REAL_CLOCK) -> None:  # fmt: skip
        if endpoint.transport is not TransportKind.SERIAL_LINE:
            raise ValueError(f"not a serial line: {endpoint.transport}")
        self.endpoint = endpoint
        self._clock = clock
        self._backoff = _Reconnect(backoff or BackoffPolicy(), clock, endpoint.path)
        self._port: serial.Serial | None = None
        self._chunks: asyncio.Queue[bytes | Exception] = asyncio.Queue()
        self._buffered = 0  # bytes in _chunks
        self.overrun_bytes = 0  # dropped on arrival because MAX_BUFFERED_BYTES were waiting

    def _open(self) -> serial.Serial:
        if self._port is not None:
            return self._port
        self._backoff.check()
        try:
            # The line's configured framing (docs/devices/README.md); what a pty can take on a pty.
            framing = self.endpoint.serial_framing.for_port(self.endpoint.path)
            port = serial.serial_for_url(
                self.endpoint.path, baudrate=self.endpoint.baudrate, timeout=0, write_timeout=1,
                **framing.pyserial(),
            )  # fmt: skip
        except (serial.SerialException, OSError, ValueError) as exc:
            raise self._backoff.failed(f"cannot open ({type(exc).__name__})") from None
        self._backoff.succeeded()
        self._chunks, self._buffered = asyncio.Queue(), 0
        asyncio.get_running_loop().add_reader(port.fileno(), self._readable, port)
        self._port = port
        return port

    def _readable(self, port: serial.Serial) -> None:
        try:
            data = port.read(max(1, port.in_waiting))
            if not data:
                raise serial.SerialException("readable but no data")
        except (serial.SerialException, OSError) as exc:
            self._drop()
            lost = LinkDown(f"{self.endpoint.path}: link lost ({type(exc).__name__})")
            self._chunks.put_nowait(lost)
            return
        if self._buffered + len(data) > MAX_BUFFERED_BYTES:
            self.overrun_bytes += len(data)  # read off the port all the same, or it stays readable
            return
        self._buffered += len(data)
        self._chunks.put_nowait(data)

    def _drop(self) -> None:
        port, self._port = self._port, None
        if port is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(port.fileno())
            with contextlib.suppress(Exception):
                port.close()

    async def read(self, timeout_s: float) -> bytes:
        self._open()
        try:
            async with asyncio.timeout(timeout_s):
                item = await self._chunks.get()
        except TimeoutError:
            raise DeviceTimeout(f"{self.endpoint.path}: nothing received in {timeout_s}s") from None
        if isinstance(item, Exception):
            self._backoff.failed("link lost")
            raise item
        self._buffered -= len(item)
        return item

    async def write(self, data: bytes) -> None:
        """Written as fast as the line takes it, never blocking the event loop: pyserial's own
        write waits in ``select`` (up to its write timeout) when the output buffer is full (a
        stalled line, flow control held), and every other device would wait with it. The port's
        descriptor is non-blocking (pyserial opens it so), so what does not fit waits on the
        loop's writer callback instead. The line is lost when it takes nothing for WRITE_TIMEOUT_S
        on the link's clock; each wait has the whole of it, as a megabyte through a pty is some
        hundreds of waits, and a busy machine made their sum pass a bound on the whole write."""
        port = self._open()
        rest = memoryview(data)
        try:
            while rest:
                try:
                    written = os.write(port.fileno(), rest)
                except BlockingIOError:
                    written = 0
                rest = rest[written:]
                if rest and not await _writable(port.fileno(), self._clock, WRITE_TIMEOUT_S):
                    self._drop()
                    raise self._backoff.failed(f"the line took nothing for {WRITE_TIMEOUT_S}s")
        except (serial.SerialException, OSError) as exc:
            self._drop()
            raise self._backoff.failed(f"write failed ({type(exc).__name__})") from None

    async def close(self) -> None:
        self._drop()


async def _writable(fd: int, clock: Clock, within_s: float) -> bool:
    """Whether ``fd`` can take more bytes within ``within_s`` on ``clock`` (the loop's writer
    callback; no thread, no blocking). Both at once counts as writable: the line took bytes."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    deadline = asyncio.ensure_future(clock.sleep(within_s))
    try:
        await asyncio.wait([ready, deadline], return_when=asyncio.FIRST_COMPLETED)
        return ready.done()
    finally:
        ready.cancel()
        deadline.cancel()
        with contextlib.suppress(Exception):  # the port may be closed meanwhile (link lost)
            loop.remove_writer(fd)


class MqttLink:
    """A device that publishes its frames on ``<topic>/out`` and takes commands on ``<topic>/in``.

    aiomqtt leaves reconnection to us: a lost broker surfaces as MqttError (sometimes late, at the
    next publish or inside message iteration); the next read or write builds a new client after
    the backoff delay and subscribes again. With ``tls`` the broker's certificate is checked
    against ``ca_file`` (or the system's trust store) and its host name; the password is only
    ever handed to aiomqtt, never put in a message.
    """

    def __init__(self, endpoint: Endpoint, *, backoff: BackoffPolicy | None = None,
                 clock: Clock = REAL_CLOCK, username: str | None = None,
                 password: str | None = None, tls: bool = False,
                 ca_file: pathlib.Path | None = None) -> None:  # fmt: skip
        if endpoint.transport is not TransportKind.MQTT:
            raise ValueError(f"not an MQTT endpoint: {endpoint.transport}")
        self.endpoint = endpoint
        self._backoff = _Reconnect(backoff or BackoffPolicy(), clock, endpoint.describe())
        self._username, self._password = username, password
        self._tls, self._ca_file = tls, ca_file
        self._stack: contextlib.AsyncExitStack | None = None
        self._client: aiomqtt.Client | None = None
        self.overrun_bytes = 0  # of messages longer than MAX_BUFFERED_BYTES, dropped
        if password is not None and not tls:
            _log.warning("mqtt_password_without_tls", link=endpoint.describe())

    def _tls_context(self) -> ssl.SSLContext | None:
        # Built per connection, not once: a CA file replaced on disk (rotation) takes effect at
        # the next reconnect without restarting the appliance.
        try:
            return tls_context(self._tls, self._ca_file)
        except (OSError, ssl.SSLError) as exc:
            reason = f"TLS set-up failed: ca_file {self._ca_file} ({short_reason(exc)})"
            raise self._backoff.failed(reason) from None

    async def _open(self) -> aiomqtt.Client:
        if self._client is not None:
            return self._client
        self._backoff.check()
        client = aiomqtt.Client(
            self.endpoint.host, self.endpoint.port,
            identifier=f"tablectl-dev-{secrets.token_hex(4)}",
            username=self._username, password=self._password, timeout=5, keepalive=10,
            tls_context=self._tls_context(), max_queued_incoming_messages=MAX_QUEUED_MESSAGES,
        )  # fmt: skip
        stack = contextlib.AsyncExitStack()
        try:
            await stack.enter_async_context(session(client))
            await client.subscribe(f"{self.endpoint.topic}/out", qos=1)
        except (aiomqtt.MqttError, OSError) as exc:
            await close_quietly(stack)
            raise self._backoff.failed(f"cannot connect ({short_reason(exc)})") from None
        self._backoff.succeeded()
        self._stack, self._client = stack, client
        return client

    async def _drop(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await close_quietly(stack)

    async def read(self, timeout_s: float) -> bytes:
        client = await self._open()
        try:
            async with asyncio.timeout(timeout_s):
                msg = await anext(client.messages)
        except TimeoutError:
            where = self.endpoint.describe()
            raise DeviceTimeout(f"{where}: nothing received in {timeout_s}s") from None
        except aiomqtt.MqttError as exc:
            await self._drop()
            raise self._backoff.failed(f"broker lost ({short_reason(exc)})") from None
        payload: object = msg.payload
        if isinstance(payload, bytes | bytearray):
            data = bytes(payload)
        else:
            data = b"" if payload is None else str(payload).encode("utf-8", "replace")
        if len(data) > MAX_BUFFERED_BYTES:  # one huge message is a flood too
            self.overrun_bytes += len(data) - MAX_BUFFERED_BYTES
            data = data[:MAX_BUFFERED_BYTES]
        return data

    async def write(self, data: bytes) -> None:
        client = await self._open()
        try:
            await client.publish(f"{self.endpoint.topic}/in", data, qos=1)
        except aiomqtt.MqttError as exc:
            await self._drop()
            raise self._backoff.failed(f"publish failed ({short_reason(exc)})") from None

    async def close(self) -> None:
        await self._drop()


# CONNACK codes of a login the broker refused: MQTT 3.1.1's 4 and 5, and the MQTT 5 codes paho
# reports them as (134 bad user name or password, 135 not authorised).
_LOGIN_REFUSED: Final = frozenset({4, 5, 134, 135})


def login_refused(exc: BaseException) -> bool:
    """Whether a failed connect was the broker refusing the account, which no retry will fix
    (unlike a broker that is down or restarting)."""
    if not isinstance(exc, aiomqtt.MqttCodeError):
        return False
    rc = exc.rc
    code = rc.value if isinstance(rc, ReasonCode) else rc
    return code in _LOGIN_REFUSED


async def close_quietly(stack: contextlib.AsyncExitStack) -> None:
    """Leave a client's context on a connection that may already be dead; nothing to report."""
    with contextlib.suppress(Exception):
        await stack.aclose()
