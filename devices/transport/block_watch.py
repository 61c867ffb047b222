"""A Modbus TCP device's poll block, read every few ms by a process of its own: the keypad's key
watch (the past-posting window, 687a.9(b)). This is the table's side; the process is
devices/transport/watch_process.py, which says why it is a process.

The watch reads the driver's whole poll block every ``period_s``. When the watched word (the key
counter) differs from what the driver last decoded, the process makes the reflex's write at once
(the sensors locked at Start Game) and tells the driver, whose pause then ends. The driver's polls
take the block from the next look rather than a request of their own, so between two polls the
device is never unwatched, and a poll costs the loop one message, not a pymodbus request.

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
                              period_s, timeout_s)  # fmt: skip
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._ready: asyncio.Future[None] | None = None
        self._asked: asyncio.Future[list[int]] | None = None  # the one poll waiting for a block
        self._on_moved: Callable[[int, bool], None] = lambda word, locked: None
        self._followed: tuple[int, int | None] | None = None
        self._log = _log.bind(bus=endpoint.describe(), device_id=device_id)

    @property
    def running(self) -> bool:
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, on_moved: Callable[[int, bool], None], reflex: Reflex | None = None) -> None:
        """Start the watch's process, with the write it makes by itself on a move (``reflex``).
        ``on_moved(word, locked)`` runs on the loop when the watched word moved past the last
        ``follow``, after the reflex's write (``locked``: it was made)."""
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
        self._sock, self._on_moved, self._followed = ours, on_moved, None
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._readable)
        self._log.info("watch_started", pid=self._proc.pid, every_ms=round(self.spec.period_s * 1000, 3))

    def follow(self, polled: int, trusted: int | None) -> None:
        """What the looks compare with: the watched word of the block the driver last decoded,
        and the last sequence number it has (the reflex acts on entries after it)."""
        if self._sock is not None and self._followed != (polled, trusted):
            self._followed = (polled, trusted)
            self._send(polled=polled, trusted=trusted)

    async def read(self) -> list[int]:
        """The block as read by a look that began after this call (within ``period_s`` while
        the device answers; at once when the watch is failing, which then tries the device)."""
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
            if asked is not None and not asked.done():
                asked.set_result(message["block"])
        elif "error" in message:
            if asked is not None and not asked.done():
                asked.set_exception(_ERRORS.get(message["error"], LinkDown)(
                    f"{self.endpoint.describe()}: {message.get('why', 'the watch failed')}"))  # fmt: skip
        elif "moved" in message:
            self._on_moved(int(message["moved"]), bool(message.get("locked")))
        elif "log" in message:
            event, level = str(message.pop("log")), str(message.pop("level", "info"))
            getattr(self._log, level if level in ("info", "warning", "error") else "info")(event, **message)

    def _died(self) -> None:
        proc = self._proc
        code = proc.poll() if proc is not None else None
        last = ""
        if proc is not None and proc.stderr is not None and code is not None:
            with contextlib.suppress(OSError, ValueError):  # what it said as it died: a traceback
                lines = proc.stderr.read(65536).decode(errors="replace").strip().splitlines()
                last = lines[-1][:200] if lines else ""
        self._log.error("watch_process_died", exit_code=code, error=last or None)
        self._closed(LinkDown(f"{self.endpoint.describe()}: the watch's process died"))
        if proc is not None:
            if code is None:  # its end closed but it lives on: not a watch any more
                proc.kill()
            _close_pipe(proc)

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
