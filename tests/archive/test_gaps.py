"""Gaps that close themselves: the archive asks the table (``cmd/republish``) for what a broker
lost, and the table publishes it again from its journal; what the journal does not hold is raised.

The tables here are the real telemetry (controller/telemetry/publisher.py) on real journals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import aiomqtt

from controller.archive.worker import ArchiveWorker
from controller.journal import Journal
from controller.telemetry.publisher import TableIdentity, Telemetry
from tests.archive.conftest import (
    _CYCLE,
    GUARD_S,
    SITE,
    Broker,
    events_topic,
    fill_journal,
    journal_messages,
    payload_of,
    publish,
    rows,
    running,
    settings,
    until,
)

OPEN = "SELECT count(*) FROM gap_requests WHERE status IN ('asking', 'not_in_journal')"


def append(path: pathlib.Path, table_id: str, n: int) -> None:
    """``n`` more records at the end of the table's journal, as the table would write them."""
    with Journal.open(path, create=False) as journal:
        start = journal.last_seq + 1
        entries: list[tuple[str, dict[str, Any], Any, float]] = []
        for seq in range(start, start + n):
            kind, cls = _CYCLE[seq % len(_CYCLE)]
            # A payload of the kind's own shape: the archive keeps nothing else.
            entries.append((kind, payload_of(kind, seq, table_id), cls, 1_800_000_000.0 + seq))
        journal.append_many(entries)


@contextlib.asynccontextmanager
async def table(
    broker: Broker, journal: pathlib.Path, table_id: str, heartbeat_s: float = 5.0
) -> AsyncIterator[Telemetry]:
    identity = TableIdentity(SITE, table_id, "double-back-jack", "c0ffee", {"tablectl": "test"})
    telemetry = Telemetry(broker.settings, identity, journal, poll_s=0.1, heartbeat_s=heartbeat_s)
    await telemetry.start()
    try:
        yield telemetry
    finally:
        await telemetry.stop()


