"""What every archive worker does between batches, whatever carries its events (MQTT or a
JetStream cluster): apply the tables' answers to republish requests, sweep the chains, and say
which gaps to ask for now. One implementation, called by both workers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
import structlog

from controller.archive import gaps
from controller.archive.alarms import ChainAlarm
from controller.archive.chain import announce, sweep

log = structlog.get_logger("tablectl.archive")


async def upkeep(
    conn: psycopg.AsyncConnection[Any],
    answers: Iterable[tuple[str, bytes]],
    *,
    gap_grace_s: float,
    gap_alarm_s: float,
    ask_initial_s: float,
    ask_max_s: float,
) -> tuple[list[ChainAlarm], list[gaps.Ask]]:
    """(alarms raised, requests due); ``answers`` are (MQTT topic, body) of republish results and
    of the tables' announcements (birth, heartbeat)."""
    marks: list[tuple[str, str, str, int]] = []
    for topic, body in answers:
        mark = gaps.parse_announcement(topic, body)
        if mark is not None:
            if mark.published_seq > 0:
                marks.append((mark.site, mark.table_id, mark.journal, mark.published_seq))
            continue
        answer = gaps.parse_answer(topic, body)
        if answer is not None:
            log.warning(
                "archive.gap_not_in_journal",
                site=answer.site,
                table=answer.table_id,
                first=answer.missing_from,
                last=answer.missing_to,
            )
            await gaps.not_in_journal(conn, answer)
    await announce(conn, marks)
    found = await sweep(conn, gap_grace_s=gap_grace_s, gap_alarm_s=gap_alarm_s)
    asks = await gaps.due(conn, initial_s=ask_initial_s, max_s=ask_max_s)
    for ask in asks:
        log.info(
            "archive.gap_republish_asked",
            site=ask.site,
            table=ask.table_id,
            first=ask.first,
            last=ask.last,
            asks=ask.asks,
        )
    return found, asks
