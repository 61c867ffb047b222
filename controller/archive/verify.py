"""``tablectl archive verify``: does a table's journal still hold what the archive received?

The journal's own chain has no key: whoever can write the file can edit a record and recompute
every later hash, and ``tablectl journal verify`` would find the result intact. The archive holds
the hashes as they were published at the time, out of the table's reach; a rewritten journal
differs from them at the first public record at or after the edit (every hash covers the one
before it, so a change anywhere changes all later hashes). See docs/journal.md, "The archive".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from controller.archive.alarms import copy_of
from controller.errors import TablectlError
from controller.journal import BrokenChainError, Journal, JournalError, Record, verify_journal
from controller.journal.damage import DamagedJournalError


class _UnreadableRecord(Exception):
    """A record of the journal cannot be read (its payload is not JSON, or nested past the
    reader's bound): the journal does not hold together, a disagreement (exit 1)."""


def _records(journal: Journal) -> Iterator[Record]:
    try:
        yield from journal.records()
    except JournalError as e:
        raise _UnreadableRecord(f"{journal.path}: {e}") from None


def _first(journal: Journal) -> Record | None:
    return next(_records(journal), None)


@dataclass(frozen=True, slots=True)
class Agreement:
    ok: bool
    compared: int  # archived records compared with the journal
    first_bad_seq: int | None
    reason: str
    notes: list[str] = field(default_factory=list)  # one line per contested record


def _archived(
    conn: psycopg.Connection[Any], site: str, table_id: str, journal: str
) -> Iterator[tuple[Any, ...]]:
    with conn.cursor(name="archived") as cur:  # server-side: a year of one table is millions of rows
        cur.execute(
            "SELECT seq, kind, classification, withheld, hash, prev_hash FROM events "
            "WHERE site = %s AND table_id = %s AND journal = %s ORDER BY seq",
            (site, table_id, journal),
        )
        yield from cur


@dataclass(frozen=True, slots=True)
class Copy:
    """One copy of a contested record, as ``quarantine`` keeps it."""

    archived: bool  # the copy in events (received first)
    kind: str
    classification: str
    withheld: bool
    hash: str | None
    received_at: datetime
    received_by: str | None

    def held_by(self, record: Record) -> bool:
        same_kind = (record.kind, record.classification.value) == (self.kind, self.classification)
        return same_kind and (self.withheld or record.hash == self.hash)

    def describe(self) -> str:
        first = "archived first" if self.archived else "received later"
        return f"the copy {first} ({copy_of(self.hash, self.kind, self.received_at, self.received_by)})"


def _quarantined(
    conn: psycopg.Connection[Any], site: str, table_id: str, journal: str
) -> dict[int, list[Copy]]:
    """Every contested seq of the journal and its copies, first received first."""
    out: dict[int, list[Copy]] = {}
    for seq, *fields in conn.execute(
        "SELECT seq, archived, kind, classification, withheld, hash, received_at, received_by "
        "FROM quarantine WHERE site = %s AND table_id = %s AND journal = %s "
        "ORDER BY seq, NOT archived, received_at, id",
        (site, table_id, journal),
    ):
        out.setdefault(seq, []).append(Copy(*fields))
    return out


def _contested(record: Record | None, seq: int, copies: list[Copy]) -> tuple[bool, str]:
    """Whether the journal holds one of the copies, and the line that says which."""
    held = [c for c in copies if record is not None and c.held_by(record)]
    n = f"{len(copies)} copies" if len(copies) > 1 else "a copy that did not link to the chain"
    if record is None:
        return False, f"record {seq}: contested in the archive ({n}); the journal has no record {seq}"
    if not held:
        return (
            False,
            f"record {seq}: contested in the archive ({n}); the journal holds none of them (rewritten?)",
        )
    return True, f"record {seq}: contested in the archive ({n}); the journal holds {held[0].describe()}"


def _differs(record: Record, row: tuple[Any, ...]) -> str | None:
    seq, kind, classification, withheld, hash_, prev_hash = row
    if record.kind != kind or record.classification.value != classification:
        ours = f"{record.kind}/{record.classification.value}"
        return f"record {seq}: the journal has {ours}, the archive {kind}/{classification} (rewritten?)"
    if not withheld and record.hash != hash_:
        return f"record {seq}: hash differs from the archived one (journal rewritten after archiving?)"
    if prev_hash is not None and record.prev_hash != prev_hash:
        return f"record {seq}: previous-hash link differs from the archived one (rewritten?)"
    return None


def compare(
    journal: Journal, rows: Iterator[tuple[Any, ...]], contested: dict[int, list[Copy]] | None = None
) -> Agreement:
    """Walk the archived rows and the journal's records side by side, in seq order. A contested
    seq (two different records claimed it, or one did not link) agrees when the journal holds one
    of its copies (the archived row among them), and a line in ``notes`` says which."""
    contested = contested or {}
    notes: list[str] = []
    records = _records(journal)
    record = next(records, None)
    compared = 0
    pending = sorted(contested)

    def record_at(seq: int) -> Record | None:
        nonlocal record
        while record is not None and record.seq < seq:
            record = next(records, None)
        return record if record is not None and record.seq == seq else None

    def settle(seq: int, row: tuple[Any, ...] | None) -> str | None:
        """The contested ``seq`` (``row``: its archived row, if any): None when the journal holds
        one of its copies (noted), else the disagreement."""
        copies = contested[seq]
        mine = record_at(seq)
        in_events_only = row is not None and not any(c.archived for c in copies)
        if in_events_only and mine is not None and row is not None and _differs(mine, row) is None:
            notes.append(
                f"record {seq}: a copy that did not link to the chain was quarantined; "
                "the journal holds the archived one"
            )
            return None
        ok, line = _contested(mine, seq, copies)
        if ok:
            notes.append(line)
            return None
        return line

    for row in rows:
        seq = row[0]
        while pending and pending[0] < seq:
            at = pending.pop(0)
            problem = settle(at, None)
            if problem is not None:
                return Agreement(False, compared, at, problem, notes)
        mine = record_at(seq)
        if mine is None:
            return Agreement(
                False, compared, seq, f"record {seq}: archived but not in the journal (removed?)", notes
            )
        if pending and pending[0] == seq:
            pending.pop(0)
            problem = settle(seq, row)
        else:
            problem = _differs(mine, row)
        if problem is not None:
            return Agreement(False, compared, seq, problem, notes)
        compared += 1
    for at in pending:
        problem = settle(at, None)
        if problem is not None:
            return Agreement(False, compared, at, problem, notes)
    return Agreement(True, compared, None, "agrees with the archive", notes)


def find_site(conn: psycopg.Connection[Any], table_id: str) -> str:
    sites = [
        r[0] for r in conn.execute("SELECT DISTINCT site FROM chain_state WHERE table_id = %s", (table_id,))
    ]
    if len(sites) != 1:
        found = "no site" if not sites else f"sites {', '.join(sorted(sites))}"
        raise TablectlError(f"archive verify: the archive has {found} for table {table_id}; give --site")
    return str(sites[0])


def find_journal(conn: psycopg.Connection[Any], site: str, table_id: str, first: Record | None) -> str:
    """The key the archive holds this journal under: its first record's hash (as the table
    publishes it with every event), or '' for a table that published none and so kept one chain."""
    if first is not None:
        row = conn.execute(
            "SELECT 1 FROM chain_state WHERE site = %s AND table_id = %s AND journal = %s",
            (site, table_id, first.hash),
        ).fetchone()
        if row is not None:
            return first.hash
    row = conn.execute(
        "SELECT 1 FROM chain_state WHERE site = %s AND table_id = %s AND journal = ''", (site, table_id)
    ).fetchone()
    if row is not None:
        return ""
    raise TablectlError(
        f"archive verify: the archive has no record of this journal of {site}/{table_id}"
        + (f" (journal {first.hash[:12]})" if first is not None else "")
    )


# The seqs the archive holds of one journal: rows in events, and contests not settled yet (compare
# has checked that the journal holds one of their copies).
_HELD = (
    "SELECT seq FROM events WHERE site = %(site)s AND table_id = %(table)s AND journal = %(journal)s "
    "UNION SELECT seq FROM quarantine WHERE site = %(site)s AND table_id = %(table)s "
    "AND journal = %(journal)s AND reason = 'changed_hash'"
)


def _missing(conn: psycopg.Connection[Any], site: str, table_id: str, journal: str, journal_seqs: int) -> str:
    """'' when every record 1..``journal_seqs`` is archived, else the line naming what is not."""
    params = {"site": site, "table": table_id, "journal": journal, "n": journal_seqs}
    row = conn.execute(
        f"SELECT count(*), (SELECT min(s) FROM generate_series(1, %(n)s::bigint) s WHERE s NOT IN ({_HELD})) "
        f"FROM ({_HELD}) h WHERE seq <= %(n)s",
        params,
    ).fetchone()
    archived, first = (int(row[0]), row[1]) if row else (0, 1)
    if archived == journal_seqs:
        return ""
    where = f"; the first missing is record {first}" if first is not None else ""
    return f"incomplete: {archived} of the journal's {journal_seqs} records are archived{where}"


def verify_main(dsn: str, journal_path: str, site: str | None, table_id: str | None) -> int:
    """0 when every record of the journal is archived and agrees with it; 1 naming the first that
    does not (a record never archived, a journal cut short, damaged, whose own chain breaks, or
    whose records cannot be read, included); 2 (TablectlError) when it cannot run: no journal, no
    database, no such table or journal in the archive."""
    path = Path(journal_path)
    if not path.is_file():
        raise TablectlError(f"archive verify: {path}: no such journal")
    try:
        own = verify_journal(path)
        with Journal.open(path, create=False, readonly=True) as journal:
            first = _first(journal)
            if table_id is None:
                if first is None or first.kind != "table_opened":
                    raise TablectlError(f"archive verify: {path}: no table_opened record; give --table")
                table_id = str(first.payload.get("table"))
            with psycopg.connect(dsn, connect_timeout=10) as conn:
                site = site or find_site(conn, table_id)
                key = find_journal(conn, site, table_id, first)
                contested = _quarantined(conn, site, table_id, key)
                result = compare(journal, _archived(conn, site, table_id, key), contested)
                missing = _missing(conn, site, table_id, key, journal.last_seq) if result.ok else ""
    except (BrokenChainError, DamagedJournalError, _UnreadableRecord) as e:
        # The journal is ours but does not hold together: that is a disagreement, not a failure to run.
        print(f"archive verify: {e}")
        return 1
    except JournalError as e:
        raise TablectlError(f"archive verify: {e}") from None
    except psycopg.Error as e:
        raise TablectlError(f"archive verify: database: {str(e).splitlines()[0][:200]}") from None
    name = f"journal {key[:12]}" if key else "its one unnamed journal"
    where = f"{path} ({site}/{table_id}, {name})"
    for note in result.notes:
        print(f"{where}: {note}")
    if not own.ok:
        # The journal's own chain is broken; the archive comparison still says which records changed.
        print(f"{where}: journal chain: {own.reason}")
    if not result.ok:
        print(f"{where}: {result.reason}")
        return 1
    if not own.ok:
        return 1
    if missing:
        print(f"{where}: {missing}")
        return 1
    print(f"{where}: complete: all {own.records} records of the journal are archived and agree with it")
    return 0
