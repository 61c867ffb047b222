"""The table's metrics in the Prometheus text format (``tablectl run --metrics HOST:PORT``, served
beside ``/healthz`` by controller/telemetry/metrics_http.py), through the official client library.

Two kinds: what happens (poll round trips, poll errors, reconnects, journal commits, rounds,
alarms raised) is counted where it happens, on this table's own registry (never the library's
global one: a test or the demo may run several tables in one process); what *is* (device health,
queue depths, open alarms, the journal's and the broker's sequence numbers) is read from the
supervisor when scraped, so it can never drift from the state it describes. Names and labels are
in docs/metrics.md; the shipped alert rules (config/prometheus/) are written against them.

Nothing secret is a label or a value: devices by name, alarms by regulation section.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.table.core import Table

# Modbus polls take a few milliseconds on a LAN and time out at the device's timeout (0.5-2 s).
POLL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# A journal commit is an fsync: ~1 ms on an SSD, tens of ms on an SD card.
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
HEALTHS = ("connecting", "online", "degraded", "fault", "out_of_order")


@dataclass(frozen=True)
class Readings:
    """Where the scrape reads the supervisor's state (callables: read at scrape time only)."""

    table: Callable[[], Table | None]
    health: Mapping[str, object]  # device -> DeviceHealth (a StrEnum)
    event_queue: Callable[[], int]
    outbox_queues: Callable[[], Mapping[str, int]]
    journal_seq: Callable[[], int | None]
    published_seq: Callable[[], int | None]
    ready: Callable[[], bool]
    # Floor commands refused over MQTT because the command queue was full (None: no broker).
    commands_refused: Callable[[], int | None] = lambda: None
    # Whether the journal takes commits now, and its disk's (free, reserve) bytes (None: unknown).
    journal_writable: Callable[[], bool] = lambda: True
    journal_disk: Callable[[], tuple[int, int] | None] = lambda: None


class TableMetrics:
    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.poll_seconds = Histogram(
            "tablectl_device_poll_seconds",
            "Round trip of one poll of a device (request to answer or failure)",
            ["device"], buckets=POLL_BUCKETS, registry=r,
        )  # fmt: skip
        self.poll_errors = Counter(
            "tablectl_device_poll_errors",
            "Polls that failed (timeout, lost link, bad frame)",
            ["device"],
            registry=r,
        )
        self.reconnects = Counter(
            "tablectl_device_reconnects",
            "A device answering again after it was degraded or failed",
            ["device"], registry=r,
        )  # fmt: skip
        self.commit_seconds = Histogram(
            "tablectl_journal_commit_seconds",
            "One step's journal transaction, fsync included (commit before effect)",
            buckets=COMMIT_BUCKETS, registry=r,
        )  # fmt: skip
        self.rounds = Counter("tablectl_rounds_settled", "Rounds settled by this process", registry=r)
        self.rounds_voided = Counter("tablectl_rounds_voided", "Rounds voided by this process", registry=r)
        self.alarms_raised = Counter(
            "tablectl_alarms_raised",
            "Alarms the table raised, by regulation section",
            ["section"],
            registry=r,
        )
        self._polling: dict[str, float] = {}
        self._readings: Readings | None = None

    # -- counted where it happens ----------------------------------------------------------------

    def polling(self, device: str) -> None:
        self._polling[device] = time.perf_counter()

    def polled(self, device: str, ok: bool) -> None:
        began = self._polling.pop(device, None)
        if began is not None:
            self.poll_seconds.labels(device).observe(time.perf_counter() - began)
        if not ok:
            self.poll_errors.labels(device).inc()

    def health_changed(self, device: str, old: str | None, new: str) -> None:
        if new == "online" and old in ("degraded", "fault"):
            self.reconnects.labels(device).inc()

    def committed(self, seconds: float, kinds: Iterable[tuple[str, Mapping[str, object]]]) -> None:
        """A step's records are in the journal (``kinds``: each record's kind and payload)."""
        self.commit_seconds.observe(seconds)
        for kind, payload in kinds:
            if kind == "round_settled":
                self.rounds.inc()
            elif kind == "round_voided":
                self.rounds_voided.inc()
            elif kind == "alarm_raised":
                self.alarms_raised.labels(str(payload.get("section", "unknown"))).inc()

    # -- read when scraped -----------------------------------------------------------------------

    def watch(self, readings: Readings) -> None:
        if self._readings is None:
            self.registry.register(_StateCollector(readings))
        self._readings = readings


class _StateCollector(Collector):
    def __init__(self, readings: Readings) -> None:
        self.r = readings

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        r = self.r
        ready = GaugeMetricFamily(
            "tablectl_ready", "1 once the journal is replayed and every device answered"
        )
        ready.add_metric([], 1.0 if r.ready() else 0.0)
        yield ready
        health = GaugeMetricFamily(
            "tablectl_device_health", "1 for each device's current health", labels=["device", "health"]
        )
        for device, current in sorted(r.health.items()):
            for h in HEALTHS:
                health.add_metric([device, h], 1.0 if str(current) == h else 0.0)
        yield health
        queues = GaugeMetricFamily(
            "tablectl_queue_depth", "Items waiting: device events for the table, commands for a device",
            labels=["queue", "device"],
        )  # fmt: skip
        queues.add_metric(["device_events", ""], float(r.event_queue()))
        for device, n in sorted(r.outbox_queues().items()):
            queues.add_metric(["commands", device], float(n))
        yield queues
        seq = r.journal_seq()
        if seq is not None:
            yield GaugeMetricFamily("tablectl_journal_seq", "The journal's last sequence number", value=seq)
        published = r.published_seq()
        if published is not None:
            yield GaugeMetricFamily(
                "tablectl_published_seq",
                "The last sequence number the ops broker acknowledged",
                value=published,
            )
            if seq is not None:
                yield GaugeMetricFamily(
                    "tablectl_unpublished_records", "Journal records not yet acknowledged by the ops broker",
                    value=max(0, seq - published),
                )  # fmt: skip
        yield GaugeMetricFamily(
            "tablectl_journal_writable",
            "1 while the journal takes commits; 0 while a commit fails (dealing is halted)",
            value=1.0 if r.journal_writable() else 0.0,
        )
        disk = r.journal_disk()
        if disk is not None:
            yield GaugeMetricFamily(
                "tablectl_journal_disk_free_bytes", "Free bytes on the journal's file system", value=disk[0]
            )
            yield GaugeMetricFamily(
                "tablectl_journal_disk_reserve_bytes",
                "The free space the appliance keeps for its journal; less is warned of",
                value=disk[1],
            )
        refused = r.commands_refused()
        if refused is not None:
            commands = CounterMetricFamily(
                "tablectl_commands_refused", "Floor commands refused over MQTT, by why", labels=["reason"]
            )
            commands.add_metric(["queue_full"], float(refused))
            yield commands
        table = r.table()
        if table is None:
            return
        rounds = GaugeMetricFamily("tablectl_round_number", "The table's current round number (journalled)")
        rounds.add_metric([], float(table.round_no))
        yield rounds
        open_alarms = GaugeMetricFamily(
            "tablectl_alarms_open", "Alarms not yet acknowledged, by section and whether dealing is halted",
            labels=["section", "halting"],
        )  # fmt: skip
        counts: dict[tuple[str, str], int] = {}
        for alarm in table.alarms.values():
            if alarm.acknowledged_by is None:
                key = (alarm.section, "true" if alarm.halts else "false")
                counts[key] = counts.get(key, 0) + 1
        for (section, halting), n in sorted(counts.items()):
            open_alarms.add_metric([section, halting], float(n))
        yield open_alarms
