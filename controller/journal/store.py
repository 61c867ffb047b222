"""The journal file: an append-only, hash-chained SQLite table that is also the telemetry outbox."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from controller.bounded import MAX_RECORD_BYTES, InputRefused, load_json
from controller.journal.chain import ROW_COLUMNS, ChainWalker, Problem, Row
from controller.journal.damage import failure, record_offset, unreadable
from controller.journal.model import (
    APPLICATION_ID,
    GENESIS_HASH,
    BrokenChainError,
    Classification,
    Entry,
    JournalError,
    Record,
    prepare,
    record_hash,
)

# user_version is the format version (APPLICATION_ID, in model.py, marks the file as ours).
FORMAT_VERSION = 1
MIN_SQLITE = (3, 37, 0)  # STRICT tables

# How much of the tail Journal.open re-hashes: enough to catch an edit near the end (where a
# tamperer looking at "the last round" would edit) while keeping open constant-time.
TAIL_CHECK = 64
_READ_CHUNK = 512
# SQLite's synchronous mode for a writable journal: FULL, every append on disk (fsynced) before it
# returns. Nothing in the product changes it; the test suite alone sets OFF for its in-process
# tables (tests/conftest.py), whose journals no power cut can reach: a killed process keeps every
# commit either way (the kernel has it), and a test cannot cut the power to see the difference.
SYNCHRONOUS = "FULL"
_ADVANCE_CURSOR = "UPDATE telemetry_cursor SET published_seq = max(published_seq, ?) WHERE id = 1"
_READ_FROM = f"SELECT {ROW_COLUMNS} FROM records WHERE seq > ? ORDER BY seq LIMIT ?"

_SCHEMA = (
    # STRICT so the sqlite3 shell cannot store text in `at` or a number in `payload` unnoticed.
    """CREATE TABLE records (
        seq INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        classification TEXT NOT NULL,
        payload TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    ) STRICT""",
    # The chain cannot show that its last records were cut off; this row, rewritten in the same
    # transaction as every append, can.
    "CREATE TABLE chain_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL,"
    " hash TEXT NOT NULL) STRICT",
    # Not part of the chain: it moves when the broker acknowledges, not when the table acts.
    "CREATE TABLE telemetry_cursor (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " published_seq INTEGER NOT NULL) STRICT",
    f"INSERT INTO chain_head VALUES (1, 0, '{GENESIS_HASH}')",
    "INSERT INTO telemetry_cursor VALUES (1, 0)",
    # Append-only is a property of the file, not only of this API: other code sharing the file
    # cannot rewrite history by accident. (Anyone can drop these; the hash chain is the real guard.)
    "CREATE TRIGGER records_no_update BEFORE UPDATE ON records"
    " BEGIN SELECT RAISE(ABORT, 'journal records are append-only'); END",
    "CREATE TRIGGER records_no_delete BEFORE DELETE ON records"
    " BEGIN SELECT RAISE(ABORT, 'journal records are append-only'); END",
    f"PRAGMA application_id = {APPLICATION_ID}",
    f"PRAGMA user_version = {FORMAT_VERSION}",
)


def _fsync_dir(directory: Path) -> None:
    # A new file (the database, or the -wal that SQLite recreates on every first open) is only
    # durable once its directory entry is; SQLite does not sync the directory for either.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_format(conn: sqlite3.Connection, name: str) -> bool:
    """True when the file is empty and may become a journal; raises when it is something else."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id == APPLICATION_ID:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != FORMAT_VERSION:
            raise JournalError(f"{name}: journal format {version} is not supported (only {FORMAT_VERSION})")
        return False
    objects = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
    if app_id == 0 and objects == 0:
        return True
    raise JournalError(f"{name}: not a tablectl journal")


