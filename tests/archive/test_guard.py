"""What the archive keeps out (issue 23, item 3), each attack reproduced through a real broker,
PostgreSQL and worker: records published ahead of the table (a placeholder whose kind is not of
its classification, a public record with a random hash, a self-consistent forgery with its hash
recomputed), payloads not of their kind, a table nobody registered; and ``archive verify``'s exit
codes (0 agree, 1 disagree, a cut or damaged journal included, 2 cannot run)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib

import pytest

from controller.archive.worker import ArchiveWorker
from controller.cli import main
from tests.archive.conftest import (
    SITE,
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


def _verify(db: str, journal: pathlib.Path, *extra: str) -> int:
    return main(["archive", "verify", "--db", db, "--journal", str(journal), *extra])


async def test_records_published_ahead_of_the_table_do_not_take_its_place(
    broker: Broker, db: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-07", 20)
    real = await journal_messages(journal)
    # Record 7 is a public round_settled, 8 a batch_to_shoe and 9 a round_started, each published
    # with the prev_hash of the record before it.
    assert [json.loads(real[i])["kind"] for i in (6, 7, 8)] == [
        "round_settled",
        "batch_to_shoe",
        "round_started",
    ]
    forged_7 = forge(real[6], outcome="forged")  # self-consistent: hash recomputed over the real link
    real_7, fake_7 = json.loads(real[6])["hash"], json.loads(forged_7)["hash"]
    placeholder_8 = json.dumps(
        {"version": 1, "seq": 8, "kind": "round_settled", "classification": "secret", "withheld": True}
    ).encode()
    random_9 = json.dumps({**json.loads(real[8]), "hash": os.urandom(32).hex()}).encode()
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        await publish(broker.port, events_topic("dab-07"), real[:6])
        await until(lambda: worker.stored == 6, worker)
        # (The placeholder twice: a refusal is raised once, however often the record comes.)
        await publish(broker.port, events_topic("dab-07"), [forged_7, placeholder_8, random_9, placeholder_8])
        await until(lambda: worker.stored == 7 and worker.refused == 3, worker)
        # The table's own 7 alone: the forgery leaves events, and both copies wait in quarantine
        # (no report counts either) until the table's chain settles which is real.
        await publish(broker.port, events_topic("dab-07"), real[6:7])
        await until(lambda: any(a.kind == "changed_hash" for a in worker.alarms), worker)
        assert rows(db, "SELECT count(*) FROM events WHERE seq = 7") == [(0,)]
        assert rows(db, "SELECT sum(events) FROM archive_table_day") == [(6,)]
        await publish(broker.port, events_topic("dab-07"), real[7:])
        await until(lambda: rows(db, "SELECT count(*) FROM events") == [(20,)], worker)
        # The sweep has walked the whole chain: record 8 links to the table's own 7, which is in
        # quarantine, so that is no fork.
        await until(lambda: rows(db, "SELECT checked_seq FROM chain_state") == [(20,)], worker)
    alarms = rows(db, "SELECT kind, seq, detail FROM chain_alarms ORDER BY id")
    assert [(k, s) for k, s, _ in alarms] == [("refused", 8), ("bad_hash", 9), ("changed_hash", 7)]
    assert alarms[0][2] == "record 8: kind 'round_settled' is public, not secret; not archived"
    assert alarms[1][2] == "record 9: published hash is not that of its contents; not archived"
    assert (
        f"archived hash {fake_7[:12]} received" in alarms[2][2]
        and f"also hash {real_7[:12]} received" in alarms[2][2]
    )
    # 7, 8 and 9 are the table's own: its 8 links to its own 7, which settled the contest; both
    # copies of 7 are kept with where they came from, the forgery not chosen.
    hashes = dict(rows(db, "SELECT seq, hash FROM events WHERE seq IN (7, 8, 9)"))
    assert hashes == {7: real_7, 8: json.loads(real[7])["hash"], 9: json.loads(real[8])["hash"]}
    assert rows(db, "SELECT seq, archived, hash, received_by, chosen FROM quarantine ORDER BY id") == [
        (7, True, fake_7, "archive-1", False),
        (7, False, real_7, "archive-1", True),
    ]
    # The honest journal agrees, and verify says which copy of 7 it holds.
    assert await asyncio.to_thread(_verify, db, journal) == 0
    out = capsys.readouterr().out
    assert (
        "record 7: contested in the archive (2 copies); the journal holds the copy received later (hash "
        + real_7[:12]
        in out
    )
    assert "complete: all 20 records of the journal are archived and agree with it" in out


async def test_a_record_that_does_not_link_is_quarantined_not_archived(
    broker: Broker, db: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-08", 9)
    real = await journal_messages(journal)
    # Record 6's own hash holds, but it is chained to a record 5 nobody archived.
    doc = json.loads(real[5])
    doc["prev_hash"] = "f" * 64
    unlinked = forge(json.dumps(doc).encode())
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        await publish(broker.port, events_topic("dab-08"), [*real[:5], unlinked])
        await until(lambda: any(a.kind == "fork" for a in worker.alarms), worker)
        await publish(broker.port, events_topic("dab-08"), real[5:])
        await until(lambda: worker.stored == 9, worker)
    assert rows(db, "SELECT kind, seq FROM chain_alarms") == [("fork", 6)]
    assert rows(db, "SELECT hash FROM events WHERE seq = 6") == [(json.loads(real[5])["hash"],)]
    assert rows(db, "SELECT seq, reason, archived FROM quarantine") == [(6, "fork", False)]
    assert await asyncio.to_thread(_verify, db, journal) == 0
    assert (
        "record 6: contested in the archive (a copy that did not link to the chain); the journal holds"
        not in (capsys.readouterr().out)
    )


async def test_a_table_nobody_registered_is_an_alarm_not_rows(
    broker: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    fill_journal(tmp_path / "j.db", "zz-99", 12)
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        await publish(broker.port, events_topic("zz-99"), await journal_messages(tmp_path / "j.db"))
        await until(lambda: worker.dropped == 12, worker)
    assert rows(db, "SELECT count(*) FROM events") == [(0,)]
    assert rows(db, "SELECT kind, table_id, detail FROM chain_alarms") == [
        ("unknown_table", "zz-99", f"events from {SITE}/zz-99, which is not a registered table; not archived")
    ]


async def test_known_tables_come_from_the_broker_s_password_file(tmp_path: pathlib.Path) -> None:
    from controller.archive.cli import known_tables
    from controller.errors import TablectlError

    passwd = tmp_path / "passwd"
    passwd.write_text("example-floor/dab-01:$7$x\nfloor-console:$7$y\nexample-floor/djw-02:$7$z\n")
    assert known_tables(["site-b/t1"], str(passwd)) == [
        ("site-b", "t1"),
        ("example-floor", "dab-01"),
        ("example-floor", "djw-02"),
    ]
    for bad in ("site/archive", "a/b/c", "a/+", "nosite"):
        with pytest.raises(TablectlError):
            known_tables([bad], None)


async def test_archive_verify_exit_codes(
    broker: Broker, db: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-09", 20)
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        await publish(broker.port, events_topic("dab-09"), await journal_messages(journal))
        await until(lambda: worker.stored == 20, worker)
    assert await asyncio.to_thread(_verify, db, journal) == 0
    # Cut: the same journal's first 15 records (the same records, so the same hashes).
    cut = tmp_path / "cut.db"
    fill_journal(cut, "dab-09", 15)
    capsys.readouterr()
    assert await asyncio.to_thread(_verify, db, cut) == 1
    assert "record 16: archived but not in the journal (removed?)" in capsys.readouterr().out
    # Damaged: the file truncated.
    damaged = tmp_path / "damaged.db"
    data = journal.read_bytes()
    damaged.write_bytes(data[: len(data) // 2])
    assert await asyncio.to_thread(_verify, db, damaged) == 1
    assert "damaged journal" in capsys.readouterr().out
    # Cannot run: a table the archive does not have; no journal.
    assert await asyncio.to_thread(_verify, db, journal, "--table", "dab-01") == 2
    assert await asyncio.to_thread(_verify, db, tmp_path / "none.db") == 2
