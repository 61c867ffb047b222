"""The archive's tests: a real mosquitto (MQTT v5, persistence on), a real PostgreSQL cluster of
their own, real journals, and the real worker. Nothing waits by sleeping: the workers say when
they have committed (``ArchiveWorker.progressed``) and every wait has a guard."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import pathlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiomqtt
import psycopg
import pytest

from controller.archive import kinds  # noqa: F401  (registers the core's events)
from controller.archive.worker import ArchiveSettings, ArchiveWorker
from controller.journal import Classification, Journal, canonical_json, record_hash
from controller.table.events import EVENT_TYPES
from controller.telemetry.broker import BrokerSettings
from controller.telemetry.outbox import JournalOutbox
from controller.telemetry.topics import TableTopics
from tests import mosquitto_fixtures, postgres_fixtures
from tests.ports import free_port

GUARD_S = 60.0
SITE = "test-floor"

P, U, S = Classification.PUBLIC, Classification.UNTIL_REVEALED, Classification.SECRET
# A round's worth of kinds: public ones, a secret burn, an until_revealed hole card.
_CYCLE = [
    ("round_started", P),
    ("card_burned", S),
    ("card_dealt", P),
    ("hole_card_dealt", U),
    ("card_dealt", P),
    ("hole_card_turned", P),
    ("alarm_raised", P),
    ("round_settled", P),
    ("batch_to_shoe", P),
]


def payload_of(kind: str, seq: int, salt: str = "") -> dict[str, Any]:
    """A payload of the kind's own shape (the archive refuses any other): each of the event's
    fields, with ``salt`` in the text ones (a forked twin's records differ from seq 2)."""
    fields = EVENT_TYPES[kind]._names
    payload: dict[str, Any] = {name: f"{name}-{salt}{seq % 6}" for name in fields}
    if "round" in payload:
        payload["round"] = seq // len(_CYCLE)
    if kind == "alarm_raised":
        payload.update(section="665a.5(c)", id=seq)
    if "card" in payload:
        payload["card"] = "QH"
    return payload


def fill_journal(
    path: pathlib.Path, table_id: str, n: int, *, salt: str = "", start: float = 1_800_000_000.0
) -> None:
    """A real journal of ``n`` records; ``salt`` changes record payloads from seq 2 (a forked twin);
    ``start`` is when it was opened (another gaming day's journal starts later: another identity)."""
    entries: list[tuple[str, dict[str, Any], Classification, float]] = [
        ("table_opened", {"table": table_id, "options": {}}, P, start)
    ]
    for seq in range(2, n + 1):
        kind, cls = _CYCLE[seq % len(_CYCLE)]
        entries.append((kind, payload_of(kind, seq, salt), cls, start + seq * 0.25))
    with Journal.open(path) as journal:
        journal.append_many(entries)


async def journal_messages(path: pathlib.Path) -> list[bytes]:
    """The events messages the table would publish for every record (the real outbox)."""
    outbox = JournalOutbox(path)
    try:
        return [body for _, body in await outbox.encoded_after(0, 1_000_000)]
    finally:
        await outbox.close()


def forge(body: bytes, **changes: Any) -> bytes:
    """The attacker's copy of a published public record: its payload changed and its hash
    recomputed over the real prev_hash, so it is a self-consistent record of the chain."""
    doc = json.loads(body)
    doc["payload"] = {**doc["payload"], **changes}
    doc["hash"] = record_hash(
        doc["seq"],
        doc["at"],
        doc["kind"],
        doc["classification"],
        canonical_json(doc["payload"]),
        doc["prev_hash"],
    )
    return json.dumps(doc).encode()


async def publish(port: int, topic: str, bodies: list[bytes]) -> None:
    async with aiomqtt.Client("127.0.0.1", port, identifier=f"pub-{uuid.uuid4().hex[:8]}") as client:
        client.pending_calls_threshold = len(bodies) + 10
        await asyncio.gather(*(client.publish(topic, body, qos=1) for body in bodies))


def events_topic(table_id: str) -> str:
    return TableTopics(SITE, table_id).events


# -- mosquitto ----------------------------------------------------------------------------------


@dataclass
class Broker:
    dir: pathlib.Path
    port: int = field(default_factory=free_port)
    proc: Any = None

    def prepare(self) -> None:
        # persistence: the archive's session and its queue survive a broker restart;
        # max_queued_messages 0: no QoS 1 message for an absent or slow worker is dropped.
        (self.dir / "mosquitto.conf").write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"persistence_location {self.dir}/\nmax_queued_messages 0\nlog_dest stderr\n"
            "log_type error\nlog_type warning\nlog_type notice\nlog_type information\n"
            f"user {getpass.getuser()}\n",
            encoding="utf-8",
        )

    def start(self) -> None:
        self.proc = mosquitto_fixtures.start(self.dir / "mosquitto.conf", ready_within_s=GUARD_S)

    def stop(self) -> None:
        mosquitto_fixtures.stop(self.proc, within_s=10)
        self.proc = None

    @property
    def settings(self) -> BrokerSettings:
        return BrokerSettings("127.0.0.1", self.port, keepalive=5)


@pytest.fixture
def broker(tmp_path: pathlib.Path) -> Iterator[Broker]:
    yield from mosquitto_fixtures.serving(Broker(tmp_path / "broker"))


# -- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[postgres_fixtures.Cluster]:
    cluster = postgres_fixtures.make_cluster()
    yield cluster
    postgres_fixtures.remove(cluster)


@pytest.fixture
def db(pg_cluster: postgres_fixtures.Cluster) -> str:
    """A fresh database of its own for each test, in the session's cluster."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_cluster.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_cluster.dsn.replace("/postgres?", f"/{name}?")


def rows(dsn: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return list(conn.execute(sql, params))


# -- workers ------------------------------------------------------------------------------------


# Every table the archive tests publish for: registered, as a floor's would be (an unregistered
# one is an unknown_table alarm, not rows).
TABLES = tuple(
    (SITE, t) for t in [*(f"dab-{i:02d}" for i in range(1, 10)), *(f"t{i:02d}" for i in range(12))]
)


def settings(broker: Broker, dsn: str, client_id: str = "archive-1", **kw: Any) -> ArchiveSettings:
    kw.setdefault("sweep_s", 0.1)
    kw.setdefault("tables", TABLES)
    return ArchiveSettings(broker.settings, dsn, "archive", client_id, **kw)


@contextlib.asynccontextmanager
async def running(*workers: ArchiveWorker) -> AsyncIterator[None]:
    """The workers running and subscribed; stopped (and their tasks' failures raised) on exit."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(w.run(stop)) for w in workers]
    try:
        async with asyncio.timeout(GUARD_S):
            for w in workers:
                await w.subscribed.wait()
        yield
    finally:
        stop.set()
        async with asyncio.timeout(GUARD_S):
            await asyncio.gather(*tasks)


async def until(predicate: Callable[[], bool], *workers: ArchiveWorker) -> None:
    """Wait (up to the guard) for ``predicate``, looking again whenever a worker has progressed."""
    async with asyncio.timeout(GUARD_S):
        while not predicate():
            waits = [asyncio.create_task(w.progressed()) for w in workers]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for t in waits:
                t.cancel()
