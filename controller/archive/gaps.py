"""Gaps that close themselves: the archive asks the table to publish missing records again.

A broker can acknowledge a record to a table and then lose it (mosquitto 2.0 does not restore a
shared subscription after a restart, docs/scale-out.md), and the table's outbox never sends an
acknowledged record twice. The records are still in the table's journal, so the chain sweep
(controller/archive/chain.py) keeps each gap it finds in ``gap_requests`` and the worker that
holds the sweep lock sends ``cmd/republish`` for each gap that is due, with backoff, until the
records come (the gap is then ``filled``) or the table answers that its journal does not hold
them (``not_in_journal``: the next sweep raises the gap and moves past it).

Every worker subscribes to the answers (a plain subscription, QoS 0: an answer lost is asked for
again at the next ask); applying one is idempotent, so it does not matter which worker does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from controller.actions import ARCHIVE, MAX_REPUBLISH
from controller.bounded import MAX_MESSAGE_BYTES, InputRefused, load_json
from controller.telemetry.payloads import PAYLOAD_VERSION
from controller.telemetry.topics import ROOT, TableTopics, parse_topic

COMMAND = "republish"
RESULTS = f"{ROOT}/+/+/cmd/{COMMAND}/result"  # every table's answers, for every worker
# Where every table's journal stands: its retained birth and its heartbeat (docs/mqtt.md).
ANNOUNCEMENTS = (f"{ROOT}/+/+/status", f"{ROOT}/+/+/heartbeat")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True, slots=True)
class GapState:
    first: int
    last: int
    status: str  # asking | not_in_journal
    alarmed: bool
    overdue: bool  # open longer than gap_alarm_s


@dataclass(frozen=True, slots=True)
class Ask:
    site: str
    table_id: str
    first: int
    last: int
    asks: int  # this one included
    journal: str = ""  # the journal the records are of: a table on another one answers "not in journal"

    @property
    def topic(self) -> str:
        return TableTopics(self.site, self.table_id).command(COMMAND)

    def message(self, who: str) -> bytes:
        return json.dumps(
            {
                "version": PAYLOAD_VERSION,
                "id": f"gap-{self.first}-{self.last}-{self.asks}",
                "who": who,
                "role": ARCHIVE,
                "args": {
                    "from_seq": self.first,
                    "to_seq": self.last,
                    **({"journal": self.journal} if self.journal else {}),
                },
            }
        ).encode("utf-8")


async def load_gaps(
    cur: psycopg.AsyncCursor[Any], *, gap_alarm_s: float
) -> dict[tuple[str, str, str], dict[int, GapState]]:
    await cur.execute(
        "SELECT site, table_id, journal, first_seq, last_seq, status, alarmed, "
        "now() - opened_at > make_interval(secs => %s) "
        "FROM gap_requests WHERE status IN ('asking', 'not_in_journal')",
        (gap_alarm_s,),
    )
    out: dict[tuple[str, str, str], dict[int, GapState]] = {}
    for site, table_id, journal, first, last, status, alarmed, overdue in await cur.fetchall():
        out.setdefault((site, table_id, journal), {})[first] = GapState(first, last, status, alarmed, overdue)
    return out


async def open_gaps(
    cur: psycopg.AsyncCursor[Any],
    *,
    opened: Sequence[tuple[str, str, str, int, int]],
    alarmed: Sequence[tuple[str, str, str, int]],
    passed: Sequence[tuple[str, str, str, int]],
    narrowed: Sequence[tuple[str, str, str, int, int]] = (),
) -> None:
    """Keep what one sweep found (each chain named by site, table, journal): new gaps to ask for,
    alarms raised, gaps moved past, and gaps whose first records came (``narrowed``: old first,
    new first), which stay the same request with the same backoff."""
    if narrowed:
        await cur.executemany(
            "UPDATE gap_requests SET first_seq = %s WHERE site = %s AND table_id = %s AND journal = %s "
            "AND first_seq = %s",
            [(new, site, table, journal, old) for site, table, journal, old, new in narrowed],
        )
    if opened:
        await cur.executemany(
            "INSERT INTO gap_requests (site, table_id, journal, first_seq, last_seq) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (site, table_id, journal, first_seq) DO UPDATE "
            "SET last_seq = EXCLUDED.last_seq, status = 'asking', asks = 0, alarmed = false, "
            "opened_at = now(), next_ask_at = now(), closed_at = NULL",
            opened,
        )
    if alarmed:
        await cur.executemany(
            "UPDATE gap_requests SET alarmed = true WHERE site = %s AND table_id = %s AND journal = %s "
            "AND first_seq = %s",
            alarmed,
        )
    if passed:
        await cur.executemany(
            "UPDATE gap_requests SET status = 'lost', closed_at = now() "
            "WHERE site = %s AND table_id = %s AND journal = %s AND first_seq = %s",
            passed,
        )


async def close_filled(
    cur: psycopg.AsyncCursor[Any], watermarks: Sequence[tuple[str, str, str, int]]
) -> None:
    """Gaps below a chain's new watermark came in full (one statement for every chain)."""
    if watermarks:
        await cur.execute(
            "UPDATE gap_requests g SET status = 'filled', closed_at = now() "
            "FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) "
            "AS w(site, table_id, journal, seq) "
            "WHERE g.site = w.site AND g.table_id = w.table_id AND g.journal = w.journal "
            "AND g.first_seq <= w.seq AND g.status IN ('asking', 'not_in_journal')",
            [list(c) for c in zip(*watermarks, strict=True)],
        )


