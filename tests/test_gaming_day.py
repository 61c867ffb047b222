"""The gaming day: local wall-clock days from the casino's start time, across a day boundary and
both of America/New_York's daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.gaming_day import PENNSYLVANIA, GamingDay
from controller.table_file import read_table_file


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_the_day_turns_at_the_local_start_not_at_utc_midnight() -> None:
    # 2026-11-25 is EST (UTC-5): 06:00 local is 11:00 UTC.
    assert PENNSYLVANIA.day_of(utc("2026-11-25T10:59:59")) == date(2026, 11, 24)
    assert PENNSYLVANIA.day_of(utc("2026-11-25T11:00:00")) == date(2026, 11, 25)
    # After UTC midnight, still the evening before in Pennsylvania: the same gaming day.
    assert PENNSYLVANIA.day_of(utc("2026-11-26T04:30:00")) == date(2026, 11, 25)


def test_the_autumn_change_makes_a_25_hour_day() -> None:
    # 2026-11-01 02:00 EDT becomes 01:00 EST: gaming day 2026-10-31 runs 10:00 UTC to 11:00 UTC.
    start, end = PENNSYLVANIA.bounds(date(2026, 10, 31))
    assert (start, end) == (utc("2026-10-31T10:00:00"), utc("2026-11-01T11:00:00"))
    assert end - start == 25 * 3600
    # 10:30 UTC on Nov 1 is 05:30 EST: still Oct 31's gaming day (a fixed UTC-4 would say Nov 1).
    assert PENNSYLVANIA.day_of(utc("2026-11-01T10:30:00")) == date(2026, 10, 31)
    assert PENNSYLVANIA.day_of(utc("2026-11-01T11:00:00")) == date(2026, 11, 1)


def test_the_spring_change_makes_a_23_hour_day() -> None:
    start, end = PENNSYLVANIA.bounds(date(2026, 3, 7))
    assert end - start == 23 * 3600
    assert PENNSYLVANIA.day_of(end - 1) == date(2026, 3, 7)
    assert PENNSYLVANIA.day_of(end) == date(2026, 3, 8)


def test_another_zone_and_start() -> None:
    day = GamingDay("Europe/Berlin", time(4, 30))
    assert day.day_of(utc("2026-07-01T02:29:00")) == date(2026, 6, 30)  # 04:29 CEST
    assert day.day_of(utc("2026-07-01T02:30:00")) == date(2026, 7, 1)
    assert day.start_of(date(2026, 7, 1)) == utc("2026-07-01T02:30:00")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('time_zone = "Mars/Olympus"', "table.time_zone: 'Mars/Olympus' is not an IANA time zone"),
        ('time_zone = "../etc"', "table.time_zone: must be an IANA time zone name"),
        ('gaming_day_starts = "6am"', "table.gaming_day_starts: must be a local time HH:MM"),
        ('gaming_day_starts = "24:00"', "must be a local time HH:MM"),
    ],
)
def test_a_table_file_with_a_bad_gaming_day_is_one_line(tmp_path: Path, extra: str, words: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(f'[table]\nid = "t1"\nsite = "s"\ngame = "down-under"\n{extra}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        read_table_file(path)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_table_file_sets_its_gaming_day(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        '[table]\nid = "t1"\nsite = "s"\ngame = "down-under"\ntime_zone = "America/Chicago"\n'
        'gaming_day_starts = "04:00"\n',
        encoding="utf-8",
    )
    _, file = read_table_file(path)
    assert file.table.gaming_day == GamingDay("America/Chicago", time(4, 0))
    path.write_text('[table]\nid = "t1"\nsite = "s"\ngame = "down-under"\n', encoding="utf-8")
    assert read_table_file(path)[1].table.gaming_day == PENNSYLVANIA
