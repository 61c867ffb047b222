"""A gaming day of a small floor, archived: real tables (the core through its journal, played by
the virtual table), their events messages as the telemetry writes them, parsed and stored by the
archive's own code in a real PostgreSQL. Dealers change mid-day; the shoe fails once (a halting
alarm, cleared when it is back) and the keypad loses keys once (an alarm the floor acknowledges
later). Used by the HTML report's tests and by tests/support/report_screenshot.py."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, date, datetime
from pathlib import Path

import psycopg

from controller.archive.messages import parse_event
from controller.archive.schema import migrate
from controller.archive.store import EventStore
from controller.game_config import default_options
from controller.gaming_day import PENNSYLVANIA
from controller.table import inputs as I
from controller.table.recorder import JournaledTable
from controller.table.virtual import VirtualTable
from controller.telemetry.outbox import JournalOutbox
from controller.telemetry.topics import TableTopics

SITE = "example-floor"
DAY = date(2026, 11, 20)
# (table, game, dealers in turn, seed, seconds idle between rounds)
TABLES = [
    ("dub-01", "down-under", ("ann", "bob"), 1, 120.0),
    ("dab-01", "double-attack", ("carla", "dev"), 2, 200.0),
    ("dbj-01", "double-back-jack", ("erin", "finn"), 3, 160.0),
]


def play(
    path: Path, table_id: str, game: str, dealers: tuple[str, ...], seed: int, idle_s: float, rounds: int
) -> None:
    opened = PENNSYLVANIA.start_of(DAY) + 1800 * seed  # the tables open through the morning
    recorder = JournaledTable.open(path, default_options(game), table_id, now=opened)
    vt = VirtualTable(default_options(game), random.Random(seed), seats=3, recorder=recorder, now=opened)
    try:
        vt.open_table()
        vt.feed(I.NewDealer(name=dealers[0]))
        for i in range(rounds):
            if i == rounds // 2:
                vt.feed(I.NewDealer(name=dealers[1]))  # the break: the second dealer takes over
            if i == rounds // 3 and seed == 1:
                vt.feed(I.DeviceFailed(device="shoe", reason="no answer"))  # 7(a): dealing halts
                vt.now += 900
                vt.feed(I.DeviceBack(device="shoe"))  # back a quarter of an hour later
            if i == 2 * rounds // 3 and seed == 2:
                vt.feed(I.DeviceGap(device="keypad", what="keys", reason="counter reset", unaccounted=2))
                alarm = max(vt.table.alarms)
                vt.now += 1500
                vt.feed(I.AlarmAcknowledged(alarm=alarm, by="floor-1"))
            vt.play_round()
            vt.now += idle_s
    finally:
        recorder.close()


async def archive(paths: dict[str, Path], dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await migrate(conn)
        store = EventStore(conn)
        # Registered tables, as a floor's are (the archive keeps no rows of an unknown one).
        await store.register([(SITE, table_id) for table_id in paths], "the floor's day")
        for table_id, path in paths.items():
            outbox = JournalOutbox(path, PENNSYLVANIA)
            try:
                bodies = [body for _, body in await outbox.encoded_after(0, 1_000_000)]
            finally:
                await outbox.close()
            topic = TableTopics(SITE, table_id).events
            # Arrival time does not matter: every message carries its table's instant and day.
            received = datetime.now(UTC)
            await store.store([parse_event(topic, body, received) for body in bodies])


def make_day(workdir: Path, dsn: str, rounds: int = 60) -> None:
    paths = {}
    for table_id, game, dealers, seed, idle_s in TABLES:
        paths[table_id] = workdir / f"{table_id}.db"
        play(paths[table_id], table_id, game, dealers, seed, idle_s, rounds)
    asyncio.run(archive(paths, dsn))
