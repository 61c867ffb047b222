"""The archive's queries on a large generated data set: is one table's day, and the floor's day,
still fast when the table holds many days of a whole floor?

    .venv/bin/python bench/archive_query.py [--tables 500] [--days 60] [--per-day 300]

A fresh PostgreSQL cluster (as the tests make one), the archive's migrations, then
tables x days x per-day rows generated server-side (generate_series, one COPY-free INSERT) with
the kinds a day has (round_settled one in 12, an alarm one in 500...). Then each query is run
5 times and the best and median wall times printed as JSON, with the row count and the size of
the table and its indexes. The schema's indexes are what make these fast (docs/scale-out.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import psycopg

from controller.archive.schema import migrate
from tests import postgres_fixtures

QUERIES = {
    "one table, one day (all its events)": (
        "SELECT seq, kind, payload FROM events WHERE site = 'floor' AND table_id = 't0123' AND day = %(day)s"
    ),
    "one table, one day (report view)": (
        "SELECT * FROM archive_table_day WHERE site = 'floor' AND table_id = 't0123' AND day = %(day)s"
    ),
    "whole floor, one day (report view)": "SELECT * FROM archive_table_day WHERE day = %(day)s",
    "whole floor, one day (alarms by section)": "SELECT * FROM archive_alarms_by_section WHERE day = %(day)s",
    "one table, 100 records by seq (chain check)": (
        "SELECT seq, hash, prev_hash FROM events WHERE site = 'floor' AND table_id = 't0321' "
        "AND seq > %(seq)s ORDER BY seq LIMIT 100"
    ),
}

_GENERATE = """
INSERT INTO events (site, table_id, seq, day, at, kind, classification, withheld, payload, hash, prev_hash)
SELECT 'floor', format('t%%s', lpad(t::text, 4, '0')), d * %(per_day)s + i + 1,
       date '2026-01-01' + d, extract(epoch FROM date '2026-01-01' + d) + i * 40.0,
       CASE WHEN i %% 500 = 7 THEN 'alarm_raised' WHEN i %% 12 = 0 THEN 'round_settled'
            WHEN i %% 300 = 1 THEN 'batch_to_shoe' ELSE 'card_dealt' END,
       'public', false,
       CASE WHEN i %% 500 = 7 THEN '{"section": "665a.5(c)"}'::jsonb
            ELSE '{"box": 3, "card": "QH"}'::jsonb END,
       md5(t::text || d::text || i::text) || md5(i::text), NULL
FROM generate_series(0, %(tables)s - 1) t, generate_series(0, %(days)s - 1) d,
     generate_series(0, %(per_day)s - 1) i
"""


async def prepare(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await migrate(conn)


def timed(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> tuple[float, float, int]:
    times, n = [], 0
    for _ in range(5):
        t0 = time.perf_counter()
        n = len(conn.execute(sql, params).fetchall())
        times.append((time.perf_counter() - t0) * 1000)
    return min(times), statistics.median(times), n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--per-day", type=int, default=300)
    args = parser.parse_args()
    cluster = postgres_fixtures.make_cluster()
    try:
        asyncio.run(prepare(cluster.dsn))
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            t0 = time.perf_counter()
            conn.execute(_GENERATE, {"tables": args.tables, "days": args.days, "per_day": args.per_day})
            conn.execute("VACUUM ANALYZE events")
            load_s = time.perf_counter() - t0
            rows = conn.execute("SELECT count(*), pg_total_relation_size('events') FROM events").fetchone()
            assert rows is not None
            day = f"2026-01-{min(args.days, 28) // 2 + 1:02d}"
            results = {}
            for name, sql in QUERIES.items():
                best, median, n = timed(conn, sql, {"day": day, "seq": args.per_day * args.days // 2})
                results[name] = {"best_ms": round(best, 2), "median_ms": round(median, 2), "rows": n}
        out = {"rows": rows[0], "events_total_bytes": rows[1], "generate_and_analyze_s": round(load_s, 1)}
        out |= {"tables": args.tables, "days": args.days, "per_day": args.per_day, "queries": results}
        print(json.dumps(out))
    finally:
        postgres_fixtures.remove(cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
