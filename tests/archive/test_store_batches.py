"""How a worker writes its batches (controller/archive/store.py): one COPY straight into events
when no record of the batch is archived yet, the staged way when one is; the record a batch's
first record links to known from the worker's previous commit. Each keeps what the tests of the
guard (58 Pa. Code 665a.5: the table's own record, and only that, is the floor's record) expect."""

from __future__ import annotations

import json
import pathlib
from datetime import UTC, datetime

import psycopg

from controller.archive.messages import ArchivedEvent, parse_event
from controller.archive.schema import migrate
from controller.archive.store import EventStore
from controller.journal import canonical_json, record_hash
from tests.archive.conftest import SITE, events_topic, fill_journal, forge, journal_messages, rows

TABLE = "dab-01"


async def _events(tmp_path: pathlib.Path, n: int) -> list[bytes]:
    path = tmp_path / "j.db"
    fill_journal(path, TABLE, n)
    return await journal_messages(path)


def _parsed(bodies: list[bytes]) -> list[ArchivedEvent]:
    now = datetime.now(UTC)
    return [parse_event(events_topic(TABLE), body, now) for body in bodies]


def _relinked(body: bytes, prev_hash: str) -> bytes:
    doc = json.loads(body)
    doc["prev_hash"] = prev_hash
    payload = canonical_json(doc["payload"])
    doc["hash"] = record_hash(doc["seq"], doc["at"], doc["kind"], doc["classification"], payload, prev_hash)
    return json.dumps(doc).encode()


async def _store(dsn: str) -> tuple[psycopg.AsyncConnection[tuple[object, ...]], EventStore]:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await migrate(conn)
    store = EventStore(conn, "archive-1")
    await store.register([(SITE, TABLE)], "the test")
    return conn, store


async def test_a_batch_with_records_archived_already_stores_the_rest_and_counts_the_repeats(
    db: str, tmp_path: pathlib.Path
) -> None:
    """The batch's COPY into events meets a record archived already: nothing of that COPY stays
    (its savepoint), and the batch goes the staged way: new records in, repeats counted, a
    different copy of an archived record raised as changed_hash (665a.5)."""
    bodies = await _events(tmp_path, 12)
    conn, store = await _store(db)
    async with conn:
        first = await store.store(_parsed(bodies[:6]))
        assert (first.inserted, first.duplicates) == (6, 0)
        # Records 5 and 6 again, 2 forged, 7-12 new: one transaction.
        again = _parsed([bodies[4], bodies[5], forge(bodies[1], card="AS"), *bodies[6:]])
        result = await store.store(again)
    assert (result.inserted, result.duplicates) == (6, 3)  # the forged 2 is not a row either
    assert [a.kind for a in result.alarms] == ["changed_hash"]
    assert rows(db, "SELECT count(*), max(seq) FROM events") == [(11, 12)]  # seq 2 is contested
    assert rows(db, "SELECT seq, archived FROM quarantine ORDER BY id") == [(2, True), (2, False)]


async def test_a_record_that_does_not_link_to_this_worker_s_last_commit_is_a_fork(
    db: str, tmp_path: pathlib.Path
) -> None:
    """The record before a batch's first one was committed by this worker in its previous batch:
    only a record that links to it goes in without asking; one that does not is quarantined as
    a fork, as when PostgreSQL is asked (665a.5)."""
    bodies = await _events(tmp_path, 8)
    conn, store = await _store(db)
    async with conn:
        await store.store(_parsed(bodies[:5]))
        linked = await store.store(_parsed([bodies[5]]))  # links to 5: no lookup needed
        assert linked.inserted == 1
        # 7's prev_hash names another record 6 than the one committed (its hash made to match).
        forked = _parsed([_relinked(bodies[6], "ab" * 32)])
        result = await store.store(forked)
    assert result.inserted == 0
    assert [a.kind for a in result.alarms] == ["fork"]
    assert rows(db, "SELECT seq, reason FROM quarantine") == [(7, "fork")]
    assert rows(db, "SELECT max(seq) FROM events") == [(6,)]
