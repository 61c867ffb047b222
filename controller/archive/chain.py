"""Each table's chain, checked as its records arrive, by whichever worker holds the sweep lock.

Workers of a shared subscription each see only part of a table's stream, so no worker can check
links in memory. Instead every table has a watermark in ``chain_state``: all records up to
``checked_seq`` arrived (or their gap was raised) and each was linked to the one before it. A
sweep, run every second or so by one worker at a time (a transaction-level advisory lock),
walks each table's committed records past its watermark:

- the next record is there: where both the archived hash of the record before it and its own
  ``prev_hash`` are known, they must be equal, else ``fork``; the watermark moves on;
- the next record is missing: that is a gap, and most gaps fill within a moment (the other
  worker has the record in a batch not yet committed). Once the first record after it has been
  archived for ``gap_grace_s``, the gap is kept in ``gap_requests`` and the table is asked to
  publish the records again from its journal (``cmd/republish``, controller/archive/gaps.py),
  with backoff, until they come. The watermark waits at the gap meanwhile: the links across it
  are checked once it is filled. Only when the table answers that its journal does not hold them
  is the gap raised (``gap``) and the watermark moved past it; a gap still open after
  ``gap_alarm_s`` (a table that does not answer) is raised once while the asking goes on.
  A record held in quarantine that the archived record above links to is not missing: the
  settle step (controller/archive/settle.py) puts it into events, and the watermark waits at it
  without asking (the record above may be committed between the settle step and the walk).
  When the settle step takes a record out of events with nothing in its place, it moves the
  watermark back below it: the record is then missing, and asked for, like any other.

A withheld record has no published hash, so the link from it to the next record is not checked
here; ``tablectl archive verify`` checks it against the journal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from controller.archive import alarms
from controller.archive.alarms import ChainAlarm
from controller.archive.gaps import GapState, close_filled, load_gaps, open_gaps
from controller.archive.settle import settle
from controller.archive.store import record_alarms

_LOCK = 0x61726368  # any fixed key: the one advisory lock the sweep takes
_SETTLE_ROUNDS = 16  # contests settled one below another per sweep; the rest at the next sweep

_PENDING = """
SELECT c.site, c.table_id, c.journal, c.checked_seq, c.checked_hash, c.announced_seq,
       coalesce(now() - c.announced_at > make_interval(secs => %(grace)s), false) AS announced_overdue,
       e.seq, e.hash, e.prev_hash,
       now() - e.received_at > make_interval(secs => %(grace)s) AS overdue,
       -- The link is to a quarantined copy of the record before, or the copy the watermark
       -- checked is quarantined now (the chain settled it out of events): a contest its own
       -- alarm named, not another fork.
       EXISTS (SELECT 1 FROM quarantine q WHERE q.site = c.site AND q.table_id = c.table_id
               AND q.journal = c.journal AND q.seq = e.seq - 1
               AND q.hash IN (e.prev_hash, c.checked_hash)) AS links_quarantined,
       e.held
