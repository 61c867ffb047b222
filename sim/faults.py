"""Wire-level faults a simulated device can be told to commit, on any transport.

Behaviour faults (jam at card n, wrong light, ...) live on each model; these are the ones that
happen to bytes: garbled, truncated or missing responses, late responses held until released,
noise between frames, out-of-range register values, and a link that goes dead.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field


@dataclass
class WireFaults:
    garble: int = 0  # corrupt the next n responses (bytes flipped)
    truncate: int = 0  # cut the next n responses short
    drop: int = 0  # send no answer to the next n requests
    noise: int = 0  # put junk before the next n responses
    silent: bool = False  # answer nothing at all until cleared
    link_down: bool = False  # the link itself is gone (server closed, line dead)
    out_of_range: dict[str, int] = field(default_factory=dict)  # register name -> raw word
    replace_with: list[bytes] = field(default_factory=list)  # serve these bytes instead, in turn
    # Answer the next n requests under this unit id instead of our own (0: off): a neighbour on a
    # shared RTU line answering out of turn. Applied by the Modbus server, which knows the framing.
    wrong_id: int = 0
    wrong_id_count: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    _released: asyncio.Event | None = None

    # -- late responses: held until released -------------------------------------------------

    def hold(self) -> None:
        self._released = asyncio.Event()

    def release(self) -> None:
        ev, self._released = self._released, None
        if ev is not None:
            ev.set()

    async def wait_if_held(self) -> None:
        if self._released is not None:
            await self._released.wait()

    def clear(self) -> None:
        self.garble = self.truncate = self.drop = self.noise = 0
        self.silent = self.link_down = False
        self.out_of_range.clear()
        self.replace_with.clear()
        self.release()

    # -- shaping an outgoing packet ----------------------------------------------------------

    def shape(self, packet: bytes) -> bytes:
        if self.silent or self.link_down:
            return b""
        if self.replace_with:
            return self.replace_with.pop(0)
        if self.drop:
            self.drop -= 1
            return b""
        if self.garble and packet:
            self.garble -= 1
            b = bytearray(packet)
            for _ in range(max(1, len(b) // 4)):
                b[self.rng.randrange(len(b))] ^= 1 << self.rng.randrange(8)
            packet = bytes(b)
        if self.truncate and len(packet) > 1:
            self.truncate -= 1
            packet = packet[: self.rng.randrange(1, len(packet))]
        if self.noise:
            self.noise -= 1
            packet = bytes(self.rng.randrange(256) for _ in range(5)) + packet
        return packet
