"""A device's ring of its last few events, indexed by a sequence counter of 16 or 32 bits, as its
profile declares (the keypad's keys, the shoe's draws): which sequence numbers are new, and where
each one sits. Standard library only: the key watch's own process
(devices/transport/watch_process.py) uses it too."""

from __future__ import annotations


def new_in_ring(last: int, cur: int, ring: int, bits: int = 16) -> tuple[list[int], int]:
    """Sequence numbers written since ``last`` (a counter of ``bits`` bits) and how many fell off
    the ring."""
    mask = (1 << bits) - 1
    n = (cur - last) & mask
    if n == 0:
        return [], 0
    missed = max(0, n - ring)
    first = last + 1 + missed
    return [(first + i) & mask for i in range(n - missed)], missed


def ring_word(ring: list[int], seq: int) -> int:
    """The ring entry for ``seq``; the device writes event ``seq`` at index (seq - 1) mod len."""
    return ring[(seq - 1) % len(ring)]
