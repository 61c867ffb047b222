"""The MQTT topic tree of one table, and the parsing of it for the fleet view.

``tablectl/<site>/<table>/...``: site and table are single topic levels, so they may hold no
``/``, ``+``, ``#`` or NUL (a ``+`` in a table id would turn one appliance's publish into a
wildcard in a subscriber's eyes, and the broker refuses such a topic anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.errors import ConfigError
from controller.ids import is_identifier

ROOT = "tablectl"
# ``tablectl/<site>/archive/alarms`` is the archive's (controller/archive/), not a table's: no table
# may take the name, and the fleet view does not read it as one.
ARCHIVE_LEVEL = "archive"


def check_level(what: str, value: object) -> str:
    if not is_identifier(value):
        raise ConfigError(
            f"telemetry: {what} must be 1-64 letters, digits, '-', '_' or '.', starting with a letter or "
            "digit (it is one MQTT topic level)"
        )
    return value


@dataclass(frozen=True, slots=True)
class TableTopics:
    site: str
    table: str

    def __post_init__(self) -> None:
        check_level("site", self.site)
        check_level("table id", self.table)
        if self.table == ARCHIVE_LEVEL:
            raise ConfigError(f"telemetry: table id {ARCHIVE_LEVEL!r} is reserved for the casino's archive")

    @property
    def base(self) -> str:
        return f"{ROOT}/{self.site}/{self.table}"

    @property
    def status(self) -> str:
        return f"{self.base}/status"

    @property
    def state(self) -> str:
        return f"{self.base}/state"

    @property
    def events(self) -> str:
        return f"{self.base}/events"

    @property
    def alarms(self) -> str:
        return f"{self.base}/alarms"

    @property
    def heartbeat(self) -> str:
        return f"{self.base}/heartbeat"

    def device(self, name: str) -> str:
        return f"{self.base}/devices/{name}"

    @property
    def commands(self) -> str:
        """The subscription for incoming commands: one level, so our own ``/result`` is not echoed."""
        return f"{self.base}/cmd/+"

    def command(self, name: str) -> str:
        return f"{self.base}/cmd/{name}"

    def command_result(self, name: str) -> str:
        return f"{self.base}/cmd/{name}/result"


@dataclass(frozen=True, slots=True)
class ParsedTopic:
    site: str
    table: str
    leaf: str  # status | state | events | alarms | heartbeat | devices | cmd
    name: str | None = None  # the device or command name
    result: bool = False  # a cmd/<name>/result


def parse_topic(topic: str) -> ParsedTopic | None:
    """Split a topic of the tree; None for anything that is not one of ours."""
    parts = topic.split("/")
    if len(parts) < 4 or parts[0] != ROOT:
        return None
    site, table, leaf, rest = parts[1], parts[2], parts[3], parts[4:]
    if table == ARCHIVE_LEVEL:
        return None
    if leaf in ("status", "state", "events", "alarms", "heartbeat") and not rest:
        return ParsedTopic(site, table, leaf)
    if leaf == "devices" and len(rest) == 1:
        return ParsedTopic(site, table, leaf, rest[0])
    if leaf == "cmd" and len(rest) == 1:
        return ParsedTopic(site, table, leaf, rest[0])
    if leaf == "cmd" and len(rest) == 2 and rest[1] == "result":
        return ParsedTopic(site, table, leaf, rest[0], result=True)
    return None
