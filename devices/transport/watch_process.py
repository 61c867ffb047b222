"""The key watch's own process: a Modbus TCP device's poll block read every few ms, and the reflex
(the keypad's sensors locked at Start Game, 687a.9(b)) carried out here, the moment it is read.

Why a process: the window from the press to the lock is the watch's interval and two round trips
only if the watch runs when it is due. A thread in the table's process shares its interpreter
lock with the event loop, and a loop busy for a few ms (a decision, a commit, a burst of events)
held the watch up to the interpreter's switch interval at each wakeup: measured, that was the
window's tail under load. Here nothing else runs, so the tail is the kernel's scheduling alone,
and this process alone may be given realtime priority: it sleeps, reads about a hundred bytes,
and sleeps again, so it cannot starve the box, while the table's own process stays at normal
priority.

Standard library only (and devices.rings, controller.realtime), so it starts in tens of ms and
holds a few MB. It is started by BlockWatch (devices/transport/block_watch.py) with one end of a
socket pair, and talks to it in small JSON messages, one per datagram:

- from the table: ``{"polled": key_seq, "trusted": seq}`` after each poll the table decoded (what
  the looks compare with, and the last key the table has: the reflex acts on keys after it);
  ``{"ask": 1}``: a poll wants the block of the next look. The socket closing means stop (also
  when the table's process dies: no orphan).
- to the table: ``{"ready": 1}`` once it runs; ``{"block": [words], "asked": n}`` from every
  look that found the block changed since the last one told, and from the look after an ask
  (``asked``: how many asks it answers; 0: told unasked, a change); ``{"error": kind, "why":
  line, "asked": n}`` when a look fails with an ask waiting, and unasked at the first failure;
  ``{"moved": key_seq, "locked": bool}`` (the watched word moved, and whether the reflex wrote);
  ``{"log": event, "level": level, ...}`` (logged by the table through structlog: this process
  prints nothing).

The device's answers are trusted only as far as they were asked for: one transaction id per
connection, every failure drops the connection, and no answer is taken for another.
"""

from __future__ import annotations

import gc
import json
import select
import socket
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any

from controller.realtime import realtime
from devices.rings import new_in_ring, ring_word

_READ = struct.Struct(">HHHBBHH")  # MBAP header, function 3, address, count
_REPLY_HEAD = struct.Struct(">HHHBBB")  # MBAP header, function, byte count
_WRITE_HEAD = struct.Struct(">HHHBBHHB")  # MBAP header, function 16, address, count, byte count
_WRITTEN = struct.Struct(">HHHBBHH")  # MBAP header, function 16, address, count
_READ_TID, _WRITE_TID = 1, 2
_EXCEPTION_REPLY = 9  # MBAP header, function | 0x80, exception code
MESSAGE_MAX = 4096  # the largest message either side sends (a block of 125 words is ~700 bytes)


class LookFailed(Exception):
    def __init__(self, kind: str, why: str) -> None:
        super().__init__(why)
        self.kind = kind  # "timeout", "link" or "bad": the table's DeviceTimeout, LinkDown, BadResponse


@dataclass(frozen=True)
class Reflex:
    """A write made the moment the watched counter moves, when among the new entries of a ring
    is ``trigger`` and the guard word is 0 (the keypad: Start Game with the sensors open ->
    ``lock``). Offsets are into the block."""

    ring_at: int
    ring_count: int
    trigger: int
    guard_at: int
    address: int
    values: tuple[int, ...]


@dataclass(frozen=True)
class WatchSpec:
    host: str
    port: int
    device_id: int
    address: int
    count: int
    index: int
    period_s: float
    timeout_s: float
    reflex: Reflex | None = None
    priority: int | None = None  # SCHED_FIFO for this process, when granted
    # Changes told unasked at most this often: a sensor that flickers at every look would
    # otherwise have the table decode 500 blocks a second. The first change after a quiet
    # spell is told at once, and a key at once by ``moved`` whatever this says.
    tell_s: float = 0.0

    def to_json(self) -> str:
        return json.dumps(self, default=lambda o: o.__dict__)

    @staticmethod
    def from_json(text: str) -> WatchSpec:
        raw = json.loads(text)
        reflex = raw.pop("reflex")
        if reflex is not None:
            reflex = Reflex(**{**reflex, "values": tuple(reflex["values"])})
        return WatchSpec(**raw, reflex=reflex)


