"""kill -9 soak: ``tablectl run`` killed at seeded random moments over full shoes, many times.

Each run is one full shoe (tests/support/kill9.py) with ``--kills-per-shoe`` kill -9s at random moments
(mid-draw, mid-commit, and with cards drawn and keys pressed while the appliance is down), a
restart after each; runs go on with new seeds until ``--kills`` kills are done. Prints JSON: kills
survived, lost and phantom cards, halting alarms no person caused, whether every journal verified
and every run's MQTT event sequence was contiguous, and the per-run results.

    .venv/bin/python bench/kill9_soak.py [--kills 100] [--kills-per-shoe 25] [--seed 1] [--game down-under]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import structlog

# The harness lives beside the tests (tests/support/), which are not installed with the package:
# the checkout's root is put on the path, so the command in docs/benchmarks.md runs as written.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.kill9 import Result, run_once


async def soak(kills: int, per_shoe: int, seed: int, game: str) -> dict[str, object]:
    began = time.monotonic()
    runs: list[dict[str, object]] = []
    done = 0
    while done < kills:
        n = min(per_shoe, kills - done)
        try:
            result = await run_once(seed=seed + len(runs), kills=n, game=game)
            runs.append(result.as_dict())
        except AssertionError as e:  # the harness gave up waiting: the table was stuck
            failed = Result(seed=seed + len(runs), game=game, kills=n)
            runs.append({**failed.as_dict(), "ok": False, "stuck": str(e).splitlines()[0]})
        done += n
    survived = sum(int(r["kills"]) for r in runs if r["ok"])  # type: ignore[call-overload]
    return {
        "benchmark": "kill9_soak",
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}",
        "game": game,
        "kills": done,
        "kills_survived": survived,
        "shoes": len(runs),
        "cards_drawn": sum(int(r["cards_drawn"]) for r in runs),  # type: ignore[call-overload]
        "lost_cards": sum(int(r["lost_cards"]) for r in runs),  # type: ignore[call-overload]
        "phantom_cards": sum(int(r["phantom_cards"]) for r in runs),  # type: ignore[call-overload]
        "halting_alarms_not_by_a_person": sum(len(r["halting_alarms"]) for r in runs),  # type: ignore[arg-type]
        "journals_verify": all(r["journal_verifies"] for r in runs),
        "mqtt_sequences_contiguous": all(r["mqtt_contiguous"] for r in runs),
        "seconds": round(time.monotonic() - began, 1),
        "runs": runs,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--kills", type=int, default=100)
    p.add_argument("--kills-per-shoe", type=int, default=25)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--game", default="down-under")
    args = p.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is the JSON
    print(json.dumps(asyncio.run(soak(args.kills, args.kills_per_shoe, args.seed, args.game)), indent=2))


if __name__ == "__main__":
    main()
