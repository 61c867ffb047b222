"""Writing a batch of events: one transaction, idempotent on (site, table_id, seq).

Rows go in by COPY into a per-connection temporary table, then one INSERT ... ON CONFLICT DO
NOTHING: a redelivered message costs nothing and changes nothing. A record that comes again
different from the archived one (another hash, kind or classification) is not stored over it:
it raises ``changed_hash``. Compared after the insert, so a copy another worker committed at the
same moment is seen too (READ COMMITTED: the next statement sees what the INSERT waited for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from controller.archive import alarms
from controller.archive.alarms import ChainAlarm
from controller.archive.messages import ArchivedEvent, as_row

COLUMNS = "site, table_id, seq, day, at, kind, classification, withheld, payload, hash, prev_hash"

_INCOMING = "CREATE TEMP TABLE IF NOT EXISTS incoming (LIKE events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
_INSERT = (
    f"INSERT INTO events ({COLUMNS}) SELECT {COLUMNS} FROM incoming "
    "ON CONFLICT DO NOTHING RETURNING site, table_id, seq"
)
_CHANGED = (
    "SELECT i.site, i.table_id, i.seq FROM incoming i JOIN events e USING (site, table_id, seq) "
    "WHERE (e.hash, e.kind, e.classification, e.withheld) IS DISTINCT FROM "
    "(i.hash, i.kind, i.classification, i.withheld)"
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
                for e in unique.values():
                    await copy.write_row(as_row(e))
            await cur.execute(_INSERT)
            inserted = {(r[0], r[1], r[2]) for r in await cur.fetchall()}
            await cur.execute(_CHANGED)
            result.alarms += [alarms.changed(*r) for r in await cur.fetchall()]
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
