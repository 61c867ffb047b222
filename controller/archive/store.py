"""Writing a batch of events: one transaction, idempotent on (site, table_id, journal, seq).

Before anything is written, a batch is sifted:

- events of a table nobody registered (``known_tables``) are dropped with one ``unknown_table``
  alarm per table and worker: a name nobody registered is not a table of the floor's;
- a public record whose ``prev_hash`` is not the archived hash of the record before it (nor of
  a quarantined copy of it) is not the chain's next: it goes to ``quarantine``, with a ``fork``
  alarm, and leaves its seq free for the table's own record.

The rest go in by one COPY straight into ``events`` inside a savepoint, the database's fastest
write. When one of them is archived already (a redelivery, another worker's copy) the COPY fails
whole and is undone, and the batch goes by COPY into a per-connection temporary table, then one
INSERT ... ON CONFLICT DO NOTHING: a redelivered message changes nothing. A record that comes again
different from the archived one (another hash, kind or classification) is not stored over it:
both copies are kept in ``quarantine`` with when and by which worker each was received, and the
``changed_hash`` alarm names both; ``tablectl archive verify`` says which one the journal holds.
The rows the INSERT skipped are compared after it, so a copy another worker committed at the
same moment is seen too (READ COMMITTED: the next statement sees what the INSERT waited for).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from controller.archive import alarms
from controller.archive.alarms import ChainAlarm, copy_of
from controller.archive.messages import ArchivedEvent, copy_line

COLUMNS = (
    "site, table_id, seq, day, at, kind, classification, withheld, payload, hash, prev_hash, tz, "
    "received_by, journal"
)
_RECORD = "at, kind, classification, withheld, payload, hash, prev_hash, day, tz"

_INCOMING = "CREATE TEMP TABLE IF NOT EXISTS incoming (LIKE events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
# No RETURNING: the row count says how many went in, and only when some did not (a redelivery,
# another worker's copy) are the skipped ones looked for. Sending every inserted key back and
# building a set of them cost more client time than the insert's own round trip.
_INSERT = f"INSERT INTO events ({COLUMNS}) SELECT {COLUMNS} FROM incoming ON CONFLICT DO NOTHING"
# The staged records the INSERT skipped whose archived row is another record (a repeat of the
# archived record needs nothing): compared in the database, the batch already there.
_SKIPPED_OTHER = (
    "SELECT i.site, i.table_id, i.journal, i.seq FROM incoming i "
    "JOIN events e USING (site, table_id, journal, seq) "
    "WHERE (e.hash, e.kind, e.classification, e.withheld) "
    "IS DISTINCT FROM (i.hash, i.kind, i.classification, i.withheld)"
)
_KEYS = "unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) AS k(site, table_id, journal, seq)"
# Only for the rows the INSERT skipped (usually none): a join of the whole batch with events cost
# more than the insert itself.
_ARCHIVED = (
    "SELECT e.site, e.table_id, e.journal, e.seq, e.hash, e.kind, e.classification, e.withheld, "
    "CASE WHEN e.withheld THEN e.prev_hash END, "
    f"e.received_at, e.received_by FROM {_KEYS} JOIN events e USING (site, table_id, journal, seq)"
)
# The archived hashes a record may link to: the row in events and every quarantined copy.
_LINKS = (
    f"SELECT e.site, e.table_id, e.journal, e.seq, e.hash, e.withheld FROM {_KEYS} "
    "JOIN events e USING (site, table_id, journal, seq) "
    f"UNION ALL SELECT q.site, q.table_id, q.journal, q.seq, q.hash, q.withheld FROM {_KEYS} "
    "JOIN quarantine q USING (site, table_id, journal, seq)"
)
_QUARANTINE_ARCHIVED = (
    f"INSERT INTO quarantine (site, table_id, journal, seq, reason, archived, {_RECORD}, received_at, "
    f"received_by) SELECT site, table_id, journal, seq, 'changed_hash', true, {_RECORD}, received_at, "
    "received_by FROM events WHERE site = %s AND table_id = %s AND journal = %s AND seq = %s "
    "AND NOT EXISTS (SELECT 1 FROM quarantine q WHERE q.site = %s AND q.table_id = %s "
    "AND q.journal = %s AND q.seq = %s AND q.archived)"
)
# Once per different copy: a redelivered contender is neither kept nor raised again.
_QUARANTINE_NEW = (
    f"INSERT INTO quarantine (site, table_id, journal, seq, reason, archived, {_RECORD}, received_at, "
    "received_by) SELECT %(site)s, %(table_id)s, %(journal)s, %(seq)s, %(reason)s, false, %(at)s, "
    "%(kind)s, %(classification)s, %(withheld)s, %(payload)s::jsonb, %(hash)s, %(prev_hash)s, "
    "%(day)s, %(tz)s, %(received_at)s, %(received_by)s WHERE NOT EXISTS (SELECT 1 FROM quarantine q "
    "WHERE q.site = %(site)s AND q.table_id = %(table_id)s AND q.journal = %(journal)s "
    "AND q.seq = %(seq)s AND q.hash IS NOT DISTINCT FROM %(hash)s AND q.kind = %(kind)s "
    "AND q.classification = %(classification)s "
    "AND (NOT q.withheld OR q.prev_hash IS NOT DISTINCT FROM %(prev_hash)s))"
)

# A contest not settled yet: its seq has no row in events, and any copy that comes meanwhile joins
# the others in quarantine (controller/archive/chain.py: settle).
# The open contests, when there are few: the usual case, so a batch needs no join to find its own.
_CONTESTS_HERE = 1000
_OPEN_CONTESTS = (
    "SELECT DISTINCT site, table_id, journal, seq FROM quarantine "
    "WHERE reason = 'changed_hash' AND settled_at IS NULL LIMIT %s"
)
# Taken out of the staged batch in the same statement (the batch is staged by COPY first, so no
# array of its keys is sent).
_CONTESTED = (
    "DELETE FROM incoming i USING quarantine q WHERE q.site = i.site AND q.table_id = i.table_id "
    "AND q.journal = i.journal AND q.seq = i.seq AND q.reason = 'changed_hash' AND q.settled_at IS NULL "
    "RETURNING i.site, i.table_id, i.journal, i.seq"
)
# The first copy leaves events once a second, different one has come: neither is the row until
# the table's chain settles which is real.
_UNSEAT = (
    "DELETE FROM events WHERE site = %s AND table_id = %s AND journal = %s AND seq = %s "
    "AND NOT EXISTS (SELECT 1 FROM quarantine q WHERE q.site = %s AND q.table_id = %s "
    "AND q.journal = %s AND q.seq = %s AND q.settled_at IS NOT NULL)"
)
# A copy that comes after the chain settled its seq is a loser at once: the settled row stays.
_LATE = (
    "UPDATE quarantine SET settled_at = now(), chosen = false WHERE site = %s AND table_id = %s "
    "AND journal = %s AND seq = %s AND settled_at IS NULL AND EXISTS (SELECT 1 FROM quarantine q "
    "WHERE q.site = %s AND q.table_id = %s AND q.journal = %s AND q.seq = %s AND q.settled_at IS NOT NULL)"
)

Key = tuple[str, str, str, int]
_REMEMBERED = 100_000  # journals whose newest committed record a worker keeps in memory


@dataclass
class StoreResult:
    inserted: int = 0
    duplicates: int = 0
    dropped: int = 0  # not archived: an unknown table's, or quarantined
    alarms: list[ChainAlarm] = field(default_factory=list)


def _keys(keys: Iterable[Key]) -> list[list[Any]]:
    columns = list(zip(*keys, strict=True))
    return [list(c) for c in columns] if columns else [[], [], [], []]


class EventStore:
    def __init__(self, conn: psycopg.AsyncConnection[Any], worker: str = "") -> None:
        self.conn = conn
        self.worker = worker
        self._chained: set[tuple[str, str, str]] = set()  # (site, table, journal) in chain_state
        self._known: set[tuple[str, str]] = set()
        self._unknown_said: set[tuple[str, str]] = set()
        self._prepared = False
        # (site, table, journal) -> (seq, hash) of the newest record this worker committed.
        self._stored_last: dict[tuple[str, str, str], tuple[int, str | None]] = {}

    def _remember(self, stored: Iterable[ArchivedEvent]) -> None:
        """Keep the newest record of each journal this worker committed (its seq and hash; None
        when withheld): the next batch's first record of that journal links to it, usually."""
        if len(self._stored_last) > _REMEMBERED:
            self._stored_last.clear()
        last = self._stored_last
        for e in stored:
            chain = (e.site, e.table_id, e.journal)
            held = last.get(chain)
            if held is None or held[0] < e.seq:
                last[chain] = (e.seq, None if e.withheld else e.hash)

    async def register(self, tables: Iterable[tuple[str, str]], source: str) -> None:
        """Add tables to ``known_tables`` (those already there keep their source)."""
        rows = sorted(set(tables))
        if rows:
            async with self.conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO known_tables (site, table_id, source) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    [(site, table_id, source) for site, table_id in rows],
                )

    async def _unknown(
        self, cur: psycopg.AsyncCursor[Any], tables: set[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """Which of ``tables`` are not registered; asked of the database only for those not seen
        registered yet (another worker or an operator may have added one since)."""
        ask = tables - self._known
        if ask:
            sites, ids = zip(*sorted(ask), strict=True)
            await cur.execute(
                "SELECT k.site, k.table_id FROM unnest(%s::text[], %s::text[]) AS k(site, table_id) "
                "JOIN known_tables USING (site, table_id)",
                [list(sites), list(ids)],
            )
            self._known |= {(r[0], r[1]) for r in await cur.fetchall()}
        return tables - self._known

    async def store(self, events: Sequence[ArchivedEvent], refused: Sequence[ChainAlarm] = ()) -> StoreResult:
        """Archive what may be archived of ``events``; ``refused`` are the alarms for records the
        parser would not take (kept in chain_alarms with the rest, in the same transaction)."""
        result = StoreResult()
        conn = self.conn
        if not self._prepared:
            await conn.execute(_INCOMING)
            self._prepared = True
        async with conn.transaction(), conn.cursor() as cur:
            tables = {(e.site, e.table_id) for e in events} | {(a.site, a.table_id) for a in refused}
            unknown = await self._unknown(cur, tables) if tables else set()
            for a in refused:
                if (a.site, a.table_id) not in unknown:
                    result.alarms.append(a)
            unique: dict[Key, ArchivedEvent] = {}
            contenders: list[ArchivedEvent] = []
            for e in events:
                if (e.site, e.table_id) in unknown:
                    result.dropped += 1
                    if (e.site, e.table_id) not in self._unknown_said:
                        self._unknown_said.add((e.site, e.table_id))
                        result.alarms.append(alarms.unknown_table(e.site, e.table_id, e.seq))
                    continue
                seen = unique.setdefault(e.key, e)
                if seen is not e and not seen.same_record(e):
                    contenders.append(e)
            for a in refused:
                if (a.site, a.table_id) in unknown and (a.site, a.table_id) not in self._unknown_said:
                    self._unknown_said.add((a.site, a.table_id))
                    result.alarms.append(alarms.unknown_table(a.site, a.table_id, a.seq))
            await self._unlinked(cur, unique, result)
            inserted = 0
            contested = await self._open_contests(cur) if unique else set()
            if contested is not None:
                await self._while_contested(cur, unique, result, contested)
            if unique:
                lines = "".join([copy_line(e, self.worker) for e in unique.values()]).encode("utf-8")
                if contested is not None and await self._copy_new(cur, lines):
                    inserted = len(unique)
                else:
                    inserted = await self._staged(cur, unique, result, lines, contenders, contested is None)
            if contenders:
                await self._conflicts(cur, contenders, result)
            new_chains = {(e.site, e.table_id, e.journal) for e in unique.values()} - self._chained
            if new_chains:
                await cur.executemany(
                    "INSERT INTO chain_state (site, table_id, journal) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    sorted(new_chains),
                )
            await record_alarms(cur, result.alarms)
        self._chained |= new_chains
        if inserted == len(unique):
            self._remember(unique.values())
        result.inserted = inserted
        result.duplicates = len(events) - inserted - result.dropped
        return result

    async def _unlinked(
        self, cur: psycopg.AsyncCursor[Any], unique: dict[Key, ArchivedEvent], result: StoreResult
    ) -> None:
        """Take out of ``unique`` (into quarantine) each public record whose prev_hash is not the
        hash of the record before it as archived (in this batch, in events or in quarantine)."""
        linked = [e for e in unique.values() if e.prev_hash is not None]
        if not linked:
            return
        before: dict[Key, set[str | None]] = {}
        ask: set[Key] = set()
        for e in linked:
            key = (e.site, e.table_id, e.journal, e.seq - 1)
            mine = unique.get(key)
            if mine is not None:
                before.setdefault(key, set()).add(mine.hash if not mine.withheld else None)
            elif self._stored_last.get(key[:3]) not in ((key[3], e.prev_hash), (key[3], None)):
                # Else this worker committed the record before, and it is the one this links to
                # (or withheld): the archive's answer would be the same (a copy once archived
                # stays in events or in quarantine), so it is not asked.
                ask.add(key)
        if ask:
            columns = _keys(sorted(ask))
            await cur.execute(_LINKS, [*columns, *columns])
            for site, table_id, journal, seq, hash_, withheld in await cur.fetchall():
                before.setdefault((site, table_id, journal, seq), set()).add(None if withheld else hash_)
        for e in linked:
            known = before.get((e.site, e.table_id, e.journal, e.seq - 1))
            if not known or None in known or e.prev_hash in known:
                # Nothing archived to link to, or a withheld record there: the sweep and verify
                # see this link later.
                continue
            del unique[e.key]
            result.dropped += 1
            if not await self._quarantine(cur, e, "fork"):
                continue
            here = copy_of(e.hash, e.kind, e.received, self.worker)
            result.alarms.append(alarms.fork_on_arrival(e.site, e.table_id, e.seq, here, e.journal))

    async def _open_contests(self, cur: psycopg.AsyncCursor[Any]) -> set[Key] | None:
        """Every contested seq not settled yet (a handful, each raised as changed_hash); None when
        there are more than are worth bringing here (then the staged batch is joined with them)."""
        await cur.execute(_OPEN_CONTESTS, [_CONTESTS_HERE + 1])
        rows = await cur.fetchall()
        return None if len(rows) > _CONTESTS_HERE else {(r[0], r[1], r[2], r[3]) for r in rows}

    async def _copy_new(self, cur: psycopg.AsyncCursor[Any], lines: bytes) -> bool:
        """The batch by one COPY straight into events, as a bare COPY writes (PostgreSQL's batched
        heap insert): True when it went in whole; False when one of its records is archived already
        (a redelivery, another worker's copy), and nothing of it was written (its savepoint)."""
        try:
            async with self.conn.transaction(), cur.copy(f"COPY events ({COLUMNS}) FROM STDIN") as copy:
                await copy.write(lines)
        except psycopg.errors.UniqueViolation:
            return False
        return True

    async def _staged(
        self,
        cur: psycopg.AsyncCursor[Any],
        unique: dict[Key, ArchivedEvent],
        result: StoreResult,
        lines: bytes,
        contenders: list[ArchivedEvent],
        contests: bool,
    ) -> int:
        """The batch staged by one COPY, then set-based statements over it: the rows not archived
        yet inserted, and the skipped ones that are another record than the archived one added to
        ``contenders``; with ``contests``, the contested seqs are taken out first. The rows
        inserted."""
        async with cur.copy(f"COPY incoming ({COLUMNS}) FROM STDIN") as copy:
            await copy.write(lines)
        if contests:
            await self._while_contested(cur, unique, result, None)
        if not unique:
            return 0
        await cur.execute(_INSERT)
        inserted = max(cur.rowcount, 0)
        if inserted < len(unique):
            await cur.execute(_SKIPPED_OTHER)
            other = {(r[0], r[1], r[2], r[3]) for r in await cur.fetchall()}
            contenders += [e for k, e in unique.items() if k in other]
        return inserted

    async def _while_contested(
        self,
        cur: psycopg.AsyncCursor[Any],
        unique: dict[Key, ArchivedEvent],
        result: StoreResult,
        contested: set[Key] | None,
    ) -> None:
        """Take out of ``unique`` (into quarantine) each record whose seq is contested and not
        settled: a copy that comes meanwhile is kept with the others, never made the row.
        ``contested`` is every such seq; None: they are found by joining the staged batch, and
        taken out of it too."""
        if contested is None:
            await cur.execute(_CONTESTED)
            found: list[Key] = [(r[0], r[1], r[2], r[3]) for r in await cur.fetchall()]
        else:
            found = [k for k in unique if k in contested]
        for key in found:
            e = unique.pop(key)
            result.dropped += 1
            if await self._quarantine(cur, e, "changed_hash"):
                here = copy_of(e.hash, e.kind, e.received, self.worker)
                result.alarms.append(
                    alarms.changed(e.site, e.table_id, e.seq, "a contested record", here, e.journal)
                )

    async def _conflicts(
        self, cur: psycopg.AsyncCursor[Any], contenders: list[ArchivedEvent], result: StoreResult
    ) -> None:
        await cur.execute(_ARCHIVED, _keys([e.key for e in contenders]))
        archived = {(r[0], r[1], r[2], r[3]): r[4:] for r in await cur.fetchall()}
        for mine in contenders:
            row = archived.get(mine.key)
            if row is None:
                continue  # another worker's insert rolled back: it will come again
            hash_, kind, classification, withheld, link, received_at, received_by = row
            if [hash_, kind, classification, withheld, link] == [
                mine.hash,
                mine.kind,
                mine.classification,
                mine.withheld,
                mine.link,
            ]:
                continue  # a repeat of the archived record
            await cur.execute(_QUARANTINE_ARCHIVED, [*mine.key, *mine.key])
            await cur.execute(_UNSEAT, [*mine.key, *mine.key])
            if not await self._quarantine(cur, mine, "changed_hash"):
                continue  # this copy is in quarantine already: its alarm was raised
            await cur.execute(_LATE, [*mine.key, *mine.key])
            first = copy_of(hash_, kind, received_at, received_by)
            second = copy_of(mine.hash, mine.kind, mine.received, self.worker)
            result.alarms.append(
                alarms.changed(mine.site, mine.table_id, mine.seq, first, second, mine.journal)
            )

    async def _quarantine(self, cur: psycopg.AsyncCursor[Any], e: ArchivedEvent, reason: str) -> bool:
        """Keep ``e`` in quarantine; False when the same copy is there already."""
        await cur.execute(
            _QUARANTINE_NEW,
            {
                "site": e.site,
                "table_id": e.table_id,
                "journal": e.journal,
                "seq": e.seq,
                "reason": reason,
                "at": e.at,
                "kind": e.kind,
                "classification": e.classification,
                "withheld": e.withheld,
                "payload": e.payload_json,
                "hash": e.hash,
                "prev_hash": e.prev_hash,
                "day": e.day,
                "tz": e.tz,
                "received_at": e.received,
                "received_by": self.worker,
            },
        )
        return cur.rowcount > 0


async def record_alarms(cur: psycopg.AsyncCursor[Any], found: Sequence[ChainAlarm]) -> None:
    if found:
        await cur.executemany(
            "INSERT INTO chain_alarms (site, table_id, journal, seq, kind, detail) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [(a.site, a.table_id, a.journal, a.seq, a.kind, a.detail) for a in found],
        )
