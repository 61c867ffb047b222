"""The archive's write path alone beside a bare COPY of the same rows, in the same PostgreSQL.

    .venv/bin/python bench/archive_store.py [--tables 200] [--per-table 100] [--batch 2000]

A fresh PostgreSQL cluster with ``fsync`` and ``synchronous_commit`` on, the archive's migrations
and the tables registered; chained events messages as the tables publish them (real hashes),
parsed by ``parse_event`` and stored by ``EventStore.store`` in batches of ``--batch``, one
transaction each, as a worker does; then the same rows by one bare ``COPY`` into a table like
``events`` (bench/archive_load.py's ceiling). No broker: this is what the worker's parse and
commit take, and how close the commit comes to what the database takes at best. Printed as JSON:
rows per second of the store alone and of parse plus store (wall), the worker's CPU per row of
each, the ceiling and the shares, and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import sys
import time
from datetime import UTC, datetime
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bench.archive_load import copy_ceiling
from bench.fleet_load import card_dealt
from controller.archive.connection import ArchiveConnection
from controller.archive.messages import parse_event
from controller.gaming_day import PENNSYLVANIA
from controller.journal import GENESIS_HASH, Classification, Record, canonical_json, record_hash
from controller.telemetry.payloads import encode, event_message
from controller.telemetry.topics import TableTopics
from tests import postgres_fixtures


def messages(tables: int, per_table: int) -> list[tuple[str, bytes]]:
    """Each table's chained card_dealt records, interleaved as a floor's arrive."""
    out: list[tuple[str, bytes]] = []
    prev: dict[int, str] = {}
    start = time.time()
    for seq in range(1, per_table + 1):
        for t in range(tables):
            before = prev.get(t, GENESIS_HASH)
            dealt, at = card_dealt(seq), start + seq * 0.1
            digest = record_hash(seq, at, "card_dealt", "public", canonical_json(dealt), before)
            record = Record(seq, at, "card_dealt", Classification.PUBLIC, dealt, before, digest)
            prev[t] = digest
            body = encode(event_message(record, PENNSYLVANIA, prev_public=True))
            out.append((TableTopics("bench", f"t{t:04d}").events, body))
    return out


async def store_all(dsn: str, tables: int, msgs: list[tuple[str, bytes]], batch: int) -> dict[str, float]:
    pg = ArchiveConnection(dsn, "bench", [("bench", f"t{t:04d}") for t in range(tables)], "bench")
    store = await pg.open()
    received = datetime.now(UTC)
    parse_cpu = store_cpu = parse_wall = 0.0
    began = time.perf_counter()
    for i in range(0, len(msgs), batch):
        c0, w0 = time.process_time(), time.perf_counter()
        events = [parse_event(topic, body, received) for topic, body in msgs[i : i + batch]]
        c1 = time.process_time()
        parse_wall += time.perf_counter() - w0
        result = await store.store(events)
        store_cpu += time.process_time() - c1
        parse_cpu += c1 - c0
        assert result.inserted == len(events), result
    wall = time.perf_counter() - began
    await pg.drop()
    return {"wall_s": wall, "parse_wall_s": parse_wall, "parse_cpu_s": parse_cpu, "store_cpu_s": store_cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--per-table", type=int, default=100)
    ap.add_argument("--batch", type=int, default=2000)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    msgs = messages(args.tables, args.per_table)
    cluster = postgres_fixtures.make_cluster(durable=True)
    try:
        took = asyncio.run(store_all(cluster.dsn, args.tables, msgs, args.batch))
        rows, ceiling_s = copy_ceiling(cluster.dsn)
    finally:
        postgres_fixtures.remove(cluster)
    n = len(msgs)
    ceiling = rows / max(ceiling_s, 1e-9)
    store_wall = took["wall_s"] - took["parse_wall_s"]
    out: dict[str, Any] = {
        "rows": n,
        "batch": args.batch,
        "durable_postgres": True,
        "parse_and_store_rows_per_s": round(n / took["wall_s"]),
        "store_rows_per_s": round(n / store_wall),
        "copy_ceiling_rows_per_s": round(ceiling),
        "parse_and_store_share_of_ceiling": round(n / took["wall_s"] / ceiling, 2),
        "store_share_of_ceiling": round(n / store_wall / ceiling, 2),
        "parse_cpu_us_per_row": round(took["parse_cpu_s"] / n * 1e6, 1),
        "store_cpu_us_per_row": round(took["store_cpu_s"] / n * 1e6, 1),
        "load_average_1m_before": round(load_before, 2),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
