"""The archive counts by the tables' gaming day (issue 26): each record in the day its table
stamped, from its own instant, withheld ones too, across a day boundary and a daylight-saving
change, in the views a dashboard reads and in ``archive report``."""

from __future__ import annotations

import json
import pathlib
from datetime import UTC, date, datetime
from typing import Any

import psycopg
import pytest

from controller.archive.messages import parse_event
from controller.archive.schema import migrate
from controller.archive.store import EventStore
from controller.cli import main
from controller.gaming_day import PENNSYLVANIA
from controller.journal import Classification, Journal
from controller.telemetry.outbox import JournalOutbox
from tests.archive.conftest import SITE, events_topic, payload_of, rows

P, S = Classification.PUBLIC, Classification.SECRET


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


# (UTC instant, kind, classification): Pennsylvania's gaming day turns at 06:00 local time.
RECORDS = [
    ("2026-10-31T09:59:00", "round_settled", P),  # 05:59 EDT: gaming day Oct 30
    ("2026-10-31T10:00:00", "round_settled", P),  # 06:00 EDT: Oct 31 begins
    ("2026-11-01T05:30:00", "card_burned", S),  # 01:30 EDT, the first of the two: Oct 31
    ("2026-11-01T06:30:00", "round_settled", P),  # 01:30 EST, the second 01:30: still Oct 31
    ("2026-11-01T10:30:00", "round_settled", P),  # 05:30 EST: Oct 31 (a fixed UTC-4 says Nov 1)
    ("2026-11-01T11:00:00", "card_burned", S),  # 06:00 EST: Nov 1 begins
    ("2026-11-01T11:01:00", "round_settled", P),
]


async def archive_journal(path: pathlib.Path, dsn: str, received: datetime) -> None:
    entries: list[tuple[str, dict[str, Any], Classification, float]] = [
        ("table_opened", payload_of("table_opened", 0), P, utc("2026-10-30T20:00:00"))
    ]  # payloads of each kind's own shape: the archive refuses any other
    entries += [(kind, payload_of(kind, i), cls, utc(at)) for i, (at, kind, cls) in enumerate(RECORDS)]
    with Journal.open(path) as journal:
        journal.append_many(entries)
    outbox = JournalOutbox(path, PENNSYLVANIA)
    try:
        bodies = [body for _, body in await outbox.encoded_after(0, 100)]
    finally:
        await outbox.close()
    events = [parse_event(events_topic("dst-01"), body, received) for body in bodies]
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await migrate(conn)
        store = EventStore(conn)
        await store.register([(SITE, "dst-01")], "the test")  # a registered table, as a floor's
        await store.store(events)


async def test_days_are_the_tables_gaming_days_across_the_dst_change(
    tmp_path: pathlib.Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Archived days later (a table that was offline): arrival decides nothing.
    await archive_journal(tmp_path / "j.db", db, received=datetime(2026, 11, 5, 12, tzinfo=UTC))
    by_day = rows(db, "SELECT day, rounds, events, withheld FROM archive_table_day ORDER BY day")
    assert by_day == [
        (date(2026, 10, 30), 1, 2, 0),  # table_opened and the 05:59 round
        (date(2026, 10, 31), 3, 4, 1),  # 25 hours: both 01:30s and the 05:30 EST round
        (date(2026, 11, 1), 1, 2, 1),
    ]
    # Every record has its own instant, the withheld ones and table_opened included.
    assert rows(db, "SELECT count(*) FROM events WHERE at IS NULL OR tz IS NULL") == [(0,)]
    hours = rows(db, "SELECT day, hour, rounds FROM archive_rounds_by_hour ORDER BY day, hour")
    assert hours == [
        (date(2026, 10, 30), 5, 1),
        (date(2026, 10, 31), 1, 1),  # 01:30 EST
        (date(2026, 10, 31), 5, 1),
        (date(2026, 10, 31), 6, 1),
        (date(2026, 11, 1), 6, 1),
    ]
    assert main(["archive", "report", "--db", db, "--day", "2026-10-31", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["day"] == "2026-10-31"
    assert [(t["site"], t["table"], t["rounds"], t["withheld"]) for t in report["tables"]] == [
        (SITE, "dst-01", 3, 1)
    ]
    # Without --day: the latest gaming day archived, not the archive host's date.
    assert main(["archive", "report", "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("archive report for gaming day 2026-11-01") and "dst-01" in out
