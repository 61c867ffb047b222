"""The JetStream worker's own CPU a row, draining a preloaded stream, by stage.

    .venv/bin/python bench/archive_drain_cpu.py [--tables 50] [--per-table 400] [--rounds 1]
                                                [--workers 1] [--profile out.prof]

Wall-clock rates on a shared, loaded machine say more about the neighbours than about the
archive; the CPU a row the worker spends does not. This bench starts a three-node NATS cluster
and a PostgreSQL with ``fsync`` on, fills the events stream with real journals' messages
(``--tables`` journals of ``--per-table`` records, published with JetStream acknowledgements
before any worker runs), then drains it with ``--workers`` JetStream workers
(controller/archive/jetstream.py, in this process, one event loop) and reports:

- ``cpu_us_per_row``: this process's CPU (user + system) from the workers' start to the last
  commit, over the rows stored;
- ``parse_cpu_us_per_row``: of it, the parse (each batch's JSON, checks and hashes: synchronous,
  timed by the CPU clock around it);
- ``wall_rows_per_s``: rows over the drain's wall time (provisional on a busy machine);
- ``load_average_1m``.

With ``--profile`` the drain runs under cProfile and the statistics are written there (the CPU
figures then include the profiler's overhead). Printed as JSON, one object a round.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pathlib
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from controller.archive import ingest
from controller.archive.jetstream import JetStreamSettings, JetStreamWorker, setup
from controller.telemetry.jetstream_events import MSG_ID, msg_id
from controller.telemetry.nats_link import subject_of
from controller.telemetry.topics import TableTopics
from tests import postgres_fixtures
from tests.archive.conftest import fill_journal, journal_messages
from tests.nats_fixtures import NatsCluster

SITE = "bench"


async def preload(servers: list[str], loads: list[tuple[str, list[bytes]]]) -> int:
    import nats

    nc = await nats.connect(servers=servers)
    js = nc.jetstream(timeout=30)
    sent = 0
    try:
        for table_id, bodies in loads:
            topics = TableTopics(SITE, table_id)
            subject = subject_of(topics.events)
            for i in range(0, len(bodies), 500):
                # As the tables publish: each with its Nats-Msg-Id (a header every delivery carries).
                await asyncio.gather(
                    *(
                        js.publish(subject, b, headers={MSG_ID: msg_id(topics, i + j + 1, b)})
                        for j, b in enumerate(bodies[i : i + 500])
                    )
                )
                sent += len(bodies[i : i + 500])
    finally:
        await nc.close()
    return sent


def timed_parse() -> dict[str, float]:
    """Wrap Ingest.parse with the CPU clock (it is synchronous: its CPU is its own)."""
    spent = {"parse_cpu_s": 0.0}
    parse = ingest.Ingest.parse

    def parse_timed(self: Any, batch: Any) -> Any:
        t0 = time.process_time()
        try:
            return parse(self, batch)
        finally:
            spent["parse_cpu_s"] += time.process_time() - t0

    ingest.Ingest.parse = parse_timed  # type: ignore[method-assign]
    return spent


async def drain(settings: list[JetStreamSettings], expected: int, spent: dict[str, float]) -> dict[str, Any]:
    workers = [JetStreamWorker(s) for s in settings]
    stop = asyncio.Event()
    spent["parse_cpu_s"] = 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    tasks = [asyncio.create_task(w.run(stop)) for w in workers]
    first_commit: float | None = None
    while sum(w.stored for w in workers) < expected:
        waits = [asyncio.create_task(w.progressed()) for w in workers]
        done, _ = await asyncio.wait([*waits, *tasks], timeout=60, return_when=asyncio.FIRST_COMPLETED)
        for p in waits:
            p.cancel()
        if not done:
            raise SystemExit(f"no progress for 60 s: {sum(w.stored for w in workers)} of {expected}")
        for t in tasks:
            if t.done():
                t.result()
        if first_commit is None and any(w.stored for w in workers):
            first_commit = time.perf_counter()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    stop.set()
    await asyncio.gather(*tasks)
    stored = sum(w.stored for w in workers)
    return {
        "rows": stored,
        "workers": len(workers),
        "cpu_s": round(cpu, 2),
        "cpu_us_per_row": round(cpu / stored * 1e6, 1),
        "parse_cpu_us_per_row": round(spent["parse_cpu_s"] / stored * 1e6, 1),
        "wall_s": round(wall, 2),
        "wall_rows_per_s": round(stored / wall),
        "batches": sum(w.batches for w in workers),
        "rows_per_commit": round(stored / max(1, sum(w.batches for w in workers))),
        "first_commit_s": round((first_commit or wall0) - wall0, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=50)
    ap.add_argument("--per-table", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--profile", default=None)
    args = ap.parse_args()
    d = pathlib.Path(tempfile.mkdtemp(prefix="archive-drain-"))
    tables = [f"t{i:04d}" for i in range(args.tables)]
    loads = []
    for table_id in tables:
        path = d / f"{table_id}.db"
        fill_journal(path, table_id, args.per_table)
        loads.append((table_id, asyncio.run(journal_messages(path))))
    spent = timed_parse()
    for r in range(args.rounds):
        # Each round on a fresh cluster and database: the stream is a work queue (one consumer).
        cluster = NatsCluster(d / f"nats{r}")
        cluster.start()
        pg = postgres_fixtures.make_cluster(durable=True)
        try:
            settings = [
                JetStreamSettings(
                    cluster.servers,
                    pg.dsn,
                    client_id=f"bench-archive-{i}",
                    tables=tuple((SITE, t) for t in tables),
                )
                for i in range(args.workers)
            ]
            asyncio.run(setup(settings[0]))
            sent = asyncio.run(preload(cluster.servers, loads))
            load = os.getloadavg()[0]
            profiler = cProfile.Profile(time.process_time) if args.profile else None
            if profiler:
                profiler.enable()
            result = asyncio.run(drain(settings, sent, spent))
            if profiler:
                profiler.disable()
                profiler.dump_stats(args.profile)
            print(json.dumps({**result, "load_average_1m": round(load, 2)}), flush=True)
        finally:
            postgres_fixtures.remove(pg)
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
