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

A withheld record has no published hash, so the link from it to the next record is not checked
here; ``tablectl archive verify`` checks it against the journal.
"""

from __future__ import annotations

from typing import Any

import psycopg

from controller.archive import alarms
from controller.archive.alarms import ChainAlarm
from controller.archive.gaps import GapState, close_filled, load_gaps, open_gaps
from controller.archive.store import record_alarms

_LOCK = 0x61726368  # any fixed key: the one advisory lock the sweep takes

_PENDING = """
SELECT c.site, c.table_id, c.checked_seq, c.checked_hash, e.seq, e.hash, e.prev_hash,
       now() - e.received_at > make_interval(secs => %(grace)s) AS overdue,
       EXISTS (SELECT 1 FROM quarantine q WHERE q.site = c.site AND q.table_id = c.table_id
               AND q.seq = e.seq - 1 AND q.hash = e.prev_hash) AS links_quarantined
FROM chain_state c
JOIN LATERAL (
    SELECT seq, hash, prev_hash, received_at FROM events e
    WHERE e.site = c.site AND e.table_id = c.table_id AND e.seq > c.checked_seq
    ORDER BY seq LIMIT %(limit)s
) e ON true
ORDER BY c.site, c.table_id, e.seq
"""


class _Walk:
    """One table's records past its watermark, in seq order."""

    def __init__(
        self, site: str, table_id: str, checked_seq: int, checked_hash: str | None, gaps: dict[int, GapState]
    ) -> None:
        self.site, self.table_id = site, table_id
        self.seq, self.hash = checked_seq, checked_hash
        self.start = checked_seq
        self.gaps = gaps  # this table's gaps being asked for, by first seq
        self.blocked = False  # an open gap: nothing after it is checked yet
        self.found: list[ChainAlarm] = []
        self.opened: list[tuple[int, int]] = []  # new gaps to ask for: (first, last)
        self.alarmed: list[int] = []  # gaps whose "still asking" alarm is raised now
        self.passed: list[int] = []  # gaps not in the table's journal, raised and moved past
        self.narrowed: list[tuple[int, int]] = []  # (old first, new first): its first records came

    def feed(
        self, seq: int, hash_: str | None, prev_hash: str | None, overdue: bool, links_quarantined: bool
    ) -> None:
        if self.blocked:
            return
        if seq != self.seq + 1:
            first, last = self.seq + 1, seq - 1
            # The gap asked for, even when its first records have come since (then it narrows).
            state = next((g for g in self.gaps.values() if g.first <= first <= g.last), None)
            if state is not None and state.first != first:
                self.narrowed.append((state.first, first))
            if state is not None and state.status == "not_in_journal":
                self.found.append(alarms.gap(self.site, self.table_id, first, last, in_journal=False))
                self.passed.append(first)
                self.hash = None  # the record before this one is unknown: its link cannot be checked
            else:
                self.blocked = True
                if state is None and overdue:
                    self.opened.append((first, last))
                elif state is not None and state.overdue and not state.alarmed:
                    self.found.append(alarms.gap(self.site, self.table_id, first, last, in_journal=True))
                    self.alarmed.append(first)
                return
        elif (
            prev_hash is not None
            and self.hash is not None
            and prev_hash != self.hash
            and not links_quarantined
        ):
            # (A link to a quarantined copy of the record before is the contest its changed_hash
            # alarm named already; archive verify says which copy the journal holds.)
            self.found.append(alarms.fork(self.site, self.table_id, seq))
        self.seq, self.hash = seq, hash_


async def sweep(
    conn: psycopg.AsyncConnection[Any], *, gap_grace_s: float, gap_alarm_s: float = 120.0, limit: int = 20_000
) -> list[ChainAlarm]:
    """Check every table's new records once; the alarms raised (already kept in chain_alarms).

    Returns [] at once when another worker is sweeping.
    """
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute("SELECT pg_try_advisory_xact_lock(%s)", (_LOCK,))
        row = await cur.fetchone()
        if row is None or not row[0]:
            return []
        gaps = await load_gaps(cur, gap_alarm_s=gap_alarm_s)
        await cur.execute(_PENDING, {"grace": gap_grace_s, "limit": limit})
        walks: dict[tuple[str, str], _Walk] = {}
        for site, table_id, checked_seq, checked_hash, *record in await cur.fetchall():
            walk = walks.get((site, table_id))
            if walk is None:
                table_gaps = gaps.get((site, table_id), {})
                walk = walks[(site, table_id)] = _Walk(site, table_id, checked_seq, checked_hash, table_gaps)
            walk.feed(*record)
        moved = [w for w in walks.values() if w.seq != w.start]
        if moved:
            await cur.executemany(
                "UPDATE chain_state SET checked_seq = %s, checked_hash = %s, updated_at = now() "
                "WHERE site = %s AND table_id = %s",
                [(w.seq, w.hash, w.site, w.table_id) for w in moved],
            )
        await open_gaps(
            cur,
            opened=[(w.site, w.table_id, f, last) for w in walks.values() for f, last in w.opened],
            alarmed=[(w.site, w.table_id, f) for w in walks.values() for f in w.alarmed],
            passed=[(w.site, w.table_id, f) for w in walks.values() for f in w.passed],
            narrowed=[(w.site, w.table_id, old, new) for w in walks.values() for old, new in w.narrowed],
        )
        await close_filled(cur, [(w.site, w.table_id, w.seq) for w in moved])
        found = [a for w in walks.values() for a in w.found]
        await record_alarms(cur, found)
        return found
