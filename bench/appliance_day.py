"""A gaming day through the simulated devices on the virtual clock: 1,500 rounds, six boxes.

The virtual dealer plays through the simulators (real sockets and ptys) and the supervisor
journals every step with fsync. Prints wall seconds and rounds per second; ``--journal`` keeps the
journal (for bench/appliance_restart.py). Target: under 60 s.

    .venv/bin/python bench/appliance_day.py [--game G] [--rounds 1500] [--journal PATH] [--tmpfs]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
import time
from pathlib import Path

from controller import logs
from controller.shipped import table_file
from controller.supervisor.rig import virtual_table


async def day(game: str, rounds: int, journal: Path, seed: int) -> dict[str, object]:
    async with virtual_table(table_file(game), journal, seed=seed, boxes=6) as rig:
        began = time.perf_counter()
        cpu = time.process_time()
        await rig.dealer.open_table()
        await rig.dealer.play(rounds)
        wall = time.perf_counter() - began
        stats = rig.dealer.stats
        return {
            "game": game,
            "rounds": stats.rounds,
            "boxes": 6,
            "seconds": round(wall, 2),
            "cpu_seconds": round(time.process_time() - cpu, 2),
            "rounds_per_s": round(stats.rounds / wall, 1),
            "cards": stats.cards_drawn,
            "keys": stats.keys_pressed,
            "records": rig.supervisor.jt.journal.last_seq if rig.supervisor.jt else 0,
            "table_hours": round(rig.clock.now() / 3600, 1),
            "journal": str(journal),
        }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--game", default="down-under")
    p.add_argument("--rounds", type=int, default=1500)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--journal", type=Path, default=None)
    p.add_argument("--tmpfs", action="store_true", help="journal in /dev/shm (fsync costs nothing)")
    args = p.parse_args()
    logs.configure(logging.ERROR)
    base = Path("/dev/shm") if args.tmpfs else None
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        journal = args.journal or Path(tmp) / "day.db"
        print(json.dumps(asyncio.run(day(args.game, args.rounds, journal, args.seed))))


if __name__ == "__main__":
    main()
