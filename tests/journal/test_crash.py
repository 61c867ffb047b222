"""kill -9 in the middle of appending: a transaction has landed whole or not at all.

The writer is a real child process killed with SIGKILL. It reports on a pipe as it goes; the test
kills it right after reading a report, while it is already inside its next append or batch, so no
timing guess (sleep) decides where the kill lands.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from controller.journal import Journal, verify_journal
from tests.journal import ROOT, auditor_hashes_hold, sample_entries

WRITER = """
import sys
from controller.journal import Journal
from tests.journal import sample_entries

path, mode, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Journal.open(path) as j:
    i = j.last_seq
    while True:
        if mode == "single":
            record = j.append(*sample_entries(1, start=i)[0])
            i = record.seq
            print(i, flush=True)  # acknowledged: durable from here on
        else:
            print("begin", flush=True)  # the kill may land anywhere in the batch that follows
            records = j.append_many(sample_entries(batch, start=i))
            i = records[-1].seq
            print(i, flush=True)
"""


def _kill_after(db: Path, mode: str, batch: int, reports: int) -> tuple[int, str]:
    """Run the writer until it has made ``reports`` reports; SIGKILL it; return its last ack and line."""
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), mode, str(batch)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    acked, line = 0, ""
    try:
        for _ in range(reports):
            line = child.stdout.readline().strip()
            assert line, "the writer died before it was killed"
            if line != "begin":
                acked = int(line)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return acked, line


def _after_the_crash(db: Path, acked: int) -> int:
    """The file verifies (before anyone reopens it), keeps every acknowledged record, and goes on."""
    result = verify_journal(db)
    assert result.ok, result.reason
    assert result.records >= acked
    with Journal.open(db) as j:
        head = j.head_hash
        assert j.last_seq == result.records
        nxt = j.append(*sample_entries(1, start=result.records)[0])
        assert (nxt.seq, nxt.prev_hash) == (result.records + 1, head)
    assert verify_journal(db).ok and auditor_hashes_hold(db)
    return result.records + 1


def test_single_appends_survive_repeated_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    total = 0
    for reports in (1, 57, 230):  # at the first append, early on and well into a run
        acked, _ = _kill_after(db, "single", 1, reports)
        assert acked > total
        total = _after_the_crash(db, acked)


def test_a_batch_killed_mid_transaction_lands_whole_or_not_at_all(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    batch = 1000
    base = 0
    for batches_before in (0, 2):
        # Reports alternate begin, seq, begin, seq ...; stop on a "begin" so the kill falls inside
        # append_many (building, inserting, committing or fsyncing a 1000-record transaction).
        acked, line = _kill_after(db, "batch", batch, 2 * batches_before + 1)
        assert line == "begin"
        result = verify_journal(db)
        assert result.ok, result.reason
        landed = result.records - base
        assert landed % batch == 0 and landed >= batch * batches_before
        assert result.records >= acked
        base = _after_the_crash(db, acked)


def test_a_transaction_killed_with_its_pages_already_in_the_wal_is_rolled_back(tmp_path: Path) -> None:
    # 20,000 records do not fit SQLite's page cache, so it spills them into the WAL long before the
    # commit frame: the file then holds frames of a transaction that never committed, which recovery
    # must ignore. The handshake is the WAL growing past 512 KiB after "begin", not a delay.
    db = tmp_path / "j.db"
    wal = tmp_path / "j.db-wal"
    Journal.open(db).close()
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "batch", "20000"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "begin"
        while child.poll() is None and not (wal.exists() and wal.stat().st_size > 512 * 1024):
            pass
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert wal.stat().st_size > 512 * 1024
    result = verify_journal(db)
    assert result.ok, result.reason
    assert result.records in (0, 20000)
    _after_the_crash(db, 0)
