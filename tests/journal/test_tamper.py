"""An auditor's edits with the real sqlite3 shell: verify names the first bad record and exits 1."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from controller.journal import (
    BrokenChainError,
    Journal,
    canonical_json,
    record_hash,
    verify_journal,
    verify_main,
)
from tests.journal import fill, shell, tamper

N = 50

# (what an auditor does, the SQL, the first bad record, words of the one-line reason)
EDITS: list[tuple[str, str, int, str]] = [
    (
        "change one payload",
        "UPDATE records SET payload = replace(payload, '\"box\":2', '\"box\":5') WHERE seq = 17;",
        17,
        "record 17: hash does not match its contents (edited?)",
    ),
    (
        "change a classification",
        "UPDATE records SET classification = 'public' WHERE seq = 18;",
        18,
        "record 18: hash does not match its contents (edited?)",
    ),
    ("change at", "UPDATE records SET at = at + 0.5 WHERE seq = 9;", 9, "record 9: hash does not match"),
    (
        "change a kind",
        "UPDATE records SET kind = 'card_burned' WHERE seq = 33;",
        33,
        "record 33: hash does not",
    ),
    ("delete a record", "DELETE FROM records WHERE seq = 42;", 42, "records jump from 41 to 43 (removed?)"),
    ("delete the first record", "DELETE FROM records WHERE seq = 1;", 1, "records start at 2, not 1"),
    (
        "delete the last record",
        f"DELETE FROM records WHERE seq = {N};",
        N,
        f"records end at {N - 1} but the journal head says {N} (removed?)",
    ),
    (
        "swap two records' seq",
        "UPDATE records SET seq = -1 WHERE seq = 20; UPDATE records SET seq = 20 WHERE seq = 30;"
        " UPDATE records SET seq = 30 WHERE seq = -1;",
        20,
        "record 20: neither its hash nor its previous-hash link holds (moved?)",
    ),
    (
        "move a record to the end",
        f"UPDATE records SET seq = {N + 1} WHERE seq = 25;",
        25,
        "records jump from 24 to 26 (removed?)",
    ),
    (
        "renumber after a delete",
        "DELETE FROM records WHERE seq = 12; UPDATE records SET seq = seq - 1 WHERE seq > 12;",
        12,
        "record 12: neither its hash nor its previous-hash link holds",
    ),
    (
        "replace a hash",
        "UPDATE records SET hash = lower(hex(randomblob(32))) WHERE seq = 5;",
        5,
        "record 5: hash",
    ),
    (
        "corrupt a payload",
        "UPDATE records SET payload = '{\"box\":' WHERE seq = 3;",
        3,
        "record 3: payload: not valid JSON",
    ),
    (
        "nest a payload deeper than any parser should follow",
        "UPDATE records SET payload = '{\"a\":' || replace(hex(zeroblob(3000)), '00', '[') || '}'"
        " WHERE seq = 4;",
        4,
        "record 4: payload: nested deeper than 32 levels (edited?)",
    ),
]


@pytest.mark.parametrize(("what", "sql", "first_bad", "reason"), EDITS, ids=[e[0] for e in EDITS])
def test_an_edit_with_the_shell_is_found_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, sql: str, first_bad: int, reason: str
) -> None:
    db = tmp_path / "journal.db"
    fill(db, N)
    assert verify_main(str(db)) == 0
    assert capsys.readouterr().out == f"{db}: {N} records, chain intact\n"

    tamper(db, sql)

    result = verify_journal(db)
    assert not result.ok and result.first_bad_seq == first_bad, result
    assert reason in result.reason and "\n" not in result.reason
    assert verify_main(str(db)) == 1
    assert capsys.readouterr().out == f"{db}: {result.reason}\n"
    # The journal does not carry on from a broken chain (the whole of a 50-record file is "tail").
    with pytest.raises(BrokenChainError) as info:
        Journal.open(db)
    assert info.value.first_bad_seq == first_bad and "journal verify" in str(info.value)


def _rehash(db: Path, seq: int, payload: str) -> None:
    """Edit a payload and recompute that record's hash: the careful tamperer."""
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER records_no_update")
    at, kind, cls, prev = conn.execute(
        "SELECT at, kind, classification, prev_hash FROM records WHERE seq = ?", (seq,)
    ).fetchone()
    new_hash = record_hash(seq, at, kind, cls, payload, prev)
    conn.execute("UPDATE records SET payload = ?, hash = ? WHERE seq = ?", (payload, new_hash, seq))
    conn.commit()
    conn.close()


def test_an_edit_that_recomputes_its_own_hash_is_caught_by_the_next_link(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    fill(db, N)
    _rehash(db, 30, canonical_json({"box": 1, "card": "AS"}))
    result = verify_journal(db)
    assert (result.ok, result.first_bad_seq) == (False, 30)
    assert result.reason.startswith("record 30: not the record that record 31 is chained to")


def test_rehashing_the_last_record_is_caught_by_the_head_marker(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    fill(db, N)
    _rehash(db, N, canonical_json({"box": 1}))
    result = verify_journal(db)
    assert (result.ok, result.first_bad_seq) == (False, N)
    assert result.reason.startswith(f"record {N}: does not match the journal head (edited and rehashed?); ")
    assert re.fullmatch(rf".*; record {N} is at byte \d+ of journal\.db(-wal)?", result.reason), result.reason


def test_a_record_appended_behind_the_journals_back_is_named(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    last = fill(db, N)[-1]
    payload = canonical_json({"box": 1})
    h = record_hash(N + 1, 1.0, "card_dealt", "public", payload, last.hash)
    values = f"{N + 1}, 1.0, 'card_dealt', 'public', '{payload}', '{last.hash}', '{h}'"
    tamper(db, f"INSERT INTO records VALUES ({values});")
    result = verify_journal(db)
    assert (result.ok, result.first_bad_seq) == (False, N + 1)
    assert "written after the journal head" in result.reason


def test_the_strict_table_refuses_a_wrongly_typed_value(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    fill(db, 3)
    done = shell(db, "DROP TRIGGER records_no_update; UPDATE records SET at = 'noon' WHERE seq = 2;")
    assert done.returncode != 0 and "cannot store TEXT value in REAL column" in done.stderr
    assert verify_journal(db).ok


def test_a_dropped_table_is_a_failed_verification_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "journal.db"
    fill(db, 3)
    tamper(db, "DROP TABLE chain_head;")
    assert verify_main(str(db)) == 1
    assert "journal tables missing or altered" in capsys.readouterr().out


def test_open_checks_the_first_record_and_the_tail_and_verify_checks_the_middle(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    fill(db, 400)
    tamper(db, "UPDATE records SET payload = '{}' WHERE seq = 200;")
    assert verify_journal(db).first_bad_seq == 200
    for seq in (1, 390):
        db2 = tmp_path / f"j{seq}.db"
        fill(db2, 400)
        tamper(db2, f"UPDATE records SET payload = '{{}}' WHERE seq = {seq};")
        with pytest.raises(BrokenChainError) as info:
            Journal.open(db2)
        assert info.value.first_bad_seq == seq
