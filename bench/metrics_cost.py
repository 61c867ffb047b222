"""What /metrics costs a table: the instrumentation on each poll and each journal commit, and one
scrape (prometheus_client's encoder over a table's registry with four devices and a few open
alarms). Prints JSON; median of several runs. Usage: python bench/metrics_cost.py [--n N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from prometheus_client import generate_latest

from controller.game_config import default_options
from controller.supervisor.metrics import Readings, TableMetrics
from controller.table.core import Table

DEVICES = ("shuffler", "shoe", "reader", "keypad")


def one_run(n: int) -> dict[str, float]:
    metrics = TableMetrics("bench")
    table = Table(default_options("down-under"))
    metrics.watch(
        Readings(
            table=lambda: table,
            health=dict.fromkeys(DEVICES, "online"),
            event_queue=lambda: 0,
            outbox_queues=lambda: dict.fromkeys(DEVICES, 0),
            journal_seq=lambda: 50_000,
            published_seq=lambda: 49_990,
            ready=lambda: True,
        )
    )
    t0 = time.perf_counter()
    for i in range(n):
        device = DEVICES[i % 4]
        metrics.polling(device)
        metrics.polled(device, i % 100 != 0)
    poll = (time.perf_counter() - t0) / n
    records = [("card_dealt", {}), ("round_settled", {})]
    t0 = time.perf_counter()
    for _ in range(n):
        metrics.committed(0.001, records)
    commit = (time.perf_counter() - t0) / n
    scrapes = max(1, n // 100)
    t0 = time.perf_counter()
    for _ in range(scrapes):
        text = generate_latest(metrics.registry)
    scrape = (time.perf_counter() - t0) / scrapes
    return {"poll_us": poll * 1e6, "commit_us": commit * 1e6, "scrape_ms": scrape * 1e3, "bytes": len(text)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    runs = [one_run(args.n) for _ in range(args.runs)]
    print(json.dumps({k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}))


if __name__ == "__main__":
    main()
