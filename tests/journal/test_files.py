"""The journal's files and what is said of a damaged one (issue 11): created 0600, a damaged
journal called damaged with where, and `journal show` refusing to print from an edited journal."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from controller.journal import Journal, verify_journal
from controller.journal.damage import DamagedJournalError
from controller.supervisor.rig import ROOT, table_file, virtual_table

_CARD = re.compile(r"(?<![0-9A-Za-z])(10|[2-9AJQK])[HDCS](?![0-9A-Za-z])")


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def _tablectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal with three real rounds in it (the virtual dealer on simulated devices)."""
    import asyncio

    path = tmp_path_factory.mktemp("played") / "journal.db"

    async def play() -> None:
        async with virtual_table(table_file("down-under"), path, seed=5, boxes=2) as rig:
            await rig.dealer.open_table()
            await rig.dealer.play(3)

    asyncio.run(play())
    return path


def test_journal_wal_and_shm_are_created_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask, under which files are world-readable by default
    try:
        path = tmp_path / "j.db"
        with Journal.open(path) as journal:
            assert journal.last_seq == 0
            files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
            assert all(f.exists() for f in files)
            assert [_mode(f) for f in files] == [0o600, 0o600, 0o600]
    finally:
        os.umask(old)


def _copy(src: Path, dst: Path) -> Path:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    with sqlite3.connect(dst) as b:
        b.execute("PRAGMA journal_mode = DELETE")  # one file, as a copy on a USB stick would be
    return dst


def test_a_truncated_journal_is_damaged_with_where_not_foreign(played: Path, tmp_path: Path) -> None:
    copy = _copy(played, tmp_path / "copy.db")
    size = copy.stat().st_size
    os.truncate(copy, size // 2)
    with pytest.raises(DamagedJournalError) as info:
        verify_journal(copy)
    msg = str(info.value)
    assert "damaged journal: truncated at byte" in msg and "not a tablectl journal" not in msg
    assert "\n" not in msg
    out = _tablectl("journal", "verify", str(copy))
    assert out.returncode == 1 and "damaged journal: truncated at byte" in out.stdout


def test_a_corrupt_page_is_damaged_with_the_page(played: Path, tmp_path: Path) -> None:
    copy = _copy(played, tmp_path / "copy.db")
    page = sqlite3.connect(copy).execute("PRAGMA page_size").fetchone()[0]
    data = copy.read_bytes()
    pages = len(data) // page
    # A leaf page of the records' table b-tree (type byte 0x0d) near the middle of the file: the
    # scan that verify makes reads it. Which page that is depends on the records' lengths (their
    # times vary from run to run), so it is looked for, not assumed: scribbling over whatever page
    # sits in the middle sometimes hit only a record's values, which verify rightly reports as a
    # broken chain rather than a damaged file.
    leaf = next(
        n for n in sorted(range(1, pages), key=lambda n: abs(n - pages // 2)) if data[n * page] == 0x0D
    )
    with open(copy, "r+b") as f:  # an invalid page type and a scribbled cell pointer array
        f.seek(leaf * page)
        f.write(b"\xff" * 72)
    out = _tablectl("journal", "verify", str(copy))
    assert out.returncode == 1, out
    assert "damaged journal" in out.stdout and "page" in out.stdout and "\n" not in out.stdout.strip()


def test_something_else_is_not_a_journal(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    other.write_bytes(b"not a database at all, " * 20)
    out = _tablectl("journal", "verify", str(other))
    assert out.returncode == 2 and "not a tablectl journal" in out.stderr


def test_show_refuses_an_edited_round_naming_the_first_bad_record(played: Path, tmp_path: Path) -> None:
    copy = _copy(played, tmp_path / "copy.db")
    assert _tablectl("journal", "show", str(copy), "--round", "2").returncode == 0
    with sqlite3.connect(copy) as db:
        db.execute("DROP TRIGGER records_no_update")
        seq = db.execute(
            "SELECT min(seq) FROM records WHERE kind = 'card_dealt' AND payload LIKE '%\"round\":1%'"
        ).fetchone()[0]
        edit = 'UPDATE records SET payload = replace(payload, \'"card":"\', \'"card":"A\') WHERE seq = ?'
        db.execute(edit, (seq,))
    out = _tablectl("journal", "show", str(copy), "--round", "2")
    assert out.returncode == 1 and out.stdout == ""
    assert f"record {seq}" in out.stderr and "does not verify" in out.stderr


@pytest.mark.parametrize("column", ["payload", "kind", "hash"])
def test_a_damaged_hole_card_record_is_named_by_seq_and_byte_never_shown(
    played: Path, tmp_path: Path, column: str
) -> None:
    """Issue 23: a byte of a hole card's record turned to one that is not UTF-8 made Python's
    sqlite3 quote the whole cell ("Could not decode ... with text '{...card...}'") through
    `journal verify`, `journal show` and `run`. Each must name the record and the byte offset and
    print nothing of the record."""
    copy = _copy(played, tmp_path / "copy.db")
    with sqlite3.connect(copy) as db:
        seq, card, payload, value = db.execute(
            f"SELECT seq, json_extract(payload, '$.card'), payload, {column} FROM records "
            "WHERE kind = 'hole_card_dealt' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    data = bytearray(copy.read_bytes())
    # The record's cells lie in column order: kind before its payload, hash after it (the kind
    # and the hash appear in other records too: as the next record's prev_hash).
    cell = data.find(payload.encode())
    assert cell > 0 and data.find(payload.encode(), cell + 1) < 0
    at = {
        "kind": data.rfind(value.encode(), 0, cell),
        "payload": cell,
        "hash": data.find(value.encode(), cell),
    }[column]
    bad = at + len(value) // 2
    data[bad] = 0xFF  # never valid in UTF-8
    copy.write_bytes(bytes(data))
    round_no = 3
    outputs = [
        _tablectl("journal", "verify", str(copy)),
        _tablectl("journal", "show", str(copy), "--round", str(round_no)),
        _tablectl("run", "--config", str(table_file("down-under")), "--journal", str(copy)),
    ]
    for out in outputs:
        text = out.stdout + out.stderr
        assert out.returncode in (1, 2), text
        assert f"record {seq}: its {column} is not UTF-8 (byte {bad} of copy.db)" in text, text
        assert card not in text and "with text" not in text and '"back"' not in text, text
        assert not _CARD.search(text), text  # no card at all, not only this record's
