"""Which copy of a quarantined record is the table's: settled by the table's own chain.

A record that two copies claim, or one that did not link to what was archived when it came,
waits in ``quarantine``. The table's chain goes on from exactly one copy of each record, so the
archive settles by it, from the top down, in the sweep (one worker at a time, inside the sweep's
transaction), with no ``archive verify`` and nothing asked of anyone:

- *the record above links to a copy*: the row in ``events`` above a quarantined seq (itself not
  contested) names the hash of the record before it (its ``prev_hash``; a withheld record's
  placeholder names it too when the record before is public). The copy with that hash is the row
  in ``events``; every copy of the seq is settled, ``chosen`` the one linked to. A row there
  that the record above does not link to leaves ``events`` (kept as a copy): if the table's own
  copy has not come yet, the seq waits as an open contest, so a forgery never stays the row
  however the records were ordered on the way; the record is then missing like any other, and
  the chain's watermark goes back below it (it may have checked the row that left already): the
  sweep asks the table for it (``cmd/republish``, controller/archive/gaps.py) whichever of the
  records came first. A seq settled once is settled again the same way
  when the row above it changes (a forged next record that settled it, overturned by the table's
  chain);
- *a quarantined record links to a copy below*: a record quarantined because its ``prev_hash``
  was not the hash of the row archived before it (a forgery of that record sent ahead, the
  table's own copy delayed) goes into ``events`` once exactly one such record links to a copy
  now held of the record before, as it would have on arrival.

Each round settles one level; the sweep runs rounds until nothing moves (at most ``rounds``),
and the rest waits for the next sweep.
"""

from __future__ import annotations

from typing import Any

import psycopg

_K = "site = %s AND table_id = %s AND journal = %s AND seq = %s"
_RECORD = "at, kind, classification, withheld, payload, hash, prev_hash, day, tz, received_at, received_by"

# Seqs the record above decides: each with copies waiting, and each below a chosen copy (the row
# above changed since it settled it). The row above must carry a link and not be contested itself.
_LINKED = """
WITH cand AS (
    SELECT site, table_id, journal, seq FROM quarantine WHERE settled_at IS NULL
    UNION SELECT site, table_id, journal, seq - 1 FROM quarantine WHERE chosen
)
SELECT * FROM (
SELECT c.site, c.table_id, c.journal, c.seq, cur.hash, cur.withheld, nxt.prev_hash,
       EXISTS (SELECT 1 FROM quarantine q WHERE q.site = c.site AND q.table_id = c.table_id
               AND q.journal = c.journal AND q.seq = c.seq AND q.settled_at IS NULL) AS waiting
FROM cand c
JOIN events nxt ON nxt.site = c.site AND nxt.table_id = c.table_id AND nxt.journal = c.journal
               AND nxt.seq = c.seq + 1 AND nxt.prev_hash IS NOT NULL
LEFT JOIN events cur ON cur.site = c.site AND cur.table_id = c.table_id AND cur.journal = c.journal
                    AND cur.seq = c.seq
WHERE NOT EXISTS (SELECT 1 FROM quarantine x WHERE x.site = c.site AND x.table_id = c.table_id
                  AND x.journal = c.journal AND x.seq = c.seq + 1 AND x.reason = 'changed_hash'
                  AND x.settled_at IS NULL)
) d WHERE (waiting OR hash IS DISTINCT FROM prev_hash) AND withheld IS NOT TRUE
ORDER BY site, table_id, journal, seq DESC
LIMIT 1000
"""

# Records quarantined for not linking, with no row at their seq, that now link to a copy held of
# the record before (the row in events or a quarantined copy); only where exactly one hash does.
_FORKS = """
SELECT min(q.id), q.site, q.table_id, q.journal, q.seq FROM quarantine q
WHERE q.reason = 'fork' AND q.settled_at IS NULL AND q.prev_hash IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.site = q.site AND e.table_id = q.table_id
                  AND e.journal = q.journal AND e.seq = q.seq)
  AND NOT EXISTS (SELECT 1 FROM quarantine x WHERE x.site = q.site AND x.table_id = q.table_id
                  AND x.journal = q.journal AND x.seq = q.seq AND x.reason = 'changed_hash'
                  AND x.settled_at IS NULL)
  AND (EXISTS (SELECT 1 FROM events b WHERE b.site = q.site AND b.table_id = q.table_id
               AND b.journal = q.journal AND b.seq = q.seq - 1 AND b.hash = q.prev_hash)
       OR EXISTS (SELECT 1 FROM quarantine b WHERE b.site = q.site AND b.table_id = q.table_id
                  AND b.journal = q.journal AND b.seq = q.seq - 1 AND b.hash = q.prev_hash))
GROUP BY q.site, q.table_id, q.journal, q.seq
HAVING count(DISTINCT q.hash) = 1
LIMIT 1000
"""

