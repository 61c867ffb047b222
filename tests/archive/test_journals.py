"""Every gaming day starts on a fresh journal whose seq starts at 1 again: the archive keys a record
by its journal too (the hash of the journal's first record, which the table publishes with every
event), ``archive verify`` names the journal it compares and says "complete" only when every record
of it is archived; and a loss at the end of a journal is seen from the table's announcements
(birth, heartbeat) without waiting for the table's next record."""

from __future__ import annotations

import asyncio
import json
import pathlib
import sqlite3

import aiomqtt
import pytest

from controller.archive.worker import ArchiveWorker
from controller.cli import main
from controller.journal import Journal
from tests.archive.conftest import (
    SITE,
    Broker,
    events_topic,
    fill_journal,
    journal_messages,
    publish,
    rows,
    running,
    settings,
    until,
)
from tests.archive.test_gaps import OPEN, table

DAY = 86_400.0


def _verify(db: str, journal: pathlib.Path) -> int:
    return main(["archive", "verify", "--db", db, "--journal", str(journal)])


def _journal_id(path: pathlib.Path) -> str:
    with Journal.open(path, create=False, readonly=True) as journal:
        first = next(journal.records())
    return first.hash


async def test_a_new_gaming_day_on_a_fresh_journal_is_archived_completely(
    broker: Broker, db: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    day1, day2 = tmp_path / "day1.db", tmp_path / "day2.db"
    fill_journal(day1, "dab-04", 30)
    fill_journal(day2, "dab-04", 25, start=1_800_000_000.0 + DAY)  # rotated: seq 1 again
    first, second = await journal_messages(day1), await journal_messages(day2)
    assert json.loads(second[0])["journal"] == _journal_id(day2) != _journal_id(day1)
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        await publish(broker.port, events_topic("dab-04"), first)
        await until(lambda: worker.stored == 30, worker)
        await publish(broker.port, events_topic("dab-04"), second)
        await until(lambda: worker.stored == 55, worker)
        checked = "SELECT journal, checked_seq FROM chain_state ORDER BY checked_seq"
        await until(lambda: [s for _, s in rows(db, checked)] == [25, 30], worker)
    assert rows(db, checked) == [(_journal_id(day2), 25), (_journal_id(day1), 30)]
    assert rows(db, "SELECT count(*) FROM chain_alarms") == [(0,)]
    assert rows(db, "SELECT count(*) FROM quarantine") == [(0,)]
    for path, n in ((day1, 30), (day2, 25)):
        capsys.readouterr()
        assert await asyncio.to_thread(_verify, db, path) == 0
        out = capsys.readouterr().out
        assert f"({SITE}/dab-04, journal {_journal_id(path)[:12]}): complete: all {n} records" in out


async def test_verify_says_incomplete_when_a_record_of_the_journal_never_arrived(
    broker: Broker, db: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "j.db"
    fill_journal(path, "dab-03", 25)
    bodies = await journal_messages(path)
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        await publish(broker.port, events_topic("dab-03"), bodies[:20] + bodies[21:22])
        await until(lambda: worker.stored == 21, worker)
    capsys.readouterr()
    assert await asyncio.to_thread(_verify, db, path) == 1
    out = capsys.readouterr().out
    assert "incomplete: 21 of the journal's 25 records are archived; the first missing is record 21" in out


async def test_verify_a_record_it_cannot_read_is_a_disagreement(
    broker: Broker, db: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A payload edited to something that is not JSON, or nested past the reader's bound: the
    journal does not hold together, exit 1 as docs/journal.md says (it was 2, "cannot run")."""
    path = tmp_path / "j.db"
    fill_journal(path, "dab-02", 12)
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        await publish(broker.port, events_topic("dab-02"), await journal_messages(path))
        await until(lambda: worker.stored == 12, worker)
    for i, payload in enumerate(["not json", "[" * 200 + "]" * 200]):
        edited = tmp_path / f"edited-{i}.db"
        edited.write_bytes(path.read_bytes())
        with sqlite3.connect(edited) as conn:
            conn.execute("DROP TRIGGER records_no_update")
            conn.execute("UPDATE records SET payload = ? WHERE seq = 5", (payload,))
        capsys.readouterr()
        assert await asyncio.to_thread(_verify, db, edited) == 1
        assert "record 5: payload" in capsys.readouterr().out


async def test_a_quiet_table_s_lost_records_are_asked_for_and_come(
    broker: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    """The table's first 15 records are confirmed by the broker while no archive subscription
    exists (discarded), and the table then says nothing more: its heartbeat's published_seq shows
    the loss, the archive asks, and the table's journal fills it. No alarm."""
    path = tmp_path / "j.db"
    fill_journal(path, "dab-01", 15)
    worker = ArchiveWorker(settings(broker, db, gap_grace_s=0.2, gap_ask_initial_s=0.2))
    done = "SELECT count(DISTINCT seq) FROM events"
    async with (
        aiomqtt.Client("127.0.0.1", broker.port, identifier="watch") as watch,
        table(broker, path, "dab-01", heartbeat_s=0.2),
    ):
        await watch.subscribe(events_topic("dab-01"), qos=1)
        async with asyncio.timeout(60):  # a plain subscriber sees them go by, to no archive
            async for message in watch.messages:
                if json.loads(message.payload)["seq"] == 15:  # type: ignore[arg-type]
                    break
        async with running(worker):
            await until(lambda: rows(db, done) == [(15,)] and rows(db, OPEN) == [(0,)], worker)
            await until(lambda: rows(db, "SELECT checked_seq FROM chain_state") == [(15,)], worker)
    assert worker.gap_requests >= 1
    # One request for the tail, filled (its first seq moves up as its first records come back).
    assert rows(db, "SELECT last_seq, status FROM gap_requests") == [(15, "filled")]
    assert rows(db, "SELECT count(*) FROM chain_alarms") == [(0,)]


async def test_an_announced_tail_the_journal_does_not_hold_is_one_alarm(
    broker: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    """A heartbeat says 30 were confirmed; the table's journal holds 20: 21-30 are one gap alarm,
    raised once, not repeated at every heartbeat."""
    path = tmp_path / "j.db"
    fill_journal(path, "dab-09", 20)
    bodies = await journal_messages(path)
    journal_id = _journal_id(path)
    beat = {
        "version": 1,
        "schema_version": 1,
        "incarnation": "x",
        "site": SITE,
        "table": "dab-09",
        "journal": {"last_seq": 30, "published_seq": 30, "id": journal_id},
    }
    worker = ArchiveWorker(settings(broker, db, gap_grace_s=0.2, gap_ask_initial_s=0.2))
    async with running(worker):
        await publish(broker.port, events_topic("dab-09"), bodies)
        await until(lambda: worker.stored == 20, worker)
        async with table(broker, path, "dab-09"):
            for _ in range(3):
                await publish(broker.port, f"tablectl/{SITE}/dab-09/heartbeat", [json.dumps(beat).encode()])
            await until(lambda: any(a.kind == "gap" for a in worker.alarms), worker)
            await until(lambda: rows(db, "SELECT checked_seq FROM chain_state") == [(30,)], worker)
    assert rows(db, "SELECT kind, seq, detail FROM chain_alarms") == [
        ("gap", 21, "records 21-30 never arrived and not in the table's journal")
    ]
