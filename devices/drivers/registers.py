"""Drivers for Modbus devices: poll one register block, diff it against the last good one."""

from __future__ import annotations

import asyncio
from abc import abstractmethod

from controller.clock import REAL_CLOCK, Clock
from devices.config import DeviceConfig
from devices.drivers.base import Driver
from devices.errors import CommandRejected, TransportError
from devices.events import DeviceEvent
from devices.transport.modbus import ModbusBus

Snapshot = dict[str, list[int]]


class RegisterDriver(Driver):
    def __init__(
        self,
        config: DeviceConfig,
        bus: ModbusBus,
        *,
        clock: Clock = REAL_CLOCK,
        events: asyncio.Queue[DeviceEvent] | None = None,
    ) -> None:
        super().__init__(config, clock=clock, events=events)
        self.bus = bus
        self.profile = config.profile
        self._span = self.profile.poll_span()
        self._prev: Snapshot | None = None

    async def _poll(self) -> None:
        start, count = self._span
        words = await self.bus.read_holding(
            self.config.device_id, start, count,
            timeout_s=self.config.timeout_s, attempts=self.config.retry.read_attempts,
        )  # fmt: skip
        self.ingest(words)

    def ingest(self, words: list[int]) -> None:
        """Turn one polled block into events; FrameDecodeError leaves the driver as it was."""
        snap = self.profile.decode_block(self._span[0], words)
        # Work out every event before emitting any: a poll that fails to decode half way is
        # dropped whole, and the next good poll is diffed against the last good one.
        events = self.diff(self._prev, snap)
        self._prev = snap
        for ev in events:
            self.emit(ev)

    @abstractmethod
    def diff(self, prev: Snapshot | None, cur: Snapshot) -> list[DeviceEvent]: ...

    async def _command(self, name: str, *args: int) -> None:
        spec = self.profile.reg("command")
        values = [self.profile.commands[name], *args]
        if len(values) > spec.count:
            raise CommandRejected(f"{self.name}: {name} needs {len(values)} command registers")
        values += [0] * (spec.count - len(values))
        try:
            await self.bus.write_registers(
                self.config.device_id, spec.address, values,
                timeout_s=self.config.timeout_s, attempts=self.config.retry.write_attempts,
            )  # fmt: skip
        except TransportError as exc:
            raise CommandRejected(f"{self.name}: {name} not carried out: {exc}") from None


def new_in_ring(last: int, cur: int, ring: int) -> tuple[list[int], int]:
    """Sequence numbers written since ``last`` (a 16-bit counter) and how many fell off the ring."""
    n = (cur - last) & 0xFFFF
    if n == 0:
        return [], 0
    missed = max(0, n - ring)
    first = last + 1 + missed
    return [(first + i) & 0xFFFF for i in range(n - missed)], missed


def moved(last: int, cur: int) -> int | None:
    """How far a 16-bit counter moved forward from ``last``; None when it went backwards (a move of
    half the counter's range or more cannot be draws between two polls)."""
    n = (cur - last) & 0xFFFF
    return None if n >= 0x8000 else n


class SeqGuard:
    """A device's 16-bit event counter (keys pressed, cards inserted) read up to the last value the
    controller trusted. A value that goes backwards, or jumps past the device's history between
    two polls of a running controller, is held back for a poll instead of read: back in line with
    the trusted value next poll, it was a glitch; holding, the device was reset and it is the new
    baseline. Either way the caller reports one glitch and reads nothing twice."""

    def __init__(self, ring: int) -> None:
        self.ring = ring
        self.trusted: int | None = None
        self.live = False  # polled since the driver started (a jump then cannot be real)
        self.held: tuple[int, str] | None = None
        self.held_polls = 0

    def _why(self, was: int, cur: int) -> str | None:
        n = moved(was, cur)
        if n is None:
            return f"the counter went backwards ({was} to {cur})"
        if self.live and n > self.ring:
            return f"the counter jumped by {n}, past the device's history of {self.ring}"
        return None

    def check(self, cur: int) -> tuple[int, int, str | None] | None:
        """(the value to read from, how many new entries, a glitch to report), or None to hold
        this poll back. Nothing changes until ``commit``."""
        if self.trusted is None:
            return cur, 0, None
        if self._why(self.trusted, cur) is None:
            glitch = f"{self.held[1]} for one poll" if self.held else None
            return self.trusted, moved(self.trusted, cur) or 0, glitch
        if self.held is not None and (self._why(self.held[0], cur) is None or self.held_polls + 1 >= 3):
            if moved(self.trusted, self.held[0]) is not None:
                # A jump forward that held: real entries, more than the history keeps. Read the
                # history; the caller reports the ones that fell out of it (one alarm).
                self.live = False
                return self.trusted, moved(self.trusted, cur) or 0, None
            base = self.held[0] if self._why(self.held[0], cur) is None else cur
            return base, moved(base, cur) or 0, f"{self.held[1]}: the device was reset"
        why = self._why(self.trusted, cur) or ""
        self.held_polls = self.held_polls + 1 if self.held is not None else 1
        self.held = (cur, why)
        return None

    def commit(self, cur: int) -> None:
        self.trusted, self.held, self.held_polls, self.live = cur, None, 0, True


def ring_word(ring: list[int], seq: int) -> int:
    """The ring entry for ``seq``; the device writes draw ``seq`` at index (seq - 1) mod len."""
    return ring[(seq - 1) % len(ring)]