async def due(
    conn: psycopg.AsyncConnection[Any], *, initial_s: float, max_s: float, limit: int = 500
) -> list[Ask]:
    """The gaps whose next request is due, each counted as asked once more (backoff doubling from
    ``initial_s`` to ``max_s``). At most MAX_REPUBLISH records a request: the rest of a longer
    gap is asked for once the first part has come."""
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(
            "UPDATE gap_requests SET asks = asks + 1, next_ask_at = now() + "
            "make_interval(secs => least(%(max)s, %(initial)s * power(2, asks))) "
            "WHERE (site, table_id, journal, first_seq) IN ("
            " SELECT site, table_id, journal, first_seq FROM gap_requests"
            " WHERE status = 'asking' AND next_ask_at <= now() ORDER BY next_ask_at LIMIT %(limit)s"
            " FOR UPDATE SKIP LOCKED) "
            "RETURNING site, table_id, first_seq, last_seq, asks, journal",
            {"initial": initial_s, "max": max_s, "limit": limit},
        )
        rows = await cur.fetchall()
    return [Ask(s, t, f, min(last, f + MAX_REPUBLISH - 1), n, j) for s, t, f, last, n, j in rows]


@dataclass(frozen=True, slots=True)
class Answer:
    """A table's answer that records are not in its journal."""

    site: str
    table_id: str
    missing_from: int
    missing_to: int
    journal: str = ""  # the journal asked about, as the table echoes it


def parse_answer(topic: str, body: bytes) -> Answer | None:
    """The table's "not in my journal" from a republish result; None for anything else."""
    levels = topic.split("/")
    if len(levels) != 6 or levels[0] != ROOT or levels[3:] != ["cmd", COMMAND, "result"]:
        return None
    try:
        doc = load_json(body, max_bytes=MAX_MESSAGE_BYTES)
    except InputRefused:
        return None
    if not isinstance(doc, dict) or doc.get("ok") is not False:
        return None
    first, last = doc.get("missing_from"), doc.get("missing_to")
    if type(first) is not int or type(last) is not int or not 1 <= first <= last:
        return None
    journal = doc.get("journal", "")
    if not isinstance(journal, str):
        return None
    return Answer(levels[1], levels[2], first, last, journal)


async def not_in_journal(conn: psycopg.AsyncConnection[Any], answer: Answer) -> None:
    """The table does not hold ``missing_from``..``missing_to``: stop asking for them, and the
    sweep raises them. A gap that starts before them keeps asking for its head (the table sent
    those records, which may not be committed yet) and its tail becomes a gap of its own."""
    key = (answer.site, answer.table_id, answer.journal)
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(
            "UPDATE gap_requests SET status = 'not_in_journal' WHERE site = %s AND table_id = %s "
            "AND journal = %s AND status = 'asking' AND first_seq BETWEEN %s AND %s",
            (*key, answer.missing_from, answer.missing_to),
        )
        await cur.execute(
            "UPDATE gap_requests SET last_seq = %s WHERE site = %s AND table_id = %s AND journal = %s "
            "AND status = 'asking' AND first_seq < %s AND last_seq >= %s RETURNING last_seq",
            (answer.missing_from - 1, *key, answer.missing_from, answer.missing_from),
        )
        if await cur.fetchall():
            await cur.execute(
                "INSERT INTO gap_requests (site, table_id, journal, first_seq, last_seq, status) "
                "VALUES (%s, %s, %s, %s, %s, 'not_in_journal') "
                "ON CONFLICT (site, table_id, journal, first_seq) "
                "DO UPDATE SET status = 'not_in_journal', closed_at = NULL",
                (*key, answer.missing_from, answer.missing_to),
            )


async def open_count(conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute("SELECT count(*) FROM gap_requests WHERE status IN ('asking', 'not_in_journal')")
    row = await cur.fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True, slots=True)
class Announcement:
    """A table's word on how far its broker confirmed its journal (``published_seq``)."""

    site: str
    table_id: str
    journal: str
    published_seq: int


def parse_announcement(topic: str, body: bytes) -> Announcement | None:
    """A birth (status, online) or heartbeat's ``journal`` mark; None for anything else."""
    parsed = parse_topic(topic)
    if parsed is None or parsed.leaf not in ("status", "heartbeat"):
        return None
    try:
        doc = load_json(body, max_bytes=MAX_MESSAGE_BYTES)
    except InputRefused:
        return None
    if not isinstance(doc, dict) or (parsed.leaf == "status" and doc.get("online") is not True):
        return None
    mark = doc.get("journal")
    if not isinstance(mark, dict):
        return None
    seq, journal = mark.get("published_seq"), mark.get("id", "")
    if type(seq) is not int or not 0 <= seq < 2**62:
        return None
    if journal != "" and (not isinstance(journal, str) or not _HEX64.match(journal)):
        return None
    return Announcement(parsed.site, parsed.table, journal, seq)