_RESTORE = (
    "INSERT INTO events (site, table_id, journal, seq, day, at, kind, classification, withheld, payload, "
    "hash, prev_hash, tz, received_at, received_by) "
    "SELECT site, table_id, journal, seq, "
    "coalesce(day, (to_timestamp(coalesce(at, 0)) AT TIME ZONE 'UTC')::date), at, kind, classification, "
    "withheld, payload, hash, prev_hash, tz, received_at, received_by FROM quarantine WHERE id = %s "
    "ON CONFLICT DO NOTHING"
)
# The row leaving events is kept as a copy (once: a copy with its hash may be there already).
_KEEP_ROW = (
    f"INSERT INTO quarantine (site, table_id, journal, seq, reason, archived, {_RECORD}) "
    f"SELECT site, table_id, journal, seq, 'changed_hash', true, {_RECORD} FROM events e WHERE {_K} "
    "AND NOT EXISTS (SELECT 1 FROM quarantine q WHERE q.site = e.site AND q.table_id = e.table_id "
    "AND q.journal = e.journal AND q.seq = e.seq AND q.hash IS NOT DISTINCT FROM e.hash)"
)

# A row left events and nothing took its place: the records from it on are not all there, so the
# watermark (controller/archive/chain.py) goes back to the record before it, whose hash the walk
# then links from, as it would have on its first way past (the genesis link for record 1).
_REWIND = (
    "UPDATE chain_state c SET checked_seq = %(seq)s - 1, updated_at = now(), checked_hash = coalesce("
    "(SELECT e.hash FROM events e WHERE e.site = c.site AND e.table_id = c.table_id "
    "AND e.journal = c.journal AND e.seq = %(seq)s - 1), "
    "CASE WHEN %(seq)s = 1 THEN repeat('0', 64) END) "
    "WHERE c.site = %(site)s AND c.table_id = %(table_id)s AND c.journal = %(journal)s "
    "AND c.checked_seq >= %(seq)s"
)


async def settle(cur: psycopg.AsyncCursor[Any], *, rounds: int = 16) -> int:
    """Settle what the tables' chains decide; how many seqs moved."""
    moved = 0
    for _ in range(rounds):
        step = await _forks(cur) + await _linked(cur)
        if not step:
            break
        moved += step
    return moved


async def _forks(cur: psycopg.AsyncCursor[Any]) -> int:
    await cur.execute(_FORKS)
    found = await cur.fetchall()
    for copy_id, *key in found:
        await cur.execute(_RESTORE, (copy_id,))
        await cur.execute(
            f"UPDATE quarantine SET settled_at = now(), chosen = true WHERE {_K} AND settled_at IS NULL "
            "AND hash = (SELECT hash FROM quarantine WHERE id = %s)",
            (*key, copy_id),
        )
    return len(found)


async def _linked(cur: psycopg.AsyncCursor[Any]) -> int:
    await cur.execute(_LINKED)
    moved: set[tuple[str, str, str, int]] = set()
    for site, table_id, journal, seq, current, _withheld, link, waiting in await cur.fetchall():
        key = (site, table_id, journal, seq)
        if (site, table_id, journal, seq + 1) in moved:
            continue  # the row above changed in this round: its new link is read in the next
        if current == link:
            if waiting:  # the row is the one linked to: the copies waiting are settled by it
                await cur.execute(
                    f"UPDATE quarantine SET settled_at = now(), chosen = hash IS NOT DISTINCT FROM %s "
                    f"WHERE {_K} AND settled_at IS NULL",
                    (link, *key),
                )
                moved.add(key)
            continue
        await cur.execute(
            f"SELECT id FROM quarantine WHERE {_K} AND hash = %s ORDER BY received_at, id LIMIT 1",
            (*key, link),
        )
        won = await cur.fetchone()
        if current is None and won is None:
            continue  # the table's copy has not come: the seq keeps waiting
        if current is not None:
            # The row there is not the record the table's chain goes on from: kept, not the row.
            await cur.execute(_KEEP_ROW, key)
            await cur.execute(f"DELETE FROM events WHERE {_K}", key)
        if won is None:
            # Not come yet: the seq is an open contest until it does (a copy that comes then waits
            # with the others, and the chain settles it as above), and missing till then: the
            # sweep's walk comes back to it and asks for it, however far it had gone.
            await cur.execute(_REWIND, {"site": site, "table_id": table_id, "journal": journal, "seq": seq})
            await cur.execute(
                f"UPDATE quarantine SET settled_at = NULL, chosen = NULL, "
                f"reason = CASE WHEN hash IS NOT DISTINCT FROM %s THEN 'changed_hash' ELSE reason END "
                f"WHERE {_K}",
                (current, *key),
            )
        else:
            await cur.execute(_RESTORE, (won[0],))
            await cur.execute(
                f"UPDATE quarantine SET settled_at = now(), chosen = (hash = %s) WHERE {_K}", (link, *key)
            )
        moved.add(key)
    return len(moved)
