"""The gaming day: the 24-hour period the certificate holder sets, counted in the casino's local
time from a start time of its choosing (e.g. 6 a.m. in Pennsylvania).

The journal and the archive store UTC instants (seconds since the epoch); which gaming day an
instant belongs to is decided here and only here, from a table file's ``[table] time_zone`` and
``gaming_day_starts``. The arithmetic is on the local wall clock, so the day that holds a
daylight-saving change is 23 or 25 hours long and every day still starts at the same local time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_HH_MM = re.compile(r"([01]\d|2[0-3]):([0-5]\d)\Z")
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*\Z")


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (e.g. America/New_York); ValueError naming it when there is none."""
    if not isinstance(name, str) or len(name) > 64 or not _ZONE_NAME.match(name):
        raise ValueError("must be an IANA time zone name such as America/New_York")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not an IANA time zone (e.g. America/New_York)") from None


def start_time(text: str) -> time:
    """``HH:MM`` (24-hour) as a time; ValueError otherwise."""
    match = _HH_MM.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError("must be a local time HH:MM, 24-hour, e.g. 06:00")
    return time(int(match[1]), int(match[2]))


@dataclass(frozen=True, slots=True)
class GamingDay:
    """A casino's gaming day: its time zone and the local time each day starts."""

    time_zone: str = "America/New_York"
    starts: time = time(6, 0)
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_zone", zone(self.time_zone))
        if self.starts.tzinfo is not None or self.starts.second or self.starts.microsecond:
            raise ValueError("the gaming day starts at a whole local minute")

    @property
    def _offset(self) -> timedelta:
        return timedelta(hours=self.starts.hour, minutes=self.starts.minute)

    def local(self, at: float) -> datetime:
        """The instant ``at`` (seconds since the epoch, UTC) on the casino's wall clock."""
        return datetime.fromtimestamp(at, self._zone)

    def day_of(self, at: float) -> date:
        """The gaming day the instant ``at`` belongs to."""
        # Naive wall-clock arithmetic on purpose: 05:59 local belongs to the day before whatever
        # the UTC offset is that night.
        return (self.local(at).replace(tzinfo=None) - self._offset).date()

    def start_of(self, day: date) -> float:
        """The UTC instant (seconds since the epoch) gaming day ``day`` starts."""
        local = datetime.combine(day, self.starts).replace(tzinfo=self._zone)
        return local.astimezone(UTC).timestamp()

    def bounds(self, day: date) -> tuple[float, float]:
        """``day``'s start and the next day's start, as UTC instants: 23, 24 or 25 hours apart."""
        return self.start_of(day), self.start_of(day + timedelta(days=1))

    def describe(self) -> str:
        return f"from {self.starts:%H:%M} {self.time_zone}"


# Pennsylvania's casinos: Eastern time; 6 a.m. is the usual start (a table file may say otherwise).
PENNSYLVANIA: Final = GamingDay()
