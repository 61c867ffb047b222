"""Both transports are one pipeline (controller/archive/ingest.py): the same records refused, the
same alarms, ``received_by`` stamped, and the same /metrics and /healthz, whether the events come
from mosquitto's shared subscription or a JetStream cluster's durable consumer. Each case runs
once per transport, against a real broker (mosquitto, or a three-node nats-server cluster)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.archive.ingest import Ingest
from controller.archive.jetstream import JetStreamSettings, JetStreamWorker
from controller.archive.metrics import registry_for
from controller.archive.worker import ArchiveWorker
from controller.telemetry.metrics_http import MetricsServer
from controller.telemetry.nats_link import subject_of
from tests.archive.conftest import (
    GUARD_S,
    TABLES,
    Broker,
    events_topic,
    fill_journal,
    journal_messages,
    publish,
    rows,
    settings,
    until,
)
from tests.nats_fixtures import NatsCluster, nats_binary


@dataclass
class Path:
    worker: Ingest[object]  # type: ignore[type-var]
    publish: Callable[[str, list[bytes]], Awaitable[None]]


@pytest.fixture(params=["mqtt", "nats"])
async def path(request: pytest.FixtureRequest, db: str, tmp_path: pathlib.Path) -> AsyncIterator[Path]:
    if request.param == "mqtt":
        broker: Broker = request.getfixturevalue("broker")
        yield Path(ArchiveWorker(settings(broker, db, "archive-p")), lambda t, b: publish(broker.port, t, b))
        return
    nats_binary()
    cluster = NatsCluster(tmp_path / "nats")
    await asyncio.to_thread(cluster.start)
    try:
        worker = JetStreamWorker(
            JetStreamSettings(cluster.servers, db, "archive-p", sweep_s=0.1, tables=TABLES)
        )

        async def to_stream(topic: str, bodies: list[bytes]) -> None:
            nc = await nats.connect(servers=cluster.servers)
            try:
                js = nc.jetstream(timeout=10)
                for body in bodies:
                    await js.publish(subject_of(topic), body)
            finally:
                await nc.close()

        yield Path(worker, to_stream)
    finally:
        await asyncio.to_thread(cluster.stop)


async def _scrape(server: MetricsServer, where: str) -> tuple[int, str]:
    assert server.address is not None
    host, port = server.address
    async with aiohttp.ClientSession() as s, s.get(f"http://{host}:{port}{where}") as r:
        return r.status, await r.text()


async def test_refusals_alarms_received_by_and_metrics_are_the_same_on_both_paths(
    path: Path, db: str, tmp_path: pathlib.Path
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-05", 9)
    real = await journal_messages(journal)
    placeholder = json.dumps(
        {"version": 1, "seq": 8, "kind": "round_settled", "classification": "secret", "withheld": True}
    ).encode()
    random_hash = json.dumps({**json.loads(real[8]), "hash": os.urandom(32).hex()}).encode()
    nested = json.dumps([[json.loads(real[6])]]).encode()
    worker = path.worker
    server = MetricsServer(registry_for(worker), worker.health)
    await server.start("127.0.0.1", 0)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        async with asyncio.timeout(GUARD_S):
            await worker.ready.wait()
        await path.publish(
            events_topic("dab-05"), [*real[:7], placeholder, random_hash, b"\xff not json", nested]
        )
        # Unreadable on the topic of a table nobody registered: that table's unknown_table alarm.
        await path.publish(events_topic("zz-98"), [b"{not json"])
        await until(lambda: len(worker.alarms) >= 5, worker)  # type: ignore[arg-type]
        metrics, health = await _scrape(server, "/metrics"), await _scrape(server, "/healthz")
    finally:
        stop.set()
        async with asyncio.timeout(GUARD_S):
            await task
        await server.stop()
    alarms = rows(db, "SELECT kind, table_id, seq, detail FROM chain_alarms ORDER BY kind, seq, detail")
    assert [(k, t, s) for k, t, s, _ in alarms] == [
        ("bad_hash", "dab-05", 9),
        ("refused", "dab-05", 0),  # not JSON: it claimed no seq
        ("refused", "dab-05", 0),  # a JSON array, not an object
        ("refused", "dab-05", 8),
        ("unknown_table", "zz-98", 0),
    ]
    assert "events message is not JSON; not archived" in alarms[1][3] + alarms[2][3]
    assert rows(db, "SELECT count(*), min(received_by), max(received_by) FROM events") == [
        (7, "archive-p", "archive-p")
    ]
    assert health == (200, "ok\n")
    status, text = metrics
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert status == 200
    assert values[("tablectl_archive_events_stored_total", ())] == 7
    assert values[("tablectl_archive_refused_total", ())] == 2
    assert values[("tablectl_archive_unreadable_total", ())] == 3
    assert values[("tablectl_archive_chain_alarms_total", (("kind", "refused"),))] == 3
    assert values[("tablectl_archive_chain_alarms_total", (("kind", "unknown_table"),))] == 1
