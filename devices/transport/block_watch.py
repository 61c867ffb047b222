"""A Modbus TCP device's poll block, read every few ms by a process of its own: the keypad's key
watch (the past-posting window, 687a.9(b)). This is the table's side; the process is
devices/transport/watch_process.py, which says why it is a process.

The watch reads the driver's whole poll block every ``period_s``. When the watched word (the key
counter) differs from what the driver last decoded, the process makes the reflex's write at once
(the sensors locked at Start Game) and tells the driver, whose pause then ends. Every look that
finds the block changed (a bet, a key, the lock) is told to the table as it is read, and so is a
look that failed: the table hears of every change within a look, and a device that nothing
happens at costs the table's process nothing between its quiet polls (``QUIET_POLL_S``), which
only prove the watch alive. A poll out of turn (``fresh``) takes the block of the next look, as
a request of its own would.

Why not pymodbus: a request through it costs 0.15-0.2 ms of CPU on the appliance's hardware
class, so the hundreds of reads a second a fast watch makes would take more than the appliance's
CPU budget; a prepared read on a blocking socket costs about 0.05 ms, nearly all of it wakeups.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import structlog

from devices.config import Endpoint, TransportKind
from devices.errors import BadResponse, DeviceTimeout, LinkDown, TransportError
from devices.transport.watch_process import MESSAGE_MAX, Reflex, WatchSpec

_log = structlog.get_logger("devices.watch")

START_S = 10.0  # a new watch process's time to say it is up (a loaded box starts Python slowly)
# A watched device's polls when nothing changes. The watch tells every change and every failure
# as it reads them, so these polls only prove its process alive and answering; at the device's
# own poll rate they were a third of the table's CPU at rest (docs/benchmarks.md).
QUIET_POLL_S = 1.0
# Changes told unasked at most this often: 20 a second, the rate a keypad was polled at before
# the watch told them. A sensor flickering at every look costs the table no more than that.
TELL_S = 0.05
_ERRORS: dict[str, type[TransportError]] = {"timeout": DeviceTimeout, "link": LinkDown, "bad": BadResponse}
_realtime_priority: int | None = None


def set_watch_priority(priority: int | None) -> None:
    """SCHED_FIFO at ``priority`` for every watch process started from now on (``tablectl run
    --realtime-priority``); None: normal priority."""
    global _realtime_priority
    _realtime_priority = priority


def watch_priority() -> int | None:
    return _realtime_priority


class BlockWatch:
    def __init__(
        self, endpoint: Endpoint, device_id: int, address: int, count: int, *,
        index: int, period_s: float, timeout_s: float,
    ) -> None:  # fmt: skip
        if endpoint.transport is not TransportKind.MODBUS_TCP:
            raise ValueError(f"a block watch needs Modbus TCP, not {endpoint.transport}")
        if not 0 <= index < count <= 125:
            raise ValueError("a block watch reads 1 to 125 words, the watched one among them")
        self.endpoint, self.index = endpoint, index
        self.spec = WatchSpec(endpoint.host, endpoint.port, device_id, address, count, index,
                              period_s, timeout_s, tell_s=TELL_S)  # fmt: skip
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._ready: asyncio.Future[None] | None = None
        self._asked: asyncio.Future[list[int]] | None = None  # the one poll waiting for a block
        self._told: list[int] | None = None  # a changed block told unasked, not yet taken
        self._news = False  # told unasked (a change, a failure, the process's end) since a read
        self._on_moved: Callable[[int, bool], None] = lambda word, locked: None
        self._on_told: Callable[[], None] = lambda: None
        self._followed: tuple[int, int | None] | None = None
        self._log = _log.bind(bus=endpoint.describe(), device_id=device_id)

    @property
    def running(self) -> bool:
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def news(self) -> bool:
        """A look told a change or a failure (or the process died) since the last read: the
        driver polls now."""
        return self._news

    def start(
        self, on_moved: Callable[[int, bool], None], reflex: Reflex | None = None,
        on_told: Callable[[], None] = lambda: None,
    ) -> None:  # fmt: skip
        """Start the watch's process, with the write it makes by itself on a move (``reflex``).
        ``on_moved(word, locked)`` runs on the loop when the watched word moved past the last
        ``follow``, after the reflex's write (``locked``: it was made); ``on_told()`` when a look
        told a change or a failure unasked, or the process died (the driver polls then)."""
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spec = replace(self.spec, reflex=reflex, priority=_realtime_priority)
        try:
            fd = theirs.fileno()
            self._proc = subprocess.Popen(  # one process per watched device, for the table's life
                [sys.executable, "-m", "devices.transport.watch_process", str(fd), spec.to_json()],
                pass_fds=[fd], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )  # fmt: skip
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock, self._on_moved, self._on_told, self._followed = ours, on_moved, on_told, None
        self._told, self._news = None, False
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._readable)
        self._log.info("watch_started", pid=self._proc.pid, every_ms=round(self.spec.period_s * 1000, 3))

    def follow(self, polled: int, trusted: int | None) -> None:
        """What the looks compare with: the watched word of the block the driver last decoded,
        and the last sequence number it has (the reflex acts on entries after it)."""
        if self._sock is not None and self._followed != (polled, trusted):
            self._followed = (polled, trusted)
            self._send(polled=polled, trusted=trusted)

    async def read(self, *, fresh: bool = False) -> list[int]:
        """The newest block: one a look told as changed since the last read, at once; else, or
        when ``fresh``, the block as read by a look that began after this call (within
        ``period_s`` while the device answers; at once when the watch is failing, which then
        tries the device)."""
        told, self._told, self._news = self._told, None, False
        if told is not None and not fresh and self._ready is not None:
            return told
        if self._ready is None:
            raise LinkDown(f"{self.endpoint.describe()}: the watch is not running")
        try:
            async with asyncio.timeout(START_S):
                await asyncio.shield(self._ready)
        except TimeoutError:
            raise LinkDown(f"{self.endpoint.describe()}: the watch's process did not start") from None
        if self._asked is None or self._asked.done():
            self._asked = asyncio.get_running_loop().create_future()
            self._send(ask=1)
        try:
            # The process answers every ask within a look and its timeout; this bound is for a
            # process that hangs, so a poll still fails rather than waits for ever.
            async with asyncio.timeout(2 * self.spec.timeout_s + self.spec.period_s):
                return await asyncio.shield(self._asked)
        except TimeoutError:
            # Alive (its socket is open) but not answering: it is no watch any more. Killed,
            # so the next poll starts another, rather than the device unwatched for good.
            self._died("watch_process_hung")
            raise DeviceTimeout(f"{self.endpoint.describe()}: no answer from the watch") from None

    async def stop(self) -> None:
        proc = self._proc
        self._closed(LinkDown(f"{self.endpoint.describe()}: the watch stopped"))
        if proc is not None:  # its end of the socket closed: it stops at its next wait
            try:
                await asyncio.to_thread(proc.wait, self.spec.timeout_s + self.spec.period_s + 2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait)
            _close_pipe(proc)

    # -- messages from the process -------------------------------------------------------------

    def _send(self, **message: Any) -> None:
        if self._sock is None:
            return
        try:
            self._sock.send(json.dumps(message, separators=(",", ":")).encode())
        except OSError as exc:  # the process is gone: said when its end closes
            self._log.debug("watch_send_failed", error=str(exc))

    def _readable(self) -> None:
        while self._sock is not None:
            try:
                data = self._sock.recv(MESSAGE_MAX)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._died()
                return
            self._take(json.loads(data))

    def _take(self, message: dict[str, Any]) -> None:
        asked = self._asked
        if "ready" in message and self._ready is not None and not self._ready.done():
            self._ready.set_result(None)
        elif "block" in message:
            if message.get("asked") and asked is not None and not asked.done():
                self._told, self._news = None, False  # older than the answer
                asked.set_result(message["block"])
            else:
                self._told = message["block"]
                self._tell()
        elif "error" in message:
            if message.get("asked") and asked is not None and not asked.done():
                asked.set_exception(_ERRORS.get(message["error"], LinkDown)(
                    f"{self.endpoint.describe()}: {message.get('why', 'the watch failed')}"))  # fmt: skip
            else:  # the driver's next poll asks, and hears the failure
                self._told = None
                self._tell()
        elif "moved" in message:
            self._on_moved(int(message["moved"]), bool(message.get("locked")))
        elif "log" in message:
            event, level = str(message.pop("log")), str(message.pop("level", "info"))
            getattr(self._log, level if level in ("info", "warning", "error") else "info")(event, **message)

    def _tell(self) -> None:
        self._news = True
        self._on_told()

    def _died(self, event: str = "watch_process_died") -> None:
        """The process ended, or is ended here (its end of the socket closed while it lives
        on; or hung): said in one line, and the driver polls, which starts another."""
        proc = self._proc
        code = proc.poll() if proc is not None else None
        last = ""
        if proc is not None and proc.stderr is not None and code is not None:
            with contextlib.suppress(OSError, ValueError):  # what it said as it died: a traceback
                lines = proc.stderr.read(65536).decode(errors="replace").strip().splitlines()
                last = lines[-1][:200] if lines else ""
        self._log.error(event, pid=self.pid, exit_code=code, error=last or None)
        self._closed(LinkDown(f"{self.endpoint.describe()}: the watch's process died"))
        if proc is not None:
            if code is None:  # not a watch any more
                proc.kill()
            _close_pipe(proc)
        self._tell()

    def _closed(self, why: TransportError) -> None:
        """The process is no more (or is told to stop): every waiter fails, the next poll starts
        another."""
        sock, self._sock, self._proc = self._sock, None, None
        if sock is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed under it
                asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
        for fut in (self._ready, self._asked):
            if fut is not None and not fut.done():
                fut.set_exception(why)
                fut.exception()  # retrieved: a future nobody awaits is not "never retrieved"
        self._ready = self._asked = None


def _close_pipe(proc: subprocess.Popen[bytes]) -> None:
    if proc.stderr is not None:
        proc.stderr.close()
