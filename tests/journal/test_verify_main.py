"""The hook behind `tablectl journal verify PATH`: one line, exit 0 / 1 / 2."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from controller.journal import Journal, JournalError, verify_journal, verify_main
from tests.journal import fill, tamper


def test_an_intact_journal_exits_0_with_its_record_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "journal.db"
    fill(db, 12)
    assert verify_main(str(db)) == 0
    assert capsys.readouterr() == (f"{db}: 12 records, chain intact\n", "")


def test_an_empty_journal_is_intact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "journal.db"
    Journal.open(db).close()
    assert verify_main(str(db)) == 0
    assert capsys.readouterr().out == f"{db}: 0 records, chain intact\n"


def test_a_broken_journal_exits_1_naming_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "journal.db"
    fill(db, 12)
    tamper(db, "UPDATE records SET classification = 'secret' WHERE seq = 1;")
    assert verify_main(str(db)) == 1
    out = capsys.readouterr().out
    # The record and where it is in the file (for whoever examines it), never what it holds.
    said = f"{db}: record 1: hash does not match its contents (edited?); record 1 is at byte "
    assert out.startswith(said) and re.fullmatch(r"\d+ of journal\.db\n", out[len(said) :]), out


@pytest.mark.parametrize("what", ["missing", "junk", "other sqlite", "directory"])
def test_nothing_to_verify_exits_2_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    path = tmp_path / "x.db"
    if what == "junk":
        path.write_text("round 1: QH to box 3\n" * 200)
    elif what == "other sqlite":
        fill(path, 1)
        tamper(path, "PRAGMA application_id = 0;")
    elif what == "directory":
        path.mkdir()
    assert verify_main(str(path)) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and str(path) in err
    assert "QH" not in err
    with pytest.raises(JournalError):
        verify_journal(path)
    assert what == "directory" or what == "missing" or path.is_file()


def test_verify_does_not_change_the_file(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    fill(db, 30)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    assert verify_journal(db).ok
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    # A read-only SQLite connection may leave an empty -wal/-shm pair behind; it cannot write frames.
    wal = tmp_path / "journal.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
