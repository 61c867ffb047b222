"""The one backoff: how long to wait before trying again after a failure.

Every reconnect and restart in the product waits here: a device link (serial line, MQTT, Modbus
bus), a crashed driver's restart, the telemetry publisher's broker connection and the simulated
devices' broker links. The delay doubles from ``initial_s`` up to ``max_s`` and is jittered by
``+- jitter`` of itself, so that a room of tables does not reconnect to a restarted broker or
switch in the same millisecond (a thundering herd).

Each :class:`Backoff` draws its jitter from its own ``random.Random``, never the module-level
``random``: a test or the simulator passes a seeded one and gets the same delays every run, and
nothing else that draws from the global generator shifts them. Nothing secret depends on it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from controller.clock import REAL_CLOCK, Clock


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """The shape of the delays: what a table file's ``backoff_*`` keys set for a device."""

    initial_s: float = 0.2
    max_s: float = 10.0
    jitter: float = 0.25  # +- fraction of the delay

    def delay(self, failures: int, unit_random: float) -> float:
        """Delay before attempt ``failures + 1``; ``unit_random`` is uniform in [0, 1)."""
        base = min(self.max_s, self.initial_s * 2.0 ** max(0, failures - 1))
        return max(0.0, base * (1 + self.jitter * (2 * unit_random - 1)))


class Backoff:
    """The failures so far of one thing that retries, and when it may try next.

    ``failed()`` counts a failure and returns the delay before the next attempt; ``succeeded()``
    starts again from ``initial_s``. Callers that do not sleep themselves (a link refuses to try
    before its time instead) ask ``wait_left()``.
    """

    def __init__(
        self, policy: BackoffPolicy, *, clock: Clock = REAL_CLOCK, rng: random.Random | None = None
    ) -> None:
        self.policy = policy
        self.clock = clock
        self._rng = rng or random.Random()
        self.failures = 0
        self._next_attempt = float("-inf")

    def failed(self) -> float:
        self.failures += 1
        delay = self.policy.delay(self.failures, self._rng.random())
        self._next_attempt = self.clock.now() + delay
        return delay

    def succeeded(self) -> None:
        self.failures = 0
        self._next_attempt = float("-inf")

    def wait_left(self) -> float:
        """Seconds until the next attempt is due; 0 when it may be made now."""
        return max(0.0, self._next_attempt - self.clock.now())
