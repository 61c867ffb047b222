"""The table's dark time: kill -9 of ``tablectl run`` to ``ready`` again, with a day's journal.

``tablectl run`` (a subprocess, as systemd starts it) against simulators in this process: started,
killed with SIGKILL once ready, started again at once; the figure is the time from the kill to the
restarted process's ``ready`` log line (journal opened and replayed, every device answered), the
time the table is dark. Printed as p50, p95 and max over ``--repeat`` restarts, with the machine's
one-minute load average before and after. ``--load`` runs the Start Game bench's background load
through the measurements (bench/background_load.py: CPU spinners, two per core by default, and an
fsync writer beside the journal). ``tablectl run`` runs at the niceness the shipped systemd unit
gives it (``Nice=`` in config/systemd/tablectl@.service; ``--nice N`` to measure another), and the
figure says which: as shipped, the table's process is ahead of the load. The simulators, which
stand in for devices with CPUs of their own, answer at the same niceness. Make the journal with
bench/appliance_day.py --journal PATH; without one, the restarts replay the journal of the first
start (a table just opened). Targets: p95 under 1.5 s quiet, under 3 s under load.

    .venv/bin/python bench/appliance_restart.py [--journal /tmp/day-dub.db] [--game down-under]
        [--repeat 20] [--load [--spinners-per-core 2]] [--nice N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from pathlib import Path

from background_load import BackgroundLoad, load_average  # bench/, beside this script

from controller.journal import Journal
from controller.shipped import table_file
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import ROOT, concrete_config
from sim.table import SimTable

READY_GUARD_S = 120.0  # failure guard only
UNIT = ROOT / "config" / "systemd" / "tablectl@.service"


def shipped_nice() -> int:
    """The ``Nice=`` of the shipped unit (0 where it sets none), so the bench measures as shipped."""
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if line.startswith("Nice="):
            return int(line.removeprefix("Nice="))
    return 0


async def until_ready(proc: asyncio.subprocess.Process) -> dict[str, object]:
    assert proc.stdout is not None
    async with asyncio.timeout(READY_GUARD_S):
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                raise RuntimeError("tablectl run ended before it was ready")
            line = json.loads(raw)
            if line["event"] == "ready":
                return dict(line)


def _quantile(xs: list[float], q: float) -> float:
    """The q-quantile by the nearest rank (p95 of 20 is the 19th): no interpolation between runs."""
    ranked = sorted(xs)
    return ranked[min(len(ranked) - 1, max(0, math.ceil(len(ranked) * q) - 1))]


async def bench(game: str, journal: Path | None, repeat: int, load: int, nice: int) -> dict[str, object]:
    cfg = load_table_config(table_file(game))
    sim = SimTable(list(cfg.devices), cfg.options.spec, seed=1, decks=cfg.options.decks)
    await sim.start()
    dark: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        background = BackgroundLoad(Path(tmp), spinners=load * (os.cpu_count() or 1)) if load else None
        load_before = load_average()
        try:
            if background is not None:
                background.start()
            # The simulators (this process) stand in for devices with CPUs of their own: under the
            # load they answer at the table's priority, as hardware would whatever the box does,
            # or the figure would be their delay, not the table's. Set after the load started,
            # which keeps nice 0.
            os.setpriority(os.PRIO_PROCESS, 0, nice)
            conf = concrete_config(game, sim, Path(tmp) / "table.toml", poll_interval_s=0.05)
            work = Path(tmp) / "journal.db"
            if journal is not None:
                shutil.copy(journal, work)
            cmd = [sys.executable, "-m", "controller.cli", "run", "--config", str(conf)]
            cmd += ["--journal", str(work)]

            # As the shipped unit starts it: bytecode written and read (a shell's
            # PYTHONDONTWRITEBYTECODE would have every start compile every module again).
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

            def start() -> Awaitable[asyncio.subprocess.Process]:
                # setpriority in the child: an EPERM fails the start (no silent nice 0 figure).
                return asyncio.create_subprocess_exec(
                    *cmd,
                    cwd=ROOT,
                    env=env,
                    stdout=asyncio.subprocess.PIPE,
                    preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, nice),
                )

            began = time.perf_counter()
            proc = await start()
            await until_ready(proc)
            first_start_s = time.perf_counter() - began
            for _ in range(repeat):
                proc.kill()  # kill -9 once ready
                killed = time.perf_counter()
                await proc.wait()
                proc = await start()
                await until_ready(proc)
                dark.append(time.perf_counter() - killed)
            proc.kill()
            await proc.wait()
            with Journal.open(work, create=False, readonly=True) as j:
                records = j.last_seq
        finally:
            load_after = load_average()
            if background is not None:
                background.stop()
            await sim.stop()
    return {
        "benchmark": "appliance_restart",
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "game": game,
        "journal_records": records,
        "restarts": len(dark),
        "dark_s_p50": round(statistics.median(dark), 3),
        "dark_s_p95": round(_quantile(dark, 0.95), 3),
        "dark_s_max": round(max(dark), 3),
        "first_start_s": round(first_start_s, 3),
        "table_nice": nice,
        "simulators_nice": nice,
        "background_load": background.describe() if background is not None else None,
        "load_average_1m": [load_before, load_after],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--game", default="down-under")
    p.add_argument("--journal", type=Path, default=None, help="a day's journal (bench/appliance_day.py)")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--load", action="store_true", help="CPU spinners on every core and an fsync writer")
    p.add_argument("--spinners-per-core", type=int, default=2, help="with --load (default 2)")
    p.add_argument(
        "--nice", type=int, default=None, help="tablectl run's niceness (default: the shipped unit's)"
    )
    args = p.parse_args()
    load = args.spinners_per_core if args.load else 0
    nice = shipped_nice() if args.nice is None else args.nice
    print(json.dumps(asyncio.run(bench(args.game, args.journal, args.repeat, load, nice)), indent=2))


if __name__ == "__main__":
    main()