FROM chain_state c
LEFT JOIN LATERAL (
    SELECT seq, hash, prev_hash, received_at, false AS held FROM events e
    WHERE e.site = c.site AND e.table_id = c.table_id AND e.journal = c.journal AND e.seq > c.checked_seq
    UNION ALL
    -- A contested seq is there, its hash not settled yet: no gap, and the next link is not checked.
    -- One copy alone is no contest but a record the table's chain took out of events: the
    -- table's own copy is missing, and asked for like any other.
    SELECT q.seq, NULL, NULL, min(q.received_at), false FROM quarantine q
    WHERE q.site = c.site AND q.table_id = c.table_id AND q.journal = c.journal AND q.seq > c.checked_seq
      AND q.reason = 'changed_hash' AND q.settled_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM events x WHERE x.site = q.site AND x.table_id = q.table_id
                      AND x.journal = q.journal AND x.seq = q.seq)
    GROUP BY q.seq HAVING count(DISTINCT (q.hash, q.prev_hash, q.kind, q.classification)) > 1
    UNION ALL
    -- A copy held in quarantine that the archived record above links to (and that is no contest)
    -- is the table's own, which the settle step puts into events: this sweep's settle step looked
    -- before the record above was committed. Not missing: the walk waits at it, asking nothing.
    SELECT q.seq, NULL, NULL, min(q.received_at), true FROM quarantine q
    JOIN events n ON n.site = q.site AND n.table_id = q.table_id AND n.journal = q.journal
                 AND n.seq = q.seq + 1 AND n.prev_hash = q.hash
    WHERE q.site = c.site AND q.table_id = c.table_id AND q.journal = c.journal AND q.seq > c.checked_seq
      AND q.settled_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM events x WHERE x.site = q.site AND x.table_id = q.table_id
                      AND x.journal = q.journal AND x.seq = q.seq)
      AND NOT EXISTS (SELECT 1 FROM quarantine x WHERE x.site = q.site AND x.table_id = q.table_id
                      AND x.journal = q.journal AND x.reason = 'changed_hash' AND x.settled_at IS NULL
                      AND (x.seq = q.seq + 1 OR (x.seq = q.seq AND x.hash IS DISTINCT FROM q.hash)))
    GROUP BY q.seq
    ORDER BY seq LIMIT %(limit)s
) e ON true
WHERE e.seq IS NOT NULL OR c.announced_seq > c.checked_seq
ORDER BY c.site, c.table_id, c.journal, e.seq
"""

# Every moved watermark in one statement, however many tables moved.
_MOVE = """
UPDATE chain_state c SET checked_seq = m.seq, checked_hash = m.hash, updated_at = now()
FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::text[])
     AS m(site, table_id, journal, seq, hash)
WHERE c.site = m.site AND c.table_id = m.table_id AND c.journal = m.journal
"""

Chain = tuple[str, str, str]  # (site, table_id, journal)


class _Walk:
    """One journal's records past its watermark, in seq order."""

    def __init__(
        self,
        chain: Chain,
        checked_seq: int,
        checked_hash: str | None,
        gaps: dict[int, GapState],
    ) -> None:
        self.site, self.table_id, self.journal = chain
        self.seq, self.hash = checked_seq, checked_hash
        self.start = checked_seq
        self.gaps = gaps  # this journal's gaps being asked for, by first seq
        self.blocked = False  # an open gap: nothing after it is checked yet
        self.fed = 0  # records seen (the query reads at most `limit` of them)
        self.found: list[ChainAlarm] = []
        self.opened: list[tuple[int, int]] = []  # new gaps to ask for: (first, last)
        self.alarmed: list[int] = []  # gaps whose "still asking" alarm is raised now
        self.passed: list[int] = []  # gaps not in the table's journal, raised and moved past
        self.narrowed: list[tuple[int, int]] = []  # (old first, new first): its first records came

    def feed(
        self,
        seq: int,
        hash_: str | None,
        prev_hash: str | None,
        overdue: bool,
        links_quarantined: bool,
        held: bool = False,
    ) -> None:
        self.fed += 1
        if self.blocked:
            return
        if seq != self.seq + 1 and not self._missing(self.seq + 1, seq - 1, overdue):
            return
        if held:  # the table's copy, held for the settle step: its links are checked once it is in
            self.blocked = True
            return
        if (
            prev_hash is not None
            and self.hash is not None
            and prev_hash != self.hash
            and not links_quarantined
            and seq == self.seq + 1
        ):
            # (A link to a quarantined copy of the record before is the contest its changed_hash
            # alarm named already; the settle step, controller/archive/settle.py, decides it.)
            self.found.append(alarms.fork(self.site, self.table_id, seq, self.journal))
        self.seq, self.hash = seq, hash_

    def tail(self, announced_seq: int, overdue: bool) -> None:
        """The table said its broker confirmed records up to ``announced_seq``: those not here
        after the grace are a gap like any other, though no later record has come to show it."""
        if (
            not self.blocked
            and announced_seq > self.seq
            and self._missing(self.seq + 1, announced_seq, overdue)
        ):
            self.seq = announced_seq  # raised and moved past: the next record's link is not checked

    def _missing(self, first: int, last: int, overdue: bool) -> bool:
        """Records ``first``..``last`` are not here: True when the walk moves past them (the table
        said its journal does not hold them: raised), False when it waits at them."""
        # The gap asked for, even when its first records have come since (then it narrows).
        state = next((g for g in self.gaps.values() if g.first <= first <= g.last), None)
        if state is not None and state.first != first:
            self.narrowed.append((state.first, first))
        if state is not None and state.status == "not_in_journal":
            self.found.append(
                alarms.gap(self.site, self.table_id, first, last, in_journal=False, journal=self.journal)
            )
            self.passed.append(first)
            self.hash = None  # the record before the next one is unknown: its link cannot be checked
            return True
        self.blocked = True
        if state is None and overdue:
            self.opened.append((first, last))
        elif state is not None and state.overdue and not state.alarmed:
            self.found.append(
                alarms.gap(self.site, self.table_id, first, last, in_journal=True, journal=self.journal)
            )
            self.alarmed.append(first)
        return False


