"""The table's chain settles every contest by itself, on both transports (MQTT's shared
subscription and JetStream's durable consumer): whichever order the table's records and the
forgeries come in, the row in ``events`` ends as the table's own copy, a forgery never stays
the row, and reports count only the settled rows. ``archive verify`` is not needed for it.

Each case sends self-consistent forgeries (hashes recomputed over the real chain) ahead of the
table, then the table's own records in an order two workers, or a delayed record, can produce."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.archive import chain
from controller.archive.connection import ArchiveConnection
from controller.archive.ingest import Ingest
from controller.archive.messages import parse_event
from controller.archive.worker import ArchiveWorker
from controller.cli import main
from tests.archive.conftest import (
    GUARD_S,
    TABLES,
    Broker,
    events_topic,
    fill_journal,
    forge,
    journal_messages,
    publish,
    rows,
    running,
    settings,
    until,
)
from tests.archive.test_one_pipeline import Path, path  # noqa: F401  (the fixture: both transports)


def _hash(body: bytes) -> str:
    return str(json.loads(body)["hash"])


@contextlib.asynccontextmanager
async def _running(worker: Ingest[object]) -> AsyncIterator[None]:  # type: ignore[type-var]
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        async with asyncio.timeout(GUARD_S):
            await worker.ready.wait()
        yield
    finally:
        stop.set()
        async with asyncio.timeout(GUARD_S):
            await task


async def _until(db: str, worker: Ingest[object], sql: str, *params: object, want: object) -> None:  # type: ignore[type-var]
    """Wait (guarded) until ``sql`` reads ``want``, looking again whenever the worker progressed."""
    async with asyncio.timeout(GUARD_S):
        while rows(db, sql, *params) != want:
            await worker.progressed()


async def _until_row(db: str, worker: Ingest[object], seq: int, hash_: str | None) -> None:  # type: ignore[type-var]
    """Wait until the row of ``seq`` in events has ``hash_`` (None: no row)."""
    sql = "SELECT hash FROM events WHERE seq = %s"
    await _until(db, worker, sql, seq, want=[] if hash_ is None else [(hash_,)])


def _table_s_own(real: list[bytes]) -> list[tuple[int, str | None]]:
    return [(i + 1, json.loads(r).get("hash")) for i, r in enumerate(real)]


def _verify(db: str, journal: pathlib.Path) -> int:
    return main(["archive", "verify", "--db", db, "--journal", str(journal)])


async def test_the_next_record_before_the_table_s_own_copy_settles_when_that_copy_comes(
    path: Path,  # noqa: F811
    db: str,
    tmp_path: pathlib.Path,
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-01", 12)
    real = await journal_messages(journal)
    fake_7 = forge(real[6], outcome="forged")
    worker = path.worker
    async with _running(worker):
        await path.publish(events_topic("dab-01"), [*real[:6], fake_7])
        await _until_row(db, worker, 7, _hash(fake_7))
        # The table's 8 comes first (its 7 is delayed): it does not link to the forgery in events.
        await path.publish(events_topic("dab-01"), [real[7]])
        await _until_row(db, worker, 8, None)
        # The table's own 7: the forgery leaves events, and the chain settles both 7 and 8 with
        # no archive verify and nothing more from the table.
        await path.publish(events_topic("dab-01"), [real[6]])
        await _until_row(db, worker, 7, _hash(real[6]))
        await _until_row(db, worker, 8, _hash(real[7]))
        await path.publish(events_topic("dab-01"), real[8:])
        await _until(db, worker, "SELECT checked_seq FROM chain_state", want=[(12,)])
    assert rows(db, "SELECT seq, hash FROM events ORDER BY seq") == _table_s_own(real)
    assert rows(db, "SELECT sum(events) FROM archive_table_day") == [(12,)]
    # Every alarm is the forger's: 8 did not link to what was archived then, 7 came twice.
    assert rows(db, "SELECT kind, seq FROM chain_alarms ORDER BY id") == [("fork", 8), ("changed_hash", 7)]
    assert rows(
        db, "SELECT seq, hash, chosen FROM quarantine WHERE settled_at IS NOT NULL ORDER BY seq, id"
    ) == [
        (7, _hash(fake_7), False),
        (7, _hash(real[6]), True),
        (8, _hash(real[7]), True),
    ]
    assert rows(db, "SELECT count(*) FROM quarantine WHERE settled_at IS NULL") == [(0,)]
    assert await asyncio.to_thread(_verify, db, journal) == 0


async def test_a_later_record_s_chain_unseats_a_forgery_before_the_table_s_copy_comes(
    path: Path,  # noqa: F811
    db: str,
    tmp_path: pathlib.Path,
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-02", 12)
    real = await journal_messages(journal)
    fake_7 = forge(real[6], outcome="forged")
    worker = path.worker
    async with _running(worker):
        await path.publish(events_topic("dab-02"), [*real[:6], fake_7])
        await _until_row(db, worker, 7, _hash(fake_7))
        await path.publish(events_topic("dab-02"), [real[7]])
        await _until_row(db, worker, 8, None)
        # The table's 9 links to its 8, which links to a 7 that is not the one in events: the
        # table's chain says the forgery is not its 7, so it leaves events (no report counts it)
        # though the table's own 7 has not come yet.
        await path.publish(events_topic("dab-02"), [real[8]])
        await _until_row(db, worker, 8, _hash(real[7]))
        await _until_row(db, worker, 7, None)
        assert rows(db, "SELECT sum(events) FROM archive_table_day") == [(8,)]
        await path.publish(events_topic("dab-02"), [real[6], *real[9:]])
        await _until_row(db, worker, 7, _hash(real[6]))
        await _until(db, worker, "SELECT count(*) FROM events", want=[(12,)])
    assert rows(db, "SELECT seq, hash FROM events ORDER BY seq") == _table_s_own(real)
    assert rows(db, "SELECT count(*) FROM quarantine WHERE settled_at IS NULL") == [(0,)]
    assert rows(db, "SELECT kind, seq FROM chain_alarms ORDER BY id") == [("fork", 8), ("changed_hash", 7)]
    assert await asyncio.to_thread(_verify, db, journal) == 0


async def test_a_contest_whose_next_record_is_withheld_settles_from_the_placeholder_s_link(
    path: Path,  # noqa: F811
    db: str,
    tmp_path: pathlib.Path,
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-03", 14)
    real = await journal_messages(journal)
    # Record 9 is a public round_started; 10 a withheld burned card; 11 public, without prev_hash.
    assert json.loads(real[8])["classification"] == "public"
    assert json.loads(real[9])["withheld"] is True and "prev_hash" not in json.loads(real[10])
    fake_9 = forge(real[8], dealer="forged")
    worker = path.worker
    async with _running(worker):
        await path.publish(events_topic("dab-03"), [*real[:8], fake_9])
        await _until_row(db, worker, 9, _hash(fake_9))
        await path.publish(events_topic("dab-03"), [real[8]])
        await _until_row(db, worker, 9, None)
        # The placeholder of 10 names the hash of the public record before it (which is public
        # anyway), so it settles 9 as a public record would.
        await path.publish(events_topic("dab-03"), real[9:])
        await _until_row(db, worker, 9, _hash(real[8]))
        await _until(db, worker, "SELECT count(*) FROM events", want=[(14,)])
    assert rows(db, "SELECT hash, chosen FROM quarantine ORDER BY id") == [
        (_hash(fake_9), False),
        (_hash(real[8]), True),
    ]
    assert rows(db, "SELECT kind, seq FROM chain_alarms") == [("changed_hash", 9)]
    assert await asyncio.to_thread(_verify, db, journal) == 0


async def test_a_forged_next_record_that_settled_a_contest_is_overturned_by_the_table_s_chain(
    path: Path,  # noqa: F811
    db: str,
    tmp_path: pathlib.Path,
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-04", 12)
    real = await journal_messages(journal)
    fake_7 = forge(real[6], outcome="forged")
    doc = json.loads(real[7])
    doc["prev_hash"] = _hash(fake_7)
    fake_8 = forge(json.dumps(doc).encode())  # chained to the forged 7
    worker = path.worker
    async with _running(worker):
        await path.publish(events_topic("dab-04"), [*real[:6], fake_7, real[6]])
        await _until_row(db, worker, 7, None)
        # The forger wins the race for 8, linked to its own 7: for a moment that settles 7 its way.
        await path.publish(events_topic("dab-04"), [fake_8])
        await _until_row(db, worker, 7, _hash(fake_7))
        # The table's 8 and 9: the chain above overturns it.
        await path.publish(events_topic("dab-04"), real[7:])
        await _until_row(db, worker, 8, _hash(real[7]))
        await _until_row(db, worker, 7, _hash(real[6]))
        await _until(db, worker, "SELECT count(*) FROM events", want=[(12,)])
    assert rows(db, "SELECT seq, hash FROM events ORDER BY seq") == _table_s_own(real)
    assert rows(db, "SELECT seq, hash, chosen FROM quarantine ORDER BY seq, chosen") == [
        (7, _hash(fake_7), False),
        (7, _hash(real[6]), True),
        (8, _hash(fake_8), False),
        (8, _hash(real[7]), True),
    ]
    # The forger's two contests, and nothing else: the settling itself raises no alarm.
    assert rows(db, "SELECT kind, seq FROM chain_alarms ORDER BY seq") == [
        ("changed_hash", 7),
        ("changed_hash", 8),
    ]
    assert await asyncio.to_thread(_verify, db, journal) == 0


@pytest.mark.parametrize("walked", [True, False], ids=["walked-past-the-forgery", "as-it-comes"])
async def test_a_forgery_the_chain_took_out_of_events_is_asked_for_again(
    broker: Broker, db: str, tmp_path: pathlib.Path, walked: bool
) -> None:
    """Once the table's chain has taken a forgery out of events, the table's own copy is missing
    like any other record: asked for (``cmd/republish``), not waited for in silence, and only it
    (the table's 8, held for not linking to the forgery, is not asked for), whether or not the
    sweep had walked past the forgery before the records above it came (``walked``: it had, for
    certain; else as the sweeps fall)."""
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-05", 12)
    real = await journal_messages(journal)
    fake_7 = forge(real[6], outcome="forged")
    worker = ArchiveWorker(settings(broker, db, gap_grace_s=0.0, gap_ask_initial_s=0.1))
    async with running(worker):
        await publish(broker.port, events_topic("dab-05"), [*real[:6], fake_7])
        await _until_row(db, worker, 7, _hash(fake_7))
        if walked:
            await _until(
                db, worker, "SELECT checked_seq, checked_hash FROM chain_state", want=[(7, _hash(fake_7))]
            )
        await publish(broker.port, events_topic("dab-05"), real[7:9])
        await _until_row(db, worker, 8, _hash(real[7]))
        await _until_row(db, worker, 7, None)
        await until(lambda: rows(db, "SELECT first_seq, last_seq FROM gap_requests") == [(7, 7)], worker)
        assert worker.gap_requests >= 1
        # The table's answer: its own 7, which settles back into events and closes the request.
        await publish(broker.port, events_topic("dab-05"), [real[6], *real[9:]])
        await _until_row(db, worker, 7, _hash(real[6]))
        await until(lambda: rows(db, "SELECT status FROM gap_requests") == [("filled",)], worker)
    assert rows(db, "SELECT seq, hash FROM events ORDER BY seq") == _table_s_own(real)
    assert rows(db, "SELECT kind, seq FROM chain_alarms ORDER BY id") == [("fork", 8), ("changed_hash", 7)]


async def test_the_walk_waits_at_a_held_copy_the_record_above_links_to(
    db: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record above a held copy can be committed between the sweep's settle step and its
    walk: the copy is the table's own (the record above links to it), not missing, so nothing is
    asked for; the next sweep puts it into events and asks for the record that left (the walk
    had gone past the forgery: it goes back for it)."""
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-06", 10)
    real = await journal_messages(journal)
    fake_7 = forge(real[6], outcome="forged")
    came = datetime.now(UTC)  # every record came before the sweeps below began
    parsed = [parse_event(events_topic("dab-06"), body, came) for body in [*real, fake_7]]
    stores = (
        ArchiveConnection(db, "archive-1", TABLES, "test"),
        ArchiveConnection(db, "archive-2", TABLES, "test"),
        ArchiveConnection(db, "sweeper", (), "test"),
    )
    try:
        store, other, sweeper = await stores[0].open(), await stores[1].open(), (await stores[2].open()).conn
        await store.store([*parsed[:6], parsed[-1]])
        await chain.sweep(sweeper, gap_grace_s=0.0)
        assert rows(db, "SELECT checked_seq FROM chain_state") == [(7,)]  # past the forgery
        await store.store([parsed[7]])  # the table's 8: held, a fork on arrival
        settle = chain.settle
        async with contextlib.AsyncExitStack() as commit_9:
            # The other worker's batch with 9: begun before the sweep (its records received then),
            # committed between the sweep's settle step and its walk.
            await commit_9.enter_async_context(other.conn.transaction())
            await other.store([parsed[8]])

            async def settle_then_9(cur: Any, *, rounds: int) -> int:
                moved = await settle(cur, rounds=rounds)
                await commit_9.aclose()
                return moved

            monkeypatch.setattr(chain, "settle", settle_then_9)
            await chain.sweep(sweeper, gap_grace_s=0.0)
        assert rows(db, "SELECT seq FROM events WHERE seq IN (8, 9)") == [(9,)]
        # 8 is not missing: the walk waits at it (the watermark stays), and nothing is asked for.
        assert rows(db, "SELECT checked_seq FROM chain_state") == [(7,)]
        assert rows(db, "SELECT first_seq, last_seq FROM gap_requests") == []
        monkeypatch.undo()
        await chain.sweep(sweeper, gap_grace_s=0.0)
        assert rows(db, "SELECT seq, hash FROM events WHERE seq IN (7, 8, 9) ORDER BY seq") == [
            (8, _hash(real[7])),
            (9, _hash(real[8])),
        ]
        assert rows(db, "SELECT first_seq, last_seq, status FROM gap_requests") == [(7, 7, "asking")]
        assert rows(db, "SELECT kind, seq FROM chain_alarms") == [("fork", 8)]
    finally:
        for s in stores:
            await s.drop()
