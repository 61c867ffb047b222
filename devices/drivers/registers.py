"""Drivers for Modbus devices: poll one register block, diff it against the last good one."""

from __future__ import annotations

import asyncio
from abc import abstractmethod

from devices.clock import REAL_CLOCK, Clock
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


def ring_word(ring: list[int], seq: int) -> int:
    """The ring entry for ``seq``; the device writes draw ``seq`` at index (seq - 1) mod len."""
    return ring[(seq - 1) % len(ring)]
