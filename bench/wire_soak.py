"""The wire soak: every shipped table (and DJ Wild at a shuffler that does not count its cards)
played by ``tablectl sim --dealer`` beside ``tablectl run``, separate processes with a real
mosquitto, the devices' timing varied by a seed (sim/timing.py); optionally with kill -9 of run at
seeded moments (the first during the first shuffle of the fresh journal, the second at the first
burn), then the simulators restarted, a fault through the control port and one more kill.

Prints JSON: per game the rounds, rounds per hour, alarms a person caused and alarms nobody caused
(with the records before each), keys refused, stub counts, the cards the shoe's counters gave
against the cards journalled, and whether the journal verifies (tests/support/wire_soak.py).

    .venv/bin/python bench/wire_soak.py [--shoes 20] [--wild-rounds 200] [--kills 0]
        [--restart-sim] [--seed 1] [--timing-seed 1] [--games G,G] [--parallel 2] [--cycle-s 2]
        [--load [--spinners-per-core 2]]

``--load`` runs the Start Game bench's background load through the soak (bench/background_load.py:
CPU spinners, two per core by default, and an fsync writer beside the journals); the one-minute
load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.appliance.demo import broker

# The harness lives beside the tests (tests/support/), which are not installed with the package:
# the checkout's root is put on the path, so the command in docs/benchmarks.md runs as written.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from background_load import BackgroundLoad, load_average  # bench/, beside this script

from tests.support.wire_soak import UNCOUNTED, Plan, soak

GAMES = ("double-back-jack", "double-attack", "down-under", "dj-wild", UNCOUNTED)


async def _all(plans: list[Plan], url: str, folder: Path, parallel: int) -> list[dict[str, Any]]:
    gate = asyncio.Semaphore(parallel)

    async def one(plan: Plan) -> dict[str, Any]:
        async with gate:
            began = time.monotonic()
            report = await soak(plan, url, folder / plan.game)
            return {**report, "wall_s": round(time.monotonic() - began, 1)}

    return list(await asyncio.gather(*(one(p) for p in plans)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--shoes", type=int, default=20)
    p.add_argument("--wild-rounds", type=int, default=200)
    p.add_argument("--kills", type=int, default=0, help="kill -9 of run per game while dealing")
    p.add_argument(
        "--restart-sim", action="store_true", help="then the simulators restarted, a fault, a kill"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timing-seed", type=int, default=1, help="the first game's; each next game +1")
    p.add_argument("--games", default=",".join(GAMES))
    p.add_argument("--parallel", type=int, default=2, help="games at once")
    p.add_argument("--cycle-s", type=float, default=2.0, help="the simulated shuffler's cycle")
    p.add_argument("--keep", type=Path, default=None, help="keep the journals and logs here")
    p.add_argument("--load", action="store_true", help="CPU spinners on every core and an fsync writer")
    p.add_argument("--spinners-per-core", type=int, default=2, help="with --load (default 2)")
    args = p.parse_args()
    games = [g for g in args.games.split(",") if g]
    plans = [
        Plan(game=g, shoes=args.shoes, rounds=args.wild_rounds, seed=args.seed + i,
             timing_seed=args.timing_seed + i, kills=args.kills, restart_sim=args.restart_sim,
             cycle_s=args.cycle_s, idle_guard_s=90.0)
        for i, g in enumerate(games)
    ]  # fmt: skip
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wire-soak-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        background = None
        if args.load:
            background = BackgroundLoad(folder, spinners=args.spinners_per_core * (os.cpu_count() or 1))
            background.start()
        load_before = load_average()
        try:
            with broker(folder) as port:
                games_out = asyncio.run(_all(plans, f"mqtt://127.0.0.1:{port}", folder, args.parallel))
        finally:
            load_after = load_average()
            if background is not None:
                background.stop()
    ran = [g for g in games_out if g.get("ran")]
    out = {
        "benchmark": "wire_soak",
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}",
        "shoes": args.shoes,
        "wild_rounds": args.wild_rounds,
        "kills_per_game": args.kills,
        "simulators_restarted": args.restart_sim,
        "shuffler_cycle_s": args.cycle_s,
        "parallel": args.parallel,
        "background_load": background.describe() if background is not None else None,
        "load_average_1m": [load_before, load_after],
        "all_ok": all(g.get("ok") for g in ran),
        "alarms_by_nobody": sum(len(g["alarms_by_nobody"]) for g in ran),
        "keys_refused": sum(len(g["keys_refused"]) for g in ran),
        "seconds": round(time.monotonic() - began, 1),
        "games": games_out,
    }
    print(json.dumps(out, indent=2))
    sys.exit(0 if out["all_ok"] else 1)


if __name__ == "__main__":
    main()