class Device:
    """One blocking Modbus TCP connection: the block read, a write."""

    def __init__(self, spec: WatchSpec) -> None:
        self.spec = spec
        self._request = _READ.pack(_READ_TID, 0, 6, spec.device_id, 3, spec.address, spec.count)
        self._head = _REPLY_HEAD.pack(_READ_TID, 0, 3 + 2 * spec.count, spec.device_id, 3, 2 * spec.count)
        self.reply = bytearray(_REPLY_HEAD.size + 2 * spec.count)
        self._unpack = struct.Struct(f">{spec.count}H").unpack_from
        self._sock: socket.socket | None = None

    def words(self) -> list[int]:
        return list(self._unpack(self.reply, _REPLY_HEAD.size))

    def word(self, index: int) -> int:
        at = _REPLY_HEAD.size + 2 * index
        return (self.reply[at] << 8) | self.reply[at + 1]

    def look(self) -> None:
        """One read of the block into ``reply``; LookFailed (the connection dropped) if not."""
        try:
            sock, reply = self._connected(), self.reply
            sock.sendall(self._request)
            got = 0
            while got < len(reply):  # the whole answer in one receive, almost always
                n = sock.recv_into(memoryview(reply)[got:] if got else reply)
                if not n:
                    raise LookFailed("link", "connection closed")
                got += n
                _refused(reply, got)
            if reply[: len(self._head)] != self._head:
                raise LookFailed("bad", "not the answer to the watch's read")
        except LookFailed:
            self.close()
            raise
        except OSError as exc:
            self.close()
            raise _failed(exc) from None

    def write(self, address: int, values: tuple[int, ...]) -> None:
        n, spec = len(values), self.spec
        request = _WRITE_HEAD.pack(_WRITE_TID, 0, 7 + 2 * n, spec.device_id, 16, address, n, 2 * n)
        try:
            sock = self._connected()
            sock.sendall(request + struct.pack(f">{n}H", *values))
            reply = b""
            while len(reply) < _WRITTEN.size:
                more = sock.recv(_WRITTEN.size - len(reply))
                if not more:
                    raise LookFailed("link", "connection closed")
                reply += more
                _refused(reply, len(reply))
            if _WRITTEN.unpack(reply) != (_WRITE_TID, 0, 6, spec.device_id, 16, address, n):
                raise LookFailed("bad", "not the answer to the watch's write")
        except LookFailed:
            self.close()
            raise
        except OSError as exc:
            self.close()
            raise _failed(exc) from None

    def _connected(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.spec.host, self.spec.port), self.spec.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Blocking, with the timeout kept by the kernel: a socket with a Python timeout
            # polls before every send and receive, two system calls more per look, and a look
            # is a few system calls and two wakeups (measured: a fifth of the watch's CPU).
            sock.settimeout(None)
            seconds, micros = divmod(round(self.spec.timeout_s * 1_000_000), 1_000_000)
            timeval = struct.pack("@ll", seconds, micros)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
            self._sock = sock
        return self._sock

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def _failed(exc: OSError) -> LookFailed:
    # The kernel's timeout (SO_RCVTIMEO) ends a blocking receive with EAGAIN, and Python's own
    # (at connect) with TimeoutError: both are the device's silence.
    kind = "timeout" if isinstance(exc, TimeoutError | BlockingIOError) else "link"
    return LookFailed(kind, f"{type(exc).__name__}: {exc}")


def _refused(reply: bytes | bytearray, got: int) -> None:
    if got >= _EXCEPTION_REPLY and reply[7] & 0x80:
        raise LookFailed("bad", f"exception {reply[8]} to the watch")


