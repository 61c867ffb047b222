"""Writing a batch of events: one transaction, idempotent on (site, table_id, seq).

Rows go in by COPY into a per-connection temporary table, then one INSERT ... ON CONFLICT DO
NOTHING: a redelivered message costs nothing and changes nothing. A record that comes again
different from the archived one (another hash, kind or classification) is not stored over it:
it raises ``changed_hash``. The rows the INSERT skipped are compared after it, so a copy another
worker committed at the same moment is seen too (READ COMMITTED: the next statement sees what
the INSERT waited for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from controller.archive import alarms
from controller.archive.alarms import ChainAlarm
from controller.archive.messages import ArchivedEvent, copy_line

COLUMNS = "site, table_id, seq, day, at, kind, classification, withheld, payload, hash, prev_hash, tz"

_INCOMING = "CREATE TEMP TABLE IF NOT EXISTS incoming (LIKE events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
_INSERT = (
    f"INSERT INTO events ({COLUMNS}) SELECT {COLUMNS} FROM incoming "
    "ON CONFLICT DO NOTHING RETURNING site, table_id, seq"
)
# Only for the rows the INSERT skipped (usually none): a join of the whole batch with events cost
# more than the insert itself.
_ARCHIVED = (
    "SELECT e.site, e.table_id, e.seq, e.hash, e.kind, e.classification, e.withheld "
    "FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS k(site, table_id, seq) "
    "JOIN events e USING (site, table_id, seq)"
)


@dataclass
class StoreResult:
    inserted: int = 0
    duplicates: int = 0
    alarms: list[ChainAlarm] = field(default_factory=list)


class EventStore:
    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self._known_tables: set[tuple[str, str]] = set()
        self._prepared = False

    async def store(self, events: Sequence[ArchivedEvent]) -> StoreResult:
        result = StoreResult()
        unique: dict[tuple[str, str, int], ArchivedEvent] = {}
        for e in events:
            seen = unique.setdefault(e.key, e)
            if seen is not e and not seen.same_record(e):
                result.alarms.append(alarms.changed(*e.key))
        if not unique:
            return result
        conn = self.conn
        if not self._prepared:
            await conn.execute(_INCOMING)
            self._prepared = True
        async with conn.transaction(), conn.cursor() as cur:
            async with cur.copy(f"COPY incoming ({COLUMNS}) FROM STDIN") as copy:
                await copy.write("".join(copy_line(e) for e in unique.values()).encode("utf-8"))
            await cur.execute(_INSERT)
            inserted = {(r[0], r[1], r[2]) for r in await cur.fetchall()}
            skipped = [k for k in unique if k not in inserted]
            if skipped:
                await cur.execute(_ARCHIVED, [list(column) for column in zip(*skipped, strict=True)])
                for site, table_id, seq, *archived in await cur.fetchall():
                    mine = unique[(site, table_id, seq)]
                    if archived != [mine.hash, mine.kind, mine.classification, mine.withheld]:
                        result.alarms.append(alarms.changed(site, table_id, seq))
            for key in inserted:
                if unique[key].hash_holds() is False:
                    result.alarms.append(alarms.bad_hash(*key))
            new_tables = {(e.site, e.table_id) for e in unique.values()} - self._known_tables
            if new_tables:
                await cur.executemany(
                    "INSERT INTO chain_state (site, table_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    sorted(new_tables),
                )
            await record_alarms(cur, result.alarms)
        self._known_tables |= new_tables
        result.inserted = len(inserted)
        result.duplicates = len(events) - len(inserted)
        return result


async def record_alarms(cur: psycopg.AsyncCursor[Any], found: Sequence[ChainAlarm]) -> None:
    if found:
        await cur.executemany(
            "INSERT INTO chain_alarms (site, table_id, seq, kind, detail) VALUES (%s, %s, %s, %s, %s)",
            [(a.site, a.table_id, a.seq, a.kind, a.detail) for a in found],
        )
