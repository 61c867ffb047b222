"""Appending and reading back: seq without gaps, the hash chain, reopening, refusals."""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import TablectlError
from controller.journal import (
    GENESIS_HASH,
    Classification,
    Journal,
    JournalError,
    Record,
    canonical_json,
    hash_input,
    record_hash,
    verify_journal,
)
from tests.journal import SQLITE3, auditor_hashes_hold, fill, sample_entries, shell


def test_append_then_read_back_is_the_same_record(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    with Journal.open(db) as j:
        assert (j.last_seq, j.head_hash) == (0, GENESIS_HASH)
        written = [j.append(*e) for e in sample_entries(6)]
        assert list(j.records()) == written
        assert [r.seq for r in written] == [1, 2, 3, 4, 5, 6]
        assert (j.last_seq, j.head_hash) == (6, written[-1].hash)
    first = written[0]
    assert first.kind == "card_dealt" and first.classification is Classification.PUBLIC
    assert first.payload["note"] == "é ✓" and first.at == 1_765_000_000.25


def test_every_record_carries_the_hash_of_the_one_before(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    records = fill(db, 10)
    assert records[0].prev_hash == GENESIS_HASH
    for before, after in itertools.pairwise(records):
        assert after.prev_hash == before.hash
    for r in records:
        payload = canonical_json(r.payload)
        assert r.hash == record_hash(r.seq, r.at, r.kind, r.classification.value, payload, r.prev_hash)
    assert auditor_hashes_hold(db)


def test_reopen_continues_the_chain_and_the_numbering(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    first = fill(db, 3)
    with Journal.open(db) as j:
        assert (j.last_seq, j.head_hash) == (3, first[-1].hash)
        more = j.append_many(sample_entries(2, start=3))
        single = j.append("shoe_closed", {"batch": "A"}, Classification.PUBLIC, 1_765_000_100.0)
    assert [r.seq for r in more] == [4, 5] and single.seq == 6
    assert more[0].prev_hash == first[-1].hash and single.prev_hash == more[-1].hash
    with Journal.open(db) as j:
        assert [r.seq for r in j.records()] == [1, 2, 3, 4, 5, 6]
        assert [r.seq for r in j.records(after_seq=4)] == [5, 6]
    assert verify_journal(db).ok


def test_records_reads_past_a_chunk_boundary_in_order(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    fill(db, 1300)
    with Journal.open(db) as j:
        seqs = [r.seq for r in j.records()]
        assert seqs == list(range(1, 1301))
        assert next(iter(j.records(after_seq=1299))).seq == 1300


def test_a_returned_record_is_what_a_replay_reads_and_not_the_callers_dict(tmp_path: Path) -> None:
    payload: dict[str, Any] = {"cards": ("AS", "KD"), "nested": {"z": 1, "a": [1.0, -0.0, 1e-300]}}
    with Journal.open(tmp_path / "j.db") as j:
        r = j.append("hand_dealt", payload, Classification.UNTIL_REVEALED, 1.0)
        payload["cards"] = ("2C",)
        assert r.payload == {"cards": ["AS", "KD"], "nested": {"z": 1, "a": [1.0, -0.0, 1e-300]}}
        assert list(j.records()) == [r]


def test_an_int_at_is_stored_as_a_float(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as j:
        r = j.append("tick", {}, Classification.PUBLIC, 1_765_000_000)
        assert isinstance(r.at, float) and list(j.records()) == [r]


def test_a_classification_may_be_given_by_its_value(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as j:
        r = j.append("tick", {}, "secret", 1.0)
        assert r.classification is Classification.SECRET


BAD_INPUT: list[tuple[str, Any, Any, Any, str]] = [
    ("card_dealt", {"card": object()}, Classification.PUBLIC, 1.0, "not JSON"),
    ("card_dealt", {"cards": {1: "AS"}}, Classification.PUBLIC, 1.0, "JSON keys are str"),
    ("card_dealt", {"x": float("nan")}, Classification.PUBLIC, 1.0, "NaN"),
    ("card_dealt", {"x": "\udc80"}, Classification.PUBLIC, 1.0, "not valid Unicode"),
    ("card_dealt", ["AS"], Classification.PUBLIC, 1.0, "must be a dict"),
    ("card_dealt", {}, "top_secret", 1.0, "classification"),
    ("card_dealt", {}, None, 1.0, "classification"),
    ("", {}, Classification.PUBLIC, 1.0, "kind"),
    ("card dealt\n", {}, Classification.PUBLIC, 1.0, "kind"),
    ("card_dealt", {}, Classification.PUBLIC, "noon", "at"),
    ("card_dealt", {}, Classification.PUBLIC, True, "at"),
    ("card_dealt", {}, Classification.PUBLIC, float("inf"), "finite"),
]


@pytest.mark.parametrize(("kind", "payload", "cls", "at", "words"), BAD_INPUT)
def test_malformed_input_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, kind: str, payload: Any, cls: Any, at: Any, words: str
) -> None:
    db = tmp_path / "j.db"
    fill(db, 2)
    with Journal.open(db) as j:
        head = j.head_hash
        with pytest.raises(JournalError, match=words) as info:
            j.append(kind, payload, cls, at)
        with pytest.raises(JournalError):
            j.append_many([sample_entries(1)[0], (kind, payload, cls, at)])
        assert (j.last_seq, j.head_hash) == (2, head)
    message = str(info.value)
    assert isinstance(info.value, TablectlError) and "\n" not in message
    assert "AS" not in message and "QH" not in message  # payload values never appear in errors
    assert verify_journal(db).ok


def test_a_self_referencing_payload_is_refused(tmp_path: Path) -> None:
    loop: dict[str, Any] = {}
    loop["me"] = loop
    with Journal.open(tmp_path / "j.db") as j, pytest.raises(JournalError, match="refers to itself"):
        j.append("x", loop, Classification.PUBLIC, 1.0)


def test_the_repr_of_a_record_withholds_payloads_that_are_not_public(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as j:
        secret = j.append("shuffle_order", {"order": ["7H", "2S"]}, Classification.SECRET, 1.0)
        hole = j.append("hole_card", {"card": "KD"}, Classification.UNTIL_REVEALED, 2.0)
        public = j.append("card_dealt", {"card": "QH"}, Classification.PUBLIC, 3.0)
    assert "7H" not in repr(secret) and "KD" not in repr(hole) and "withheld" in repr(secret)
    assert "QH" in repr(public)


def test_the_hash_input_is_canonical_json_of_the_six_fields(tmp_path: Path) -> None:
    r = fill(tmp_path / "j.db", 1)[0]
    text = hash_input(r.seq, r.at, r.kind, r.classification.value, canonical_json(r.payload), r.prev_hash)
    assert text == (
        '[1,1765000000.25,"card_dealt","public",'
        '{"box":0,"card":"QH","note":"é ✓","odds":[3,2],"round":1,"w":1.5},'
        '"0000000000000000000000000000000000000000000000000000000000000000"]'
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
payloads = st.dictionaries(st.text(max_size=8), json_values, max_size=5)


@settings(max_examples=200, deadline=None)
@given(
    seq=st.integers(1, 2**40),
    at=st.floats(allow_nan=False, allow_infinity=False),
    payload=payloads,
    cls=st.sampled_from(Classification),
)
def test_the_spliced_hash_input_equals_encoding_the_whole_list(
    seq: int, at: float, payload: dict[str, Any], cls: Classification
) -> None:
    spliced = hash_input(seq, at, "k.ind-1", cls.value, canonical_json(payload), "ab" * 32)
    whole = canonical_json([seq, at, "k.ind-1", cls.value, payload, "ab" * 32])
    assert spliced == whole
    assert json.loads(spliced)[4] == payload


def test_the_file_refuses_update_and_delete_from_the_shell(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    fill(db, 3)
    for sql in ("UPDATE records SET kind = 'x' WHERE seq = 2;", "DELETE FROM records WHERE seq = 3;"):
        done = shell(db, sql)
        assert done.returncode != 0 and "append-only" in done.stderr
    assert verify_journal(db).ok
    assert Path(SQLITE3).exists()


@pytest.mark.fsync  # the product's setting, not the suite's (tests/conftest.py)
def test_wal_and_synchronous_full_are_in_force(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    with Journal.open(db) as j:
        conn = j._conn
        assert conn is not None
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        j.mark_published(0)
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_open_refuses_what_is_not_a_journal(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    for path in (junk, other):
        with pytest.raises(JournalError, match="not a tablectl journal"):
            Journal.open(path)
    with pytest.raises(JournalError, match="no such journal"):
        Journal.open(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()


def test_an_empty_file_becomes_a_journal(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    db.touch()
    with Journal.open(db) as j:
        j.append("tick", {}, Classification.PUBLIC, 1.0)
    assert verify_journal(db).records == 1


def test_a_read_only_journal_reads_and_refuses_writes(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    written = fill(db, 4)
    with Journal.open(db, readonly=True) as j:
        assert list(j.records()) == written
        with pytest.raises(JournalError, match="read-only"):
            j.append(*sample_entries(1)[0])
        with pytest.raises(JournalError, match="read-only"):
            j.mark_published(1)


def test_a_closed_journal_says_so(tmp_path: Path) -> None:
    j = Journal.open(tmp_path / "j.db")
    j.close()
    j.close()
    with pytest.raises(JournalError, match="closed"):
        j.append(*sample_entries(1)[0])


def test_readers_in_other_threads_see_a_consistent_journal_while_the_writer_appends(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    fill(db, 1)
    stop = threading.Event()
    seen: list[int] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            with Journal.open(db) as reader:
                while not stop.is_set():
                    got = list(reader.records())
                    assert [r.seq for r in got] == list(range(1, len(got) + 1))
                    seen.append(len(got))
                    assert verify_journal(db).ok
        except BaseException as e:  # the assertion must reach the main thread
            failures.append(e)

    thread = threading.Thread(target=read)
    thread.start()
    try:
        with Journal.open(db) as writer:
            for entry in sample_entries(300, start=1):
                writer.append(*entry)
            while not seen and thread.is_alive():
                writer.append(*sample_entries(1)[0])
    finally:
        stop.set()
        thread.join()
    assert not failures, failures
    assert seen == sorted(seen) and seen[-1] >= 1


def test_two_writers_never_chain_onto_the_same_head(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    failures: list[BaseException] = []

    def write(offset: int) -> None:
        try:
            with Journal.open(db) as j:
                for entry in sample_entries(100, start=offset):
                    j.append(*entry)
        except BaseException as e:
            failures.append(e)

    Journal.open(db).close()
    threads = [threading.Thread(target=write, args=(k * 1000,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    result = verify_journal(db)
    assert result.ok and result.records == 200


def test_records_of_an_edited_file_raise_a_journal_error(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    fill(db, 2)
    with Journal.open(db) as j:
        conn = j._conn
        assert conn is not None
        conn.execute("DROP TRIGGER records_no_update")
        conn.execute("UPDATE records SET payload = 'nope' WHERE seq = 1")
        with pytest.raises(JournalError, match="record 1: cannot be read"):
            list(j.records())


def test_returned_records_are_frozen(tmp_path: Path) -> None:
    r: Record = fill(tmp_path / "j.db", 1)[0]
    with pytest.raises(AttributeError):
        r.seq = 5  # type: ignore[misc]


def test_another_str_enum_with_the_same_values_is_accepted(tmp_path: Path) -> None:
    from enum import StrEnum

    class TableClassification(StrEnum):  # as a caller may keep its own copy
        PUBLIC = "public"
        SECRET = "secret"

    with Journal.open(tmp_path / "j.db") as j:
        r = j.append("card_burned", {}, TableClassification.SECRET, 1.0)
        [m] = j.append_many([("card_dealt", {}, TableClassification.PUBLIC, 2.0)])
        assert r.classification is Classification.SECRET and m.classification is Classification.PUBLIC
        assert list(j.records()) == [r, m]