class Watch:
    def __init__(self, spec: WatchSpec, table: socket.socket) -> None:
        self.spec, self.table, self.device = spec, table, Device(spec)
        self.polled: int | None = None  # the watched word as the table last decoded it
        self.trusted: int | None = None
        self.told: int | None = None  # the last watched word told to the table (moved, or a block)
        self.asks = 0
        self.failing = False
        self.sent = bytearray()  # the last look told to the table (the block changed since)
        self.quiet_until = 0.0  # no change told unasked before (monotonic)
        self.waiting = select.poll()
        self.waiting.register(table, select.POLLIN)

    def send(self, **message: Any) -> None:
        self.table.send(json.dumps(message, separators=(",", ":")).encode())

    def take(self) -> bool:
        """Every message from the table waiting; False when it closed its end (stop). Asked of
        poll() first: a receive with nothing waiting raises, and at every look that cost more
        than the poll."""
        while self.waiting.poll(0):
            data = self.table.recv(MESSAGE_MAX)
            if not data:
                return False
            message = json.loads(data)
            if "ask" in message:
                self.asks += 1
            if "polled" in message:
                self.polled, self.trusted = message["polled"], message.get("trusted")
        return True

    def run(self) -> None:
        due = time.monotonic()
        while True:
            if self.failing and not self.asks:
                # A device that failed is tried again when a poll asks, at the poll's rate (its
                # health is the table's to judge), not hundreds of times a second.
                self.waiting.poll()
                if not self.take():
                    return
                due = time.monotonic()
                continue
            # A plain sleep to the look's time (poll()'s timeout is whole ms, rounded up: a 2 ms
            # interval became 2-3), then the table's messages, taken without waiting: an ask is
            # answered by the look anyway.
            due = max(due + self.spec.period_s, time.monotonic())
            time.sleep(max(0.0, due - time.monotonic()))
            if not self.take():
                return
            asked, self.asks = self.asks, 0  # every ask so far is answered by this look
            try:
                self.device.look()
            except LookFailed as exc:
                if asked or not self.failing:  # told at once, asked or not: the table polls
                    self.send(error=exc.kind, why=str(exc), asked=asked)
                if not self.failing:
                    self.send(log="watch_failed", level="warning", error=str(exc))
                self.failing = True
                self.sent.clear()  # the first block after a failure is told, changed or not
                continue
            if self.failing:
                self.failing = False
                self.send(log="watch_back", level="info")
            reply = self.device.reply
            if self.moved():  # this block predates the reflex's write: the next look has it
                self.asks += asked
            elif asked or (reply != self.sent and due >= self.quiet_until):
                self.sent[:] = reply
                # The table decodes this block, and locks for a Start Game in it itself (its
                # poll's fallback, 687a.9(b)): the reflex is for a word the table has not been
                # shown, or it writes a second lock. Only a look before the table's first
                # ``polled`` (a process just started) shows a new word without ``moved``.
                self.told = self.device.word(self.spec.index)
                self.quiet_until = due + self.spec.tell_s
                self.send(block=self.device.words(), asked=asked)

    def moved(self) -> bool:
        """The table told of a move of the watched word (once per new value); True when the
        reflex wrote."""
        polled = self.polled
        if polled is None:
            return False
        word = self.device.word(self.spec.index)
        if word == polled or word == self.told:
            return False
        self.told = word
        locked = self.reflex(word)
        self.send(moved=word, locked=locked)
        return locked

    def reflex(self, word: int) -> bool:
        """The reflex's write, made before the table hears of the move: True when it was."""
        r, trusted = self.spec.reflex, self.trusted
        if r is None or trusted is None or self.device.word(r.guard_at):
            return False
        ring = [self.device.word(r.ring_at + i) for i in range(r.ring_count)]
        news, _ = new_in_ring(trusted, word, r.ring_count)
        if not any(ring_word(ring, seq) == r.trigger for seq in news):
            return False
        try:
            self.device.write(r.address, r.values)
        except LookFailed as exc:  # the table's poll that follows locks them (the fallback)
            self.send(log="watch_write_failed", level="warning", error=str(exc))
            return False
        return True


def main(argv: list[str]) -> int:
    fd, spec = int(argv[0]), WatchSpec.from_json(argv[1])
    table = socket.socket(fileno=fd)
    watch = Watch(spec, table)
    if spec.priority is not None and (refused := realtime(spec.priority)) is not None:
        watch.send(log="watch_realtime_refused", level="warning", error=refused)
    watch.send(ready=1)
    # Nothing the looks make outlives them; what the imports made is kept out of every
    # collection, which otherwise walked it hundreds of times a minute.
    gc.freeze()
    try:
        watch.run()
    except (BrokenPipeError, ConnectionResetError):  # the table is gone: so is its watch
        pass
    finally:
        watch.device.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
