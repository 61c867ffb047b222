"""Device timing varied by a seed (``tablectl sim --timing-seed N``): real devices each keep their
own time, and a controller must take what they did in the order it happened whatever that time
is. Without a seed the simulators answer at once and show an action the moment it is done.

From one seed, the same every run (a soak's figures name it):

- the poll phase of each device: the simulators start listening one after another, a device's
  address opening up to ``MAX_PHASE_S`` after the one before, so the controller's polls of the
  devices are out of step with each other by a different amount each seed;
- each device's reply latency: every answer is held up to the device's own ceiling, drawn 0-20 ms
  (``MAX_REPLY_S``), a fresh delay each reply;
- the shuffler's cycle, 0.5-1.5 times the table file's ``cycle_s``, and its batch-return delay:
  a used batch put back into its slot shows there 0-150 ms later (``MAX_RETURN_S``), the
  shuffler's own sensing of the cards it was handed;
- the reader's own latency, the time it takes to read a hole card (50-250 ms) and the keypad's,
  from a key pressed or chips put down to its registers showing it (0-40 ms).

docs/simulators.md lists the same ranges.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

MAX_PHASE_S = 0.25
MAX_REPLY_S = 0.020
CYCLE_FACTOR = (0.5, 1.5)
MAX_RETURN_S = 0.150
READER_LATENCY_S = (0.050, 0.250)
KEYPAD_LATENCY_S = (0.0, 0.040)


@dataclass
class ReplyLatency:
    """One device's answers, each held a fresh 0 to ``ceiling_s`` (seeded)."""

    ceiling_s: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    async def wait(self) -> None:
        if self.ceiling_s > 0:
            await asyncio.sleep(self.rng.uniform(0.0, self.ceiling_s))


@dataclass(frozen=True)
class TableTiming:
    seed: int | None = None
    phase_s: dict[str, float] = field(default_factory=dict)  # device name -> delay before it listens
    reply_s: dict[str, float] = field(default_factory=dict)  # device name -> reply latency ceiling
    cycle_factor: float = 1.0
    return_s: float = 0.0
    reader_s: float = 0.0
    keypad_s: float = 0.0

    @classmethod
    def from_seed(cls, seed: int, devices: list[str]) -> TableTiming:
        """Every draw from one ``random.Random(seed)`` in a fixed order: the devices by name."""
        rng = random.Random(seed)
        names = sorted(devices)
        return cls(
            seed=seed,
            phase_s={n: round(rng.uniform(0.0, MAX_PHASE_S), 4) for n in names},
            reply_s={n: round(rng.uniform(0.0, MAX_REPLY_S), 4) for n in names},
            cycle_factor=round(rng.uniform(*CYCLE_FACTOR), 3),
            return_s=round(rng.uniform(0.0, MAX_RETURN_S), 4),
            reader_s=round(rng.uniform(*READER_LATENCY_S), 4),
            keypad_s=round(rng.uniform(*KEYPAD_LATENCY_S), 4),
        )

    def latency(self, device: str) -> ReplyLatency:
        """The reply latency of one device, with a generator of its own (seeded from the seed and
        the name, so one device's traffic does not change another's delays)."""
        ceiling = self.reply_s.get(device, 0.0)
        return ReplyLatency(ceiling, random.Random(f"{self.seed}/{device}"))

    def describe(self) -> dict[str, object]:
        """What the seed drew, for a soak's report."""
        return {
            "timing_seed": self.seed,
            "phase_ms": {n: round(s * 1000, 1) for n, s in self.phase_s.items()},
            "reply_ceiling_ms": {n: round(s * 1000, 1) for n, s in self.reply_s.items()},
            "shuffler_cycle_factor": self.cycle_factor,
            "batch_return_ms": round(self.return_s * 1000, 1),
            "reader_latency_ms": round(self.reader_s * 1000, 1),
            "keypad_latency_ms": round(self.keypad_s * 1000, 1),
        }


NO_TIMING = TableTiming()