async def test_a_broker_restart_mid_ingest_leaves_no_gap(
    broker: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    """The known hole: mosquitto 2.0 does not restore a shared subscription after a restart, so
    what the table publishes before the worker subscribes again is acknowledged and queued for
    nobody. Here the worker comes back after the table has published: the hole is certain."""
    path = tmp_path / "j.db"
    fill_journal(path, "dab-07", 60)
    worker = ArchiveWorker(settings(broker, db, "archive-1", gap_grace_s=0.2, gap_ask_initial_s=0.2))
    async with contextlib.AsyncExitStack() as stack:
        async with running(worker):
            tele = await stack.enter_async_context(table(broker, path, "dab-07"))
            await until(lambda: worker.stored == 60, worker)
        broker.stop()
        broker.start()
        # The table reconnects and publishes 40 more: the broker acknowledges them to the table and
        # queues them for nobody (a plain subscriber here sees them go by).
        async with aiomqtt.Client("127.0.0.1", broker.port, identifier="watch") as watch:
            await watch.subscribe(events_topic("dab-07"), qos=1)
            append(path, "dab-07", 40)
            tele.journal_appended()
            async with asyncio.timeout(GUARD_S):
                async for message in watch.messages:
                    if json.loads(message.payload)["seq"] == 100:  # type: ignore[arg-type]
                        break
        again = ArchiveWorker(settings(broker, db, "archive-1", gap_grace_s=0.2, gap_ask_initial_s=0.2))
        async with running(again):
            append(path, "dab-07", 20)  # the next ones arrive: 61-100 are a gap, asked for
            tele.journal_appended()
            complete = lambda: rows(db, "SELECT count(DISTINCT seq) FROM events") == [(120,)]  # noqa: E731
            await until(lambda: complete() and rows(db, OPEN) == [(0,)], again)
            await until(lambda: rows(db, "SELECT checked_seq FROM chain_state") == [(120,)], again)
    assert again.gap_requests >= 1 and again.stored + again.duplicates >= 60
    # One request for the hole, filled. Its first_seq is 61 unless a sweep ran while the re-sent
    # records were still arriving: a request narrows to the first record it still lacks (on a busy
    # machine, 62 or later), and stays the same request.
    [(first, last, status)] = rows(db, "SELECT first_seq, last_seq, status FROM gap_requests")
    assert 61 <= first <= 100 and (last, status) == (100, "filled")
    assert rows(db, "SELECT count(*) FROM chain_alarms") == [(0,)]
    # Exactly as first published: the archived messages are those the journal encodes today.
    first = await journal_messages(path)
    archived = rows(db, "SELECT seq, hash, withheld FROM events ORDER BY seq")
    assert [(s, h, w) for s, h, w in archived] == [
        (m["seq"], m.get("hash"), bool(m.get("withheld", False))) for m in map(json.loads, first)
    ]


async def test_records_not_in_the_journal_are_raised_as_a_gap(
    broker: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    """The table holds only up to 20 (say, a journal restored from an older copy): it sends
    11-20 again and answers that 21-24 are not in its journal; the alarm says so."""
    full, short = tmp_path / "full.db", tmp_path / "short.db"
    fill_journal(full, "dab-08", 30)
    fill_journal(short, "dab-08", 20)  # the same records 1-20
    bodies = await journal_messages(full)
    worker = ArchiveWorker(settings(broker, db, "archive-1", gap_grace_s=0.2, gap_ask_initial_s=0.2))
    async with running(worker):
        await publish(broker.port, events_topic("dab-08"), bodies[:10] + bodies[24:])
        await until(lambda: worker.stored == 16, worker)
        async with table(broker, short, "dab-08"):
            await until(lambda: any(a.kind == "gap" for a in worker.alarms), worker)
            await until(lambda: rows(db, OPEN) == [(0,)], worker)
    assert rows(db, "SELECT kind, seq, detail FROM chain_alarms") == [
        ("gap", 21, "records 21-24 never arrived and not in the table's journal")
    ]
    assert rows(db, "SELECT count(*), max(seq) FROM events WHERE seq <= 20") == [(20, 20)]
    assert rows(db, "SELECT checked_seq FROM chain_state") == [(30,)]


async def test_a_broker_restart_with_the_worker_running_leaves_no_gap(
    broker: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    """The same restart with the worker running throughout and the table publishing right after
    the broker is back: whatever the worker's new subscription missed is asked for and comes."""
    path = tmp_path / "j.db"
    fill_journal(path, "dab-06", 50)
    worker = ArchiveWorker(settings(broker, db, "archive-1", gap_grace_s=0.2, gap_ask_initial_s=0.2))
    async with running(worker), table(broker, path, "dab-06") as tele:
        await until(lambda: worker.stored == 50, worker)
        broker.stop()
        await until(lambda: not worker.subscribed.is_set(), worker)
        broker.start()
        append(path, "dab-06", 50)  # mid-ingest: out as soon as the table is back
        tele.journal_appended()
        await until(lambda: tele.acked_seq == 100, worker)
        async with asyncio.timeout(GUARD_S):
            await worker.subscribed.wait()
        # Later records after the worker is back, so a hole shows as a gap (a table that goes quiet
        # leaves none: docs/journal.md).
        append(path, "dab-06", 10)
        tele.journal_appended()
        done = "SELECT count(DISTINCT seq), max(seq) FROM events"
        await until(lambda: rows(db, done) == [(110, 110)] and rows(db, OPEN) == [(0,)], worker)
        await until(lambda: rows(db, "SELECT checked_seq FROM chain_state") == [(110,)], worker)
    assert rows(db, "SELECT count(*) FROM chain_alarms") == [(0,)]
    assert rows(db, "SELECT count(*) FROM gap_requests WHERE status <> 'filled'") == [(0,)]
