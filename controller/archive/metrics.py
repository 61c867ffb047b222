"""``tablectl archive --metrics HOST:PORT``: the worker's ingest in the Prometheus text format
(served with /healthz by controller/telemetry/metrics_http.py; names in docs/metrics.md).

Read from the worker's own counters when scraped, so the numbers are the ones its stop line logs.
The ingest rate is ``rate(tablectl_archive_events_stored_total[5m])``; the lag is how old the
newest record of the last committed batch was when it was committed (the table's clock to the
archive's commit): it grows when the broker or PostgreSQL holds records back, not when a floor
is merely quiet.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from controller.archive.alarms import KINDS


class Ingest(Protocol):
    stored: int
    duplicates: int
    unreadable: int
    refused: int
    db_failures: int
    batches: int
    lag_s: float | None
    last_commit: float | None
    timings: dict[str, float]

    @property
    def inbox_depth(self) -> int: ...

    @property
    def db_connected(self) -> bool: ...

    @property
    def chain_alarms(self) -> dict[str, int]: ...


class _IngestCollector(Collector):
    def __init__(self, worker: Ingest) -> None:
        self.w = worker

    def collect(self) -> Iterable[Metric]:
        w = self.w
        for name, value, text in (
            ("tablectl_archive_events_stored", w.stored, "Events inserted into PostgreSQL"),
            ("tablectl_archive_duplicates", w.duplicates, "Events received again and ignored"),
            (
                "tablectl_archive_unreadable",
                w.unreadable,
                "Messages on a table's events topic that are not a record (each a refused alarm)",
            ),
            (
                "tablectl_archive_refused",
                w.refused,
                "Records refused: kind, classification, payload shape or hash (each an alarm)",
            ),
            (
                "tablectl_archive_db_failures",
                w.db_failures,
                "Attempts PostgreSQL refused (the batch was kept)",
            ),
        ):
            yield CounterMetricFamily(name, text, value=value)
        alarms = CounterMetricFamily("tablectl_archive_chain_alarms", "Chain alarms raised", labels=["kind"])
        for kind in KINDS:
            alarms.add_metric([kind], w.chain_alarms.get(kind, 0))
        yield alarms
        yield SummaryMetricFamily(
            "tablectl_archive_commit_seconds",
            "Batches committed to PostgreSQL and the time their transactions took",
            count_value=w.batches,
            sum_value=w.timings.get("commit_s", 0.0),
        )
        yield GaugeMetricFamily(
            "tablectl_archive_inbox_depth", "Messages received, not yet committed", value=w.inbox_depth
        )
        yield GaugeMetricFamily(
            "tablectl_archive_db_up",
            "1 while the worker holds a PostgreSQL connection",
            value=int(w.db_connected),
        )
        if w.lag_s is not None:
            yield GaugeMetricFamily(
                "tablectl_archive_lag_seconds",
                "Age of the newest record of the last committed batch when it was committed",
                value=w.lag_s,
            )
        if w.last_commit is not None:
            yield GaugeMetricFamily(
                "tablectl_archive_last_commit_timestamp_seconds",
                "When a batch was last committed",
                value=w.last_commit,
            )


def registry_for(worker: Ingest) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_IngestCollector(worker))
    return registry