async def sweep(
    conn: psycopg.AsyncConnection[Any], *, gap_grace_s: float, gap_alarm_s: float = 120.0, limit: int = 20_000
) -> list[ChainAlarm]:
    """Check every journal's new records once; the alarms raised (already kept in chain_alarms).
    Set-based: one query reads every chain's pending records, one statement moves the watermarks.

    Returns [] at once when another worker is sweeping.
    """
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute("SELECT pg_try_advisory_xact_lock(%s)", (_LOCK,))
        row = await cur.fetchone()
        if row is None or not row[0]:
            return []
        # Top down: a contest whose next record was itself contested settles once that one has.
        await settle(cur, rounds=_SETTLE_ROUNDS)
        gaps = await load_gaps(cur, gap_alarm_s=gap_alarm_s)
        await cur.execute(_PENDING, {"grace": gap_grace_s, "limit": limit})
        walks: dict[Chain, _Walk] = {}
        tails: dict[Chain, tuple[int, bool]] = {}
        for (
            site,
            table_id,
            journal,
            checked_seq,
            checked_hash,
            announced,
            a_overdue,
            *record,
        ) in await cur.fetchall():
            chain = (site, table_id, journal)
            walk = walks.get(chain)
            if walk is None:
                walk = walks[chain] = _Walk(chain, checked_seq, checked_hash, gaps.get(chain, {}))
                tails[chain] = (announced, a_overdue)
            if record[0] is not None:
                walk.feed(*record)
        for chain, walk in walks.items():
            if walk.fed < limit:  # else there are records past what this sweep read
                walk.tail(*tails[chain])
        moved = [w for w in walks.values() if w.seq != w.start]
        if moved:
            columns = [[getattr(w, f) for w in moved] for f in ("site", "table_id", "journal", "seq", "hash")]
            await cur.execute(_MOVE, columns)
        await open_gaps(
            cur,
            opened=[(w.site, w.table_id, w.journal, f, last) for w in walks.values() for f, last in w.opened],
            alarmed=[(w.site, w.table_id, w.journal, f) for w in walks.values() for f in w.alarmed],
            passed=[(w.site, w.table_id, w.journal, f) for w in walks.values() for f in w.passed],
            narrowed=[
                (w.site, w.table_id, w.journal, old, new) for w in walks.values() for old, new in w.narrowed
            ],
        )
        await close_filled(cur, [(w.site, w.table_id, w.journal, w.seq) for w in moved])
        found = [a for w in walks.values() for a in w.found]
        await record_alarms(cur, found)
        return found


async def announce(conn: psycopg.AsyncConnection[Any], marks: Sequence[tuple[str, str, str, int]]) -> None:
    """Keep what tables announced, (site, table, journal, published_seq), in one statement: the
    sweep then treats records up to it that never came as a gap. Only registered tables' journals
    get a chain this way; announced_at moves only when the announced seq does, so the grace
    counts from when the record was first said to be confirmed."""
    latest: dict[Chain, int] = {}
    for site, table_id, journal, seq in marks:
        latest[(site, table_id, journal)] = max(seq, latest.get((site, table_id, journal), 0))
    if not latest:
        return
    columns = [list(c) for c in zip(*((*k, v) for k, v in latest.items()), strict=True)]
    await conn.execute(
        "INSERT INTO chain_state AS c (site, table_id, journal, announced_seq, announced_at) "
        "SELECT k.site, k.table_id, k.journal, k.seq, now() "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) AS k(site, table_id, journal, seq) "
        "JOIN known_tables USING (site, table_id) "
        "ON CONFLICT (site, table_id, journal) DO UPDATE "
        "SET announced_seq = EXCLUDED.announced_seq, announced_at = now() "
        "WHERE c.announced_seq < EXCLUDED.announced_seq",
        columns,
    )