def connect(path: str | Path, *, readonly: bool, create: bool) -> tuple[sqlite3.Connection, bool]:
    """Open the SQLite file and check it is a journal (or empty); return it and whether it is new."""
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise JournalError(f"journal: SQLite {sqlite3.sqlite_version} is too old; 3.37 or later is needed")
    p = Path(path)
    if (readonly or not create) and not p.is_file():
        raise JournalError(f"{path}: no such journal")
    if not readonly and create and not p.exists():
        # The journal holds hole cards and stub contents: readable by the appliance's user alone.
        # SQLite gives the -wal and -shm files it creates the database file's permissions.
        try:
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass  # created meanwhile by another opener: theirs is the mode
        except OSError as e:
            raise JournalError(f"{path}: cannot create: {e.strerror or e}") from None
    try:
        if readonly:
            conn = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
        else:
            # Not tied to the opening thread: the supervisor commits from the journal's own thread
            # (one writer thread, never two at once), so a slow flush does not stall its event loop.
            conn = sqlite3.connect(p, timeout=5.0, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        raise failure(path, e, "cannot open") from None
    try:
        new = _check_format(conn, str(path))
        if new and readonly:
            raise JournalError(f"{path}: not a tablectl journal")
    except sqlite3.DatabaseError as e:
        conn.close()
        raise unreadable(path, e) from None
    except JournalError:
        conn.close()
        raise
    return conn, new


def read_tail_problem(conn: sqlite3.Connection, count: int) -> Problem | None:
    """The cheap check done on open: the first record, the last ``count`` records and the head marker."""
    # One read transaction: another writer appending between our reads of the tail and of the head
    # would otherwise look exactly like a record added behind the journal's back.
    conn.execute("BEGIN")
    try:
        first = conn.execute(f"SELECT {ROW_COLUMNS} FROM records ORDER BY seq LIMIT 1").fetchone()
        head = conn.execute("SELECT seq, hash FROM chain_head WHERE id = 1").fetchone()
        published = conn.execute("SELECT published_seq FROM telemetry_cursor WHERE id = 1").fetchone()
        tail = conn.execute(
            f"SELECT {ROW_COLUMNS} FROM records WHERE seq > ? ORDER BY seq DESC LIMIT ?",
            (first[0] if first else 0, count),
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    tail.reverse()
    walker = ChainWalker()
    if first is not None:
        walker.feed(first)
        if tail and walker.problem is None:
            if tail[0][0] != first[0] + 1:  # a window further on; its first link cannot be checked
                walker = ChainWalker(expected_seq=tail[0][0], prev_hash=None)
            for row in tail:
                walker.feed(row)
    return walker.finish(head, published[0] if published else None)


# A dict lookup instead of the enum's call: replay reads every record of the day through here.
_CLASSIFICATION = {c.value: c for c in Classification}


def _record(row: Row) -> Record:
    seq, at, kind, classification, payload, prev_hash, hash_ = row
    try:
        doc = load_json(payload, max_bytes=MAX_RECORD_BYTES)
        return Record(seq, at, kind, _CLASSIFICATION[classification], doc, prev_hash, hash_)
    except (KeyError, ValueError, TypeError, InputRefused):
        raise JournalError(f"record {seq}: cannot be read (edited?); run tablectl journal verify") from None


class Journal:
    """The table's journal. One instance is used by one thread at a time (it may be handed to a
    writer thread, as the supervisor does); another process opens its own.

    Every append is committed and fsynced before it returns, so the caller may carry out the
    effects of an event as soon as ``append`` has returned its Record.
    """

    def __init__(
        self, conn: sqlite3.Connection, path: Path, readonly: bool, reader: sqlite3.Connection | None = None
    ) -> None:
        self._conn: sqlite3.Connection | None = conn
        # Reads go through a connection of their own (a writable journal's): the table's loop, the
        # console and /metrics read while the journal's thread commits, and on one shared
        # connection a read could run inside an append's transaction (and see it before it is
        # committed) or hold a snapshot the append must upgrade from, which SQLite refuses at once
        # as "database is locked" once the telemetry cursor moved meanwhile. A second WAL
        # connection reads committed records only, and never waits for the writer.
        self._reader: sqlite3.Connection | None = reader
        self.path = path
        self.readonly = readonly

    @classmethod
    def open(cls, path: str | Path, *, create: bool = True, readonly: bool = False) -> Journal:
        """Open (or create) a journal and check the tail of its chain.

        ``readonly`` is for looking at a journal kept as evidence (a dispute, an audit): the file
        is opened read-only by SQLite itself. Raises BrokenChainError naming the first bad record
        when the tail does not hold; ``verify_journal`` checks every record.
        """
        conn, new = connect(path, readonly=readonly, create=create)
        try:
            if not readonly:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if mode != "wal":
                    raise JournalError(f"{path}: cannot use write-ahead logging here (got {mode})")
                # In WAL mode FULL fsyncs the log on every commit; NORMAL would only at checkpoints,
                # and an acknowledged append could vanish with the power.
                conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
                if new:
                    cls._create_schema(conn, str(path))
            problem = read_tail_problem(conn, TAIL_CHECK)
            if problem is not None:
                where = record_offset(path, problem.first_bad_seq)
                raise BrokenChainError(
                    f"{path}: {problem.reason}{where}; run tablectl journal verify for a full check",
                    problem.first_bad_seq,
                )
            reader = None
            if not readonly:
                _fsync_dir(Path(path).resolve().parent)
                reader = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
                reader.execute("PRAGMA query_only = 1")  # it reads; the writer writes
        except sqlite3.Error as e:
            conn.close()
            raise failure(path, e, "cannot open") from None
        except BaseException:
            conn.close()
            raise
        return cls(conn, Path(path), readonly, reader)

    @staticmethod
    def _create_schema(conn: sqlite3.Connection, name: str) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have created it between our look and our lock.
            if _check_format(conn, name):
                for statement in _SCHEMA:
                    conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- writing ---------------------------------------------------------------------------------

    def append(
        self, kind: str, payload: dict[str, Any], classification: Classification | str, at: float
    ) -> Record:
        """Append one record; it is committed and fsynced when this returns.

        ``classification`` may be any str enum (or str) whose value is one of the three; the stored
        Record always carries this module's Classification.
        """
        return self._append([prepare(kind, payload, classification, at)])[0]

    def append_many(
        self, entries: Sequence[tuple[str, dict[str, Any], Classification | str, float]]
    ) -> list[Record]:
        """Append several records in one transaction: all of them land, or none."""
        prepared = [prepare(*entry) for entry in entries]
        return self._append(prepared) if prepared else []

    def _append(self, entries: list[Entry]) -> list[Record]:
        conn = self._writable()
        rows: list[tuple[int, float, str, str, str, str, str]] = []
        try:
            # IMMEDIATE takes the write lock before the head is read, so two writers (threads or
            # processes) can never chain onto the same head.
            conn.execute("BEGIN IMMEDIATE")
            try:
                seq, prev = conn.execute("SELECT seq, hash FROM chain_head WHERE id = 1").fetchone()
                for e in entries:
                    seq += 1
                    h = record_hash(seq, e.at, e.kind, e.classification.value, e.payload_json, prev)
                    rows.append((seq, e.at, e.kind, e.classification.value, e.payload_json, prev, h))
                    prev = h
                conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                conn.execute("UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1", (seq, prev))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise failure(self.path, e, "append failed, nothing written") from None
        # Payloads are decoded from what was stored, so the Record returned here is equal to the one
        # a replay reads back (tuples come back as lists) and does not share the caller's dict.
        return [
            Record(r[0], r[1], r[2], entry.classification, json.loads(r[4]), r[5], r[6])
            for r, entry in zip(rows, entries, strict=True)
        ]

    def mark_published(self, seq: int) -> None:
        """Record that the broker acknowledged every record up to ``seq``. A lower seq is ignored.

        Committed without its own fsync: the next append's fsync carries it. Losing it to a power
        cut only means republishing a few records, which consumers drop by seq; paying an fsync per
        acknowledgement would slow appends, which matter more.
        """
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise JournalError("journal: published seq must be a non-negative integer")
        conn = self._writable()
        try:
            conn.execute("PRAGMA synchronous = NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    last = conn.execute("SELECT seq FROM chain_head WHERE id = 1").fetchone()[0]
                    if seq > last:
                        raise JournalError(f"journal: cannot mark {seq} published; the last record is {last}")
                    conn.execute(_ADVANCE_CURSOR, (seq,))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            finally:
                conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
        except sqlite3.Error as e:
            raise failure(self.path, e, "cannot record the published seq") from None

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database file now, without waiting for readers.

        SQLite does this by itself every ~1000 pages, inside whichever append crosses the line
        (a latency spike for that append); a supervisor may call this when the table is idle.
        """
        try:
            self._open_conn().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as e:
            raise failure(self.path, e, "checkpoint failed") from None

    # -- reading ---------------------------------------------------------------------------------

    def records(self, after_seq: int = 0) -> Iterator[Record]:
        """Records with seq > ``after_seq`` in seq order, including those appended while iterating.

        Read in chunks, each its own short read transaction, so iterating never holds the WAL open
        and the caller may append (or another process may) between items.
        """
        for row in self._rows(after_seq):
            yield _record(row)

    def verified_records(self) -> Iterator[Record]:
        """Records from the first, each checked against the hash chain before it is yielded: for
        showing evidence, which must not be printed from an edited journal. Raises BrokenChainError
        naming the first bad record instead of yielding it."""
        walker = ChainWalker()
        for row in self._rows(0):
            walker.feed(row)
            if walker.problem is not None:
                where = record_offset(self.path, walker.problem.first_bad_seq)
                raise BrokenChainError(
                    f"{self.path}: {walker.problem.reason}{where}", walker.problem.first_bad_seq
                )
            yield _record(row)

    def _rows(self, after_seq: int) -> Iterator[Row]:
        conn = self._reading()
        last = after_seq
        while True:
            try:
                rows = conn.execute(_READ_FROM, (last, _READ_CHUNK)).fetchall()
            except sqlite3.Error as e:
                raise failure(self.path, e, "cannot read records") from None
            yield from rows
            if len(rows) < _READ_CHUNK:
                return
            last = rows[-1][0]

    def last_seq_of(self, kind: str) -> int | None:
        """Seq of the last record of ``kind``, or None. Read from the end backwards (no index on
        kind), so it costs what lies after that record: for the latest ``state_snapshot``, a few
        thousand rows at most."""
        try:
            row = (
                self._reading()
                .execute("SELECT seq FROM records WHERE kind = ? ORDER BY seq DESC LIMIT 1", (kind,))
                .fetchone()
            )
        except sqlite3.Error as e:
            raise failure(self.path, e, "cannot read records") from None
        return None if row is None else int(row[0])

    def _head(self) -> tuple[int, str]:
        try:
            seq, hash_ = self._reading().execute("SELECT seq, hash FROM chain_head WHERE id = 1").fetchone()
        except sqlite3.Error as e:
            raise failure(self.path, e, "cannot read the head") from None
        return int(seq), str(hash_)

    @property
    def last_seq(self) -> int:
        """Seq of the last record (0 for an empty journal); read from the file, so current across writers."""
        return self._head()[0]

    @property
    def head_hash(self) -> str:
        return self._head()[1]

    def published_seq(self) -> int:
        try:
            conn = self._reading()
            row = conn.execute("SELECT published_seq FROM telemetry_cursor WHERE id = 1").fetchone()
        except sqlite3.Error as e:
            raise failure(self.path, e, "cannot read the published seq") from None
        return int(row[0])

    # -- lifetime --------------------------------------------------------------------------------

    def _open_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise JournalError(f"{self.path}: journal is closed")
        return self._conn

    def _reading(self) -> sqlite3.Connection:
        conn = self._open_conn()
        return self._reader if self._reader is not None else conn

    def _writable(self) -> sqlite3.Connection:
        if self.readonly:
            raise JournalError(f"{self.path}: journal was opened read-only")
        return self._open_conn()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
