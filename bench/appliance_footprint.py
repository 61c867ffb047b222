"""Footprint of ``tablectl run`` with every device of a table polled at 20 Hz: CPU share of one
core and peak RSS, read from /proc while the table sits idle between rounds (polling is the
steady load). Simulators run in this process. Targets: under 5 % of one core, under 80 MB.

    .venv/bin/python bench/appliance_footprint.py [--game double-back-jack] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from controller.shipped import table_file
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import ROOT, concrete_config
from sim.table import SimTable

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def bench(game: str, seconds: float) -> dict[str, object]:
    cfg = load_table_config(table_file(game))
    sim = SimTable(list(cfg.devices), cfg.options.spec, seed=1, decks=cfg.options.decks)
    await sim.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            conf = concrete_config(game, sim, Path(tmp) / "table.toml", poll_interval_s=0.05)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "controller.cli", "run", "--config", str(conf),
                "--journal", str(Path(tmp) / "j.db"), "--log-level", "warning", cwd=ROOT,
                stdout=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            await asyncio.sleep(3.0)  # start-up (imports, first polls) is not the steady load
            c0, t0 = cpu_seconds(proc.pid), time.monotonic()
            await asyncio.sleep(seconds)
            c1, t1 = cpu_seconds(proc.pid), time.monotonic()
            rss = peak_rss_mb(proc.pid)
            proc.terminate()
            await proc.wait()
    finally:
        await sim.stop()
    return {"game": game, "devices": len(cfg.devices), "poll_hz": 20, "seconds": round(t1 - t0, 1),
            "cpu_percent_of_one_core": round(100 * (c1 - c0) / (t1 - t0), 2), "peak_rss_mb": round(rss, 1),
            "exit": proc.returncode}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--game", default="double-back-jack")
    p.add_argument("--seconds", type=float, default=60.0)
    args = p.parse_args()
    print(json.dumps(asyncio.run(bench(args.game, args.seconds))))


if __name__ == "__main__":
    main()
