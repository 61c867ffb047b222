"""Restart to ready after kill -9, with a day's journal.

``tablectl run`` (a subprocess, as systemd starts it) against simulators in this process: started,
killed with SIGKILL once ready, started again; the time from spawning the restarted process to its
``ready`` log line (journal opened and replayed, every device answered) is the figure. Make the
journal with bench/appliance_day.py --journal PATH. Target: under 2 s.

    .venv/bin/python bench/appliance_restart.py --journal /tmp/day-dub.db [--game down-under] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from controller.journal import Journal
from controller.shipped import table_file
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import ROOT, concrete_config
from sim.table import SimTable


async def until_ready(proc: asyncio.subprocess.Process) -> dict[str, object]:
    assert proc.stdout is not None
    async with asyncio.timeout(60):
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                raise RuntimeError("tablectl run ended before it was ready")
            line = json.loads(raw)
            if line["event"] == "ready":
                return dict(line)


async def bench(game: str, journal: Path, repeat: int) -> dict[str, object]:
    cfg = load_table_config(table_file(game))
    sim = SimTable(list(cfg.devices), cfg.options.spec, seed=1, decks=cfg.options.decks)
    await sim.start()
    times: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            conf = concrete_config(game, sim, Path(tmp) / "table.toml", poll_interval_s=0.05)
            work = Path(tmp) / "journal.db"
            shutil.copy(journal, work)
            with Journal.open(work, create=False, readonly=True) as j:
                records = j.last_seq
            cmd = [sys.executable, "-m", "controller.cli", "run", "--config", str(conf)]
            cmd += ["--journal", str(work)]
            for _ in range(repeat + 1):
                began = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(*cmd, cwd=ROOT, stdout=asyncio.subprocess.PIPE)
                await until_ready(proc)
                times.append(time.perf_counter() - began)
                proc.kill()  # kill -9 once ready; the next start is the restart measured
                await proc.wait()
    finally:
        await sim.stop()
    restarts = times[1:]
    return {"game": game, "journal_records": records, "restarts": len(restarts),
            "ready_s_median": round(statistics.median(restarts), 3), "ready_s_max": round(max(restarts), 3),
            "first_start_s": round(times[0], 3)}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--game", default="down-under")
    p.add_argument("--journal", type=Path, required=True)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    print(json.dumps(asyncio.run(bench(args.game, args.journal, args.repeat))))


if __name__ == "__main__":
    main()
