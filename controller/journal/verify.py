"""Full verification of a journal file: every record re-hashed and every link followed."""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

from controller.journal.chain import ROW_COLUMNS, ChainWalker
from controller.journal.damage import DamagedJournalError, failure, record_offset
from controller.journal.model import JournalError
from controller.journal.store import connect


@dataclass(frozen=True, slots=True)
class VerifyResult:
    ok: bool
    records: int  # rows in the file, counted whether or not they verified
    first_bad_seq: int | None
    reason: str  # one line; names a record and what is wrong with it, never its contents


def verify_journal(path: str | Path) -> VerifyResult:
    """Check every record of the journal at ``path``; the file is opened read-only.

    Raises JournalError when there is nothing to verify (no such file, not a tablectl journal).
    A journal whose tables were dropped or altered is not intact, so that is a failed result.
    """
    conn, _ = connect(path, readonly=True, create=False)
    walker = ChainWalker()
    try:
        try:
            # One read transaction for the whole walk, so a writer appending meanwhile cannot move
            # the head marker past the records we have read.
            conn.execute("BEGIN")
            for row in conn.execute(f"SELECT {ROW_COLUMNS} FROM records ORDER BY seq"):
                walker.feed(row)
            head = conn.execute("SELECT seq, hash FROM chain_head WHERE id = 1").fetchone()
            cursor = conn.execute("SELECT published_seq FROM telemetry_cursor WHERE id = 1").fetchone()
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            damage = failure(path, e, "journal tables missing or altered (edited?)")
            if isinstance(damage, DamagedJournalError):
                after = walker.rows  # the records before the damage were read and chained
                return VerifyResult(
                    False, after, after + 1, f"damaged journal after record {after}: {damage.where}"
                )
            return VerifyResult(False, walker.rows, None, str(damage).removeprefix(f"{path}: "))
    finally:
        conn.close()
    problem = walker.finish(head, cursor[0] if cursor else None)
    if problem is None:
        return VerifyResult(True, walker.rows, None, "chain intact")
    where = record_offset(path, problem.first_bad_seq)
    return VerifyResult(False, walker.rows, problem.first_bad_seq, problem.reason + where)


def verify_main(path: str) -> int:
    """``tablectl journal verify PATH``: 0 intact, 1 not intact, 2 nothing to verify."""
    try:
        result = verify_journal(path)
    except DamagedJournalError as e:
        print(str(e))
        return 1  # ours, and not intact
    except JournalError as e:
        print(str(e), file=sys.stderr)
        return 2
    if result.ok:
        print(f"{path}: {result.records} records, chain intact")
        return 0
    print(f"{path}: {result.reason}")
    return 1
