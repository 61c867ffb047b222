"""``tablectl archive verify``: does a table's journal still hold what the archive received?

The journal's own chain has no key: whoever can write the file can edit a record and recompute
every later hash, and ``tablectl journal verify`` would find the result intact. The archive holds
the hashes as they were published at the time, out of the table's reach; a rewritten journal
differs from them at the first public record at or after the edit (every hash covers the one
before it, so a change anywhere changes all later hashes). See docs/journal.md, "The archive".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from controller.errors import TablectlError
from controller.journal import Journal, JournalError, Record, verify_journal


@dataclass(frozen=True, slots=True)
class Agreement:
    ok: bool
    compared: int  # archived records compared with the journal
    first_bad_seq: int | None
    reason: str


def _archived(conn: psycopg.Connection[Any], site: str, table_id: str) -> Iterator[tuple[Any, ...]]:
    with conn.cursor(name="archived") as cur:  # server-side: a year of one table is millions of rows
        cur.execute(
            "SELECT seq, kind, classification, withheld, hash, prev_hash FROM events "
            "WHERE site = %s AND table_id = %s ORDER BY seq",
            (site, table_id),
        )
        yield from cur


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


def compare(journal: Journal, rows: Iterator[tuple[Any, ...]]) -> Agreement:
    """Walk the archived rows and the journal's records side by side, in seq order."""
    records = journal.records()
    record = next(records, None)
    compared = 0
    for row in rows:
        seq = row[0]
        while record is not None and record.seq < seq:
            record = next(records, None)
        if record is None or record.seq != seq:
            return Agreement(
                False, compared, seq, f"record {seq}: archived but not in the journal (removed?)"
            )
        problem = _differs(record, row)
        if problem is not None:
            return Agreement(False, compared, seq, problem)
        compared += 1
    return Agreement(True, compared, None, "agrees with the archive")


def find_site(conn: psycopg.Connection[Any], table_id: str) -> str:
    sites = [r[0] for r in conn.execute("SELECT site FROM chain_state WHERE table_id = %s", (table_id,))]
    if len(sites) != 1:
        found = "no site" if not sites else f"sites {', '.join(sorted(sites))}"
        raise TablectlError(f"archive verify: the archive has {found} for table {table_id}; give --site")
    return str(sites[0])


def verify_main(dsn: str, journal_path: str, site: str | None, table_id: str | None) -> int:
    """0 when every archived record agrees with the journal; 1 naming the first that does not."""
    path = Path(journal_path)
    if not path.is_file():
        raise TablectlError(f"archive verify: {path}: no such journal")
    try:
        own = verify_journal(path)
        with Journal.open(path, create=False, readonly=True) as journal:
            first = next(journal.records(), None)
            if table_id is None:
                if first is None or first.kind != "table_opened":
                    raise TablectlError(f"archive verify: {path}: no table_opened record; give --table")
                table_id = str(first.payload.get("table"))
            with psycopg.connect(dsn, connect_timeout=10) as conn:
                site = site or find_site(conn, table_id)
                result = compare(journal, _archived(conn, site, table_id))
    except JournalError as e:
        raise TablectlError(f"archive verify: {e}") from None
    except psycopg.Error as e:
        raise TablectlError(f"archive verify: database: {str(e).splitlines()[0][:200]}") from None
    where = f"{path} ({site}/{table_id})"
    if not own.ok:
        # The journal's own chain is broken; the archive comparison still says which records changed.
        print(f"{where}: journal chain: {own.reason}")
    if not result.ok:
        print(f"{where}: {result.reason}")
        return 1
    if not own.ok:
        return 1
    print(
        f"{where}: {result.compared} archived records agree with the journal ({own.records} in the journal)"
    )
    return 0
