"""Serial lines on one machine: pty pairs.

``PtyBridge`` joins two ptys back to back, so two programs that both want a *path* (pymodbus's
serial server and our RTU client) can talk as over a null-modem cable. Cutting the bridge makes
the line go silent without either side's port going away, as when a cable is pulled.

A pty has no UART: it carries bytes, not characters on a wire. Each end is set to what of the
line's configured framing (``devices.config.Framing``) a pty keeps: its stop bits. Linux accepts
a request for parity or another byte size on a pty (tcsetattr succeeds) and silently keeps 8 data
bits without parity, so both ends open a pty without parity (``Framing.for_port``) rather than
pretend. A framing mismatch between the appliance and a
device cannot show on a pty; the tests check that the configured framing is validated and
reaches pyserial and pymodbus.

Nor does a pty keep the baud's timing: it hands bytes on at once. A bridge given the line's
``baudrate`` paces what it carries as the wire would (sim/wire_pace.py): a request reaches the
device after its bytes' time at that baud and framing and the 3.5-character silence that ends it,
an answer reaches the master after its bytes' time, one frame on the line at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
import tty
from collections import deque
from collections.abc import Callable
from typing import Final, Protocol

from devices.config import LINE_FRAMING, Framing
from sim.wire_pace import LinePacer

Later = Callable[[float, Callable[[], None]], object]  # loop.call_later's shape

_CSIZE = {5: termios.CS5, 6: termios.CS6, 7: termios.CS7, 8: termios.CS8}


# How long the device end may take over one request before the next is handed to it anyway: a
# reply normally ends the wait at once; a broadcast (never answered) or a reply the wire faults
# swallow end it here. Shorter than any master's timeout, so pacing never costs a master a reply.
TURNAROUND_S: Final = 0.05


class Gate(Protocol):
    def feed(self, data: bytes) -> tuple[list[bytes], bytes]: ...


class Pty:
    """One pty: ``fd`` is the master end we hold, ``path`` is the line another program opens."""

    def __init__(self, framing: Framing = LINE_FRAMING) -> None:
        self.fd, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo or line editing: bytes pass as they are
        self.framing = framing
        set_framing(self._slave, framing.for_port(os.ttyname(self._slave)))
        os.set_blocking(self.fd, False)
        self.path = os.ttyname(self._slave)

    def close(self) -> None:
        for fd in (self.fd, self._slave):
            with contextlib.suppress(OSError):
                os.close(fd)


def set_framing(fd: int, framing: Framing) -> None:
    """Set a terminal's data bits, parity and stop bits (see the module's note on ptys)."""
    attrs = termios.tcgetattr(fd)
    cflag = attrs[2] & ~(termios.CSIZE | termios.PARENB | termios.PARODD | termios.CSTOPB)
    cflag |= _CSIZE[framing.bytesize]
    if framing.parity != "none":
        cflag |= termios.PARENB | (termios.PARODD if framing.parity == "odd" else 0)
    if framing.stopbits == 2:
        cflag |= termios.CSTOPB
    attrs[2] = cflag
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


class PtyBridge:
    """``gate`` (optional) sees the host's bytes first: it returns the frames that go on to the
    device end and what is answered straight back to the host (see sim/rtu_gate.py).

    The device end gets one frame at a time: the next only once it has answered the last (or
    after TURNAROUND_S), because pymodbus's serial server takes one request per read and would
    drop a second frame that arrived with the first."""

    def __init__(
        self,
        gate: Gate | None = None,
        framing: Framing = LINE_FRAMING,
        *,
        baudrate: int | None = None,
        later: Later | None = None,
        now: Callable[[], float] | None = None,
    ) -> None:
        """``baudrate`` paces the line at it (None: bytes pass at once); ``later`` and ``now``
        are the loop's call_later and time unless a test gives its own."""
        self.framing = framing
        self._later = later
        self._now = now
        self.pacer: LinePacer | None = None
        if baudrate is not None:
            self.pacer = LinePacer(baudrate, framing, self._time)
        self._host: Pty | None = None
        self._device: Pty | None = None
        self.cut = False
        self.gate = gate
        self._pending: deque[bytes] = deque()
        self._turn: asyncio.TimerHandle | None = None  # the device end is busy with a request
        self._in_flight = False  # a paced request is on the wire to the device end

    @property
    def is_open(self) -> bool:
        return self._host is not None

    @property
    def host_path(self) -> str:
        assert self._host is not None, "bridge not open"
        return self._host.path

    @property
    def device_path(self) -> str:
        assert self._device is not None, "bridge not open"
        return self._device.path

    def open(self) -> None:
        if self._host is not None:
            return
        self._host, self._device = Pty(self.framing), Pty(self.framing)
        loop = asyncio.get_running_loop()
        loop.add_reader(self._host.fd, self._pump, self._host.fd, self._device.fd)
        loop.add_reader(self._device.fd, self._pump, self._device.fd, self._host.fd)

    def _pump(self, src: int, dst: int) -> None:
        try:
            data = os.read(src, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # the other program closed its end; keep the bridge up for it to reopen
        if not data or self.cut:
            return
        from_host = self._host is not None and src == self._host.fd
        if self.gate is None:
            self._write(dst, data)
            return
        if not from_host:
            self._carry(dst, data, self.pacer.reply(len(data)) if self.pacer else 0.0)
            self._turn_over()  # the device answered: it takes the next request
            return
        frames, reply = self.gate.feed(data)
        self._carry(src, reply, self.pacer.reply(len(reply)) if self.pacer and reply else 0.0)
        self._pending.extend(frames)
        self._hand_on()

    def _time(self) -> float:
        return self._now() if self._now is not None else asyncio.get_running_loop().time()

    def _call_later(self, delay: float, then: Callable[[], None]) -> None:
        if self._later is not None:
            self._later(delay, then)
        else:
            asyncio.get_running_loop().call_later(delay, then)

    def _carry(self, fd: int, data: bytes, delay: float) -> None:
        """``data`` written to ``fd`` after ``delay`` (its time on the wire), unless cut meanwhile."""
        if not data:
            return
        if delay <= 0:
            self._write(fd, data)
            return

        def arrive() -> None:
            if not self.cut and self._host is not None:
                self._write(fd, data)

        self._call_later(delay, arrive)

    def _hand_on(self) -> None:
        if self._turn is not None or self._in_flight or not self._pending or self._device is None:
            return
        frame, device = self._pending.popleft(), self._device.fd
        if self.pacer is None:
            self._deliver(device, frame)
            return
        self._in_flight = True

        def arrive() -> None:
            self._in_flight = False
            if self.cut or self._device is None:
                self._hand_on()
                return
            self._deliver(device, frame)

        self._call_later(self.pacer.request(len(frame)), arrive)

    def _deliver(self, device: int, frame: bytes) -> None:
        self._write(device, frame)
        self._turn = asyncio.get_running_loop().call_later(TURNAROUND_S, self._turn_over)

    def _turn_over(self) -> None:
        if self._turn is not None:
            self._turn.cancel()
            self._turn = None
        self._hand_on()

    @staticmethod
    def _write(fd: int, data: bytes) -> None:
        if data:
            with contextlib.suppress(BlockingIOError, OSError):
                os.write(fd, data)

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        if self._turn is not None:
            self._turn.cancel()
            self._turn = None
        self._pending.clear()
        for p in (self._host, self._device):
            if p is not None:
                loop.remove_reader(p.fd)
                p.close()
        self._host = self._device = None


def _is_ours(path: str) -> bool:
    """A link a simulator made: a symlink to a pty line (live or left over from a killed run)."""
    return os.path.islink(path) and os.readlink(path).startswith("/dev/pts/")


def link_line(path: str, line: str) -> None:
    """Make ``path`` (a table's configured serial path) a symlink to the pty ``line``, so the
    appliance opens the path it is configured with. Its folder is made when missing; a leftover
    link of a killed simulator is replaced; anything else at ``path`` is never touched."""
    if os.path.lexists(path):
        if not _is_ours(path):
            raise FileExistsError(f"{path}: exists and is not a simulator's pty link; not replacing it")
        os.unlink(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    os.symlink(line, path)


def unlink_line(path: str, line: str) -> None:
    """Remove the link made by ``link_line`` if it still points at ``line``."""
    with contextlib.suppress(OSError):
        if os.readlink(path) == line:
            os.unlink(path)
