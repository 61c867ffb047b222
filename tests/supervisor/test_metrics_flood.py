"""A flood on a table's /metrics costs the table nothing it holds (issue 38 item 4: twenty clients
scraping in a loop cut the rounds from 54 to 24 in 45 s, and 21,000 idle connections holding half
a header took every open file of the table's process).

The table deals on the virtual clock while an attacker in a process of its own keeps 20 clients
scraping back to back and 200 connections holding half a header, from many addresses, at the
/metrics of ``MetricsProcess`` (as ``tablectl run --metrics`` serves it). Counted, not timed: the
dealer settles rounds throughout; the table's process holds no more open files than before (the
connections are the metrics process's); the table renders its metrics for a small share of the
scrapes served (scrapes within a second share one answer); and a scrape from elsewhere is served
and parses. The wall-clock pace is bench/metrics_flood.py's (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controller.appliance.cli import _health
from controller.supervisor.rig import table_file, virtual_table
from controller.telemetry.metrics_process import MetricsProcess

ROOT = Path(__file__).resolve().parents[2]
SCRAPERS, IDLE = 20, 200


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _counts(attacker: asyncio.subprocess.Process) -> dict[str, int]:
    assert attacker.stdin is not None and attacker.stdout is not None
    attacker.stdin.write(b"counts\n")
    counts: dict[str, int] = json.loads(await attacker.stdout.readline())
    return counts


async def test_a_flood_of_scrapers_costs_the_table_nothing_it_holds(tmp_path: Path) -> None:
    async with asyncio.timeout(240):
        async with virtual_table(table_file("down-under"), tmp_path / "j.db", seed=3, boxes=1) as rig:
            sup = rig.supervisor
            metrics = MetricsProcess(sup.metrics.registry, lambda: _health(sup), logging.WARNING)
            host, port = await metrics.start("127.0.0.1", 0)
            url = f"http://{host}:{port}/metrics"
            try:
                await rig.dealer.open_table()
                await rig.dealer.play_round()
                attacker = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "tests.support.metrics_flood", url,
                    "--loops", str(SCRAPERS), "--idle", str(IDLE),
                    cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                files = _open_files()  # the attacker's pipes included
                answered = metrics.answered
                rounds = 0
                counts: dict[str, Any] = {}
                # Deal on until the flood is all there: every idle connection opened and held,
                # and a thousand scrapes served.
                while counts.get("idle_opened", 0) < IDLE or counts.get("scrape_200", 0) < 1000:
                    await rig.dealer.play_round()
                    rounds += 1
                    assert _open_files() <= files + 2, "the table's process holds the flood's sockets"
                    counts = await _counts(attacker)
                    assert rounds < 500, counts
                connector = aiohttp.TCPConnector(local_addr=("127.0.30.1", 0))
                async with aiohttp.ClientSession(connector=connector) as c:
                    async with c.get(url) as r:
                        status, text = r.status, await r.text()
                    async with c.get(url.replace("/metrics", "/healthz")) as r:
                        health = (r.status, await r.text())
                renders = metrics.answered - answered
                final = await _counts(attacker)
                attacker.stdin.close()  # type: ignore[union-attr]
                await attacker.wait()
            finally:
                await metrics.stop()
    assert rounds >= 1 and final.get("scrape_error", 0) == 0, final
    # The table renders once for many scrapes (at most once a second, however many ask).
    assert renders * 10 <= final["scrape_200"], (renders, final)
    assert status == 200 and health == (200, "ok\n")
    names = {f.name for f in text_string_to_metric_families(text)}
    assert "tablectl_round_number" in names and "tablectl_journal_writable" in names
