"""The telemetry outbox cursor: monotonic, durable across reopen, outside the hash chain."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from controller.journal import Journal, JournalError, verify_journal
from tests.journal import ROOT, auditor_hashes_hold, fill, sample_entries, tamper


def test_the_cursor_only_moves_forward_and_survives_reopen(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    fill(db, 10)
    with Journal.open(db) as j:
        assert j.published_seq() == 0
        j.mark_published(5)
        j.mark_published(3)  # a late acknowledgement of an older message
        assert j.published_seq() == 5
        j.mark_published(5)
        j.mark_published(10)
        assert j.published_seq() == 10
    with Journal.open(db) as j:
        assert j.published_seq() == 10


def test_the_cursor_is_not_part_of_the_chain(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    written = fill(db, 8)
    with Journal.open(db) as j:
        head = j.head_hash
        j.mark_published(4)
        j.mark_published(8)
        assert (j.head_hash, j.last_seq) == (head, 8)
        assert list(j.records()) == written
        nxt = j.append(*sample_entries(1)[0])
        assert nxt.prev_hash == head and j.published_seq() == 8
    assert verify_journal(db).ok and auditor_hashes_hold(db)


@pytest.mark.parametrize("bad", [-1, True, 2.0, "3"])
def test_a_cursor_that_is_not_a_seq_is_refused(tmp_path: Path, bad: object) -> None:
    fill(tmp_path / "j.db", 3)
    with Journal.open(tmp_path / "j.db") as j, pytest.raises(JournalError, match="non-negative integer"):
        j.mark_published(bad)  # type: ignore[arg-type]


def test_the_broker_cannot_acknowledge_a_record_not_yet_written(tmp_path: Path) -> None:
    fill(tmp_path / "j.db", 3)
    with Journal.open(tmp_path / "j.db") as j:
        with pytest.raises(JournalError, match="cannot mark 4 published; the last record is 3"):
            j.mark_published(4)
        assert j.published_seq() == 0


def test_a_cut_off_tail_with_a_forged_head_is_caught_by_the_cursor(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    fill(db, 50)
    with Journal.open(db) as j:
        j.mark_published(50)
    tamper(
        db,
        "DELETE FROM records WHERE seq > 48;"
        " UPDATE chain_head SET seq = 48, hash = (SELECT hash FROM records WHERE seq = 48);",
    )
    result = verify_journal(db)
    assert (result.ok, result.first_bad_seq) == (False, 49)
    assert result.reason == "records end at 48 but the broker acknowledged 50 (removed?)"


TELEMETRY = """
import sys, time
from controller.journal import Journal
target = int(sys.argv[2])
with Journal.open(sys.argv[1]) as j:
    seen = j.published_seq()
    while seen < target:
        for record in j.records(after_seq=seen):
            assert record.seq == seen + 1
            seen = record.seq
        j.mark_published(seen)
        time.sleep(0.001)  # polling interval of this stand-in publisher, not a synchronisation
print(seen)
"""


def test_a_publisher_in_another_process_follows_the_writer(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    fill(db, 20)
    child = subprocess.Popen(
        [sys.executable, "-c", TELEMETRY, str(db), "220"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        with Journal.open(db) as j:
            for entry in sample_entries(200, start=20):
                j.append(*entry)
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 0 and out.strip() == "220"
    with Journal.open(db) as j:
        assert j.published_seq() == 220
    assert verify_journal(db).ok
