"""A serial line's timing, which a pty does not keep: the simulated RTU line carries each frame
in the time the configured baud and framing give it on a real wire.

Per Modbus over Serial Line V1.02 (2.5.1.1), each character is a start bit, the data bits, the
parity bit if any and the stop bits: 11 bits for RTU's 8E1 (and for 8N2). A slave knows a request
has ended only after 3.5 characters of silence (the inter-frame gap), so a request reaches the
device its bytes' wire time plus that silence after the line was free to carry it; a reply
reaches the master its bytes' wire time after the device wrote it. The line is half-duplex and
carries one frame at a time: a frame waits for the one before it to be off the wire.

With this, a one-register read at 19,200 baud 8E1 (8 bytes out, 7 back) takes
(15 + 3.5) x 11 / 19,200 = 10.6 ms on the simulated line as on the real one: the line's floor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from devices.config import Framing

GAP_CHARS = 3.5  # the silence that ends an RTU frame (Modbus over Serial Line V1.02, 2.5.1.1)


def char_bits(framing: Framing) -> int:
    """The bits one character takes on the wire: start, data, parity, stop."""
    return 1 + framing.bytesize + (0 if framing.parity == "none" else 1) + framing.stopbits


def wire_s(n_bytes: float, baudrate: int, framing: Framing) -> float:
    """Seconds ``n_bytes`` characters take on the wire."""
    return n_bytes * char_bits(framing) / baudrate


def read_floor_s(baudrate: int, framing: Framing, words: int = 1) -> float:
    """The line's floor for a read of ``words`` holding registers: the request (8 bytes), its
    closing silence and the answer (5 bytes and two per word) on the wire."""
    return wire_s(8 + GAP_CHARS + 5 + 2 * words, baudrate, framing)


@dataclass
class LinePacer:
    """When each frame put on the line arrives at its far end. ``now`` is the loop's clock (a
    test passes its own, so the delays are checked by arithmetic, not by waiting)."""

    baudrate: int
    framing: Framing
    now: Callable[[], float]
    free_at: float = field(default=float("-inf"))  # when the last frame is off the wire

    def request(self, n_bytes: int) -> float:
        """A request from the master: the delay until the device may take it (its bytes and the
        silence that ends it)."""
        return self._carry(n_bytes + GAP_CHARS)

    def reply(self, n_bytes: int) -> float:
        """A device's answer: the delay until its last byte reaches the master."""
        return self._carry(n_bytes)

    def _carry(self, chars: float) -> float:
        now = self.now()
        start = max(now, self.free_at)
        self.free_at = start + wire_s(chars, self.baudrate, self.framing)
        return self.free_at - now
