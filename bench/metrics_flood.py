"""What a flood on /metrics costs the table (issue 38 item 4: twenty clients scraping in a loop cut
a table's rounds from 54 to 24 per 45 s when /metrics was served on the table's own loop).

A table dealt by the virtual dealer through the simulators (real sockets and ptys) in this
process, its /metrics served as ``tablectl run --metrics`` serves it (a process of its own,
metrics_process.py), or with ``--in-loop`` on the table's own event loop as it used to be, for
comparison. Two windows of ``--window`` wall seconds: quiet, then while an attacker process
(tests/support/metrics_flood.py, niced: an attacker's CPU is not the appliance's) keeps
``--loops`` clients scraping back to back and ``--idle`` connections holding half a header.
Prints one JSON object: rounds settled per window, the pace under the flood as a share of the
quiet one, scrapes served, the table's renders of its metrics, and the table process's open files.

    .venv/bin/python bench/metrics_flood.py [--window 45] [--loops 20] [--idle 200] [--in-loop]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def bench(window: float, loops: int, idle: int, pace: float, in_loop: bool) -> dict[str, Any]:
    from controller.appliance.cli import _health
    from controller.shipped import table_file
    from controller.supervisor.rig import virtual_table
    from controller.telemetry.metrics_http import MetricsServer
    from controller.telemetry.metrics_process import MetricsProcess

    with tempfile.TemporaryDirectory() as tmp:
        async with virtual_table(
            table_file("down-under"), Path(tmp) / "j.db", seed=1, boxes=1, pace_s=pace
        ) as rig:
            sup = rig.supervisor
            renders = 0
            server: Any
            if in_loop:
                server = MetricsServer(sup.metrics.registry, lambda: _health(sup))
            else:
                server = MetricsProcess(sup.metrics.registry, lambda: _health(sup), logging.ERROR)
            host, port = await server.start("127.0.0.1", 0)
            url = f"http://{host}:{port}/metrics"
            rounds = 0

            async def deal() -> None:
                nonlocal rounds
                await rig.dealer.open_table()
                while True:
                    await rig.dealer.play_round()
                    rounds += 1

            def answered() -> int:
                return int(getattr(server, "answered", -1))

            dealer = asyncio.create_task(deal())
            await asyncio.sleep(3)  # warm up: the table open, the first shoe
            start = rounds
            await asyncio.sleep(window)
            quiet, files_quiet = rounds - start, len(os.listdir("/proc/self/fd"))
            attacker = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.support.metrics_flood", url, "--loops", str(loops),
                "--idle", str(idle), cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                preexec_fn=lambda: os.nice(19),
            )  # fmt: skip
            assert attacker.stdin is not None and attacker.stdout is not None
            await asyncio.sleep(5)  # the flood builds up
            start, renders = rounds, answered()
            attacker.stdin.write(b"counts\n")
            before = json.loads(await attacker.stdout.readline())
            await asyncio.sleep(window)
            flood, files_flood = rounds - start, len(os.listdir("/proc/self/fd"))
            renders = answered() - renders
            attacker.stdin.write(b"counts\n")
            after = json.loads(await attacker.stdout.readline())
            attacker.stdin.close()
            await attacker.wait()
            dealer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await dealer
            await server.stop()
    scraped = after.get("scrape_200", 0) - before.get("scrape_200", 0)
    return {
        "metrics": "in the table's loop" if in_loop else "own process",
        "window_s": window,
        "pace_s": pace,
        "loops": loops,
        "idle": idle,
        "rounds_quiet": quiet,
        "rounds_flood": flood,
        "pace_share": round(flood / quiet, 3) if quiet else None,
        "scrapes_served_flood": scraped,
        "table_renders_flood": renders if not in_loop else scraped,
        "idle_opened": after.get("idle_opened", 0),
        "table_open_files_quiet": files_quiet,
        "table_open_files_flood": files_flood,
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--window", type=float, default=45.0)
    p.add_argument("--loops", type=int, default=20)
    p.add_argument("--idle", type=int, default=200)
    p.add_argument("--pace", type=float, default=0.05, help="real seconds per dealer action (0: flat out)")
    p.add_argument("--in-loop", action="store_true", help="/metrics on the table's loop, as it was")
    args = p.parse_args()
    from controller import logs

    logs.configure(logging.ERROR)
    print(json.dumps(asyncio.run(bench(args.window, args.loops, args.idle, args.pace, args.in_loop))))


if __name__ == "__main__":
    main()
