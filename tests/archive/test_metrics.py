"""``tablectl archive --metrics``: the worker's ingest scraped over HTTP as Prometheus would and
parsed with prometheus_client's parser (issue 26): events stored, batches committed, the lag."""

from __future__ import annotations

import pathlib

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controller.archive.metrics import registry_for
from controller.archive.worker import ArchiveWorker
from controller.telemetry.metrics_http import MetricsServer
from tests.archive.conftest import (
    SITE,
    TABLES,
    Broker,
    events_topic,
    fill_journal,
    journal_messages,
    publish,
    running,
    settings,
    until,
)


async def _scrape(server: MetricsServer, path: str) -> tuple[int, str]:
    assert server.address is not None
    host, port = server.address
    async with aiohttp.ClientSession() as s, s.get(f"http://{host}:{port}{path}") as r:
        return r.status, await r.text()


async def test_the_archive_serves_its_ingest_metrics(broker: Broker, db: str, tmp_path: pathlib.Path) -> None:
    fill_journal(tmp_path / "j.db", "met-01", 45)
    bodies = await journal_messages(tmp_path / "j.db")
    worker = ArchiveWorker(settings(broker, db, "archive-m", tables=(*TABLES, (SITE, "met-01"))))
    server = MetricsServer(registry_for(worker), lambda: (worker.db_connected, "ok"))
    await server.start("127.0.0.1", 0)
    try:
        async with running(worker):
            await publish(broker.port, events_topic("met-01"), bodies)
            await until(lambda: worker.stored == 45, worker)
            status, text = await _scrape(server, "/metrics")
            health = await _scrape(server, "/healthz")
    finally:
        await server.stop()
    assert status == 200 and health == (200, "ok\n")
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert values[("tablectl_archive_events_stored_total", ())] == 45
    assert values[("tablectl_archive_unreadable_total", ())] == 0
    assert values[("tablectl_archive_commit_seconds_count", ())] >= 1
    assert values[("tablectl_archive_chain_alarms_total", (("kind", "gap"),))] == 0
    assert values[("tablectl_archive_db_up", ())] == 1
    # The journal's records are dated 2027 (the tests' fixed clock): ahead of now, so no lag.
    assert values[("tablectl_archive_lag_seconds", ())] == 0
