"""The schema of a table file (config/tables/<table>.toml): its sections and their keys.

``read_table_file`` reads a table file and checks its shape: ``load_table_config``
(controller/supervisor/config.py) reads it once through it, and the telemetry and the console
take their sections from that one reading; `tablectl sim` reads its devices' sections through it
too (sim/table_file.py). Each
``[devices.<name>]`` section has its own model in devices/config.py (the device layer's), so
here it is only a table of tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import AfterValidator, Field, ValidationError

from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError
from controller.gaming_day import PENNSYLVANIA, GamingDay, start_time, zone
from controller.ids import is_host_name, is_identifier
from controller.schema import Document, NonEmpty, Rule, first_error, one_line
from controller.shipped import shipped_file, shipped_names

ID_RULE: Final = "letters, digits, '.', '_' and '-' only, at most 64 characters"


def _identifier(value: str) -> str:
    # A file name (/var/lib/tablectl/<id>.db), an MQTT topic level, a broker user name.
    if not is_identifier(value):
        raise ValueError(ID_RULE)
    return value


Identifier = Annotated[NonEmpty, AfterValidator(_identifier)]


def _host_names(values: list[str]) -> list[str]:
    # A DNS name the console may be reached by (besides its IP address and localhost), e.g. the
    # name a tablet uses through the pit's TLS proxy.
    if not all(is_host_name(v) for v in values):
        raise ValueError("not a host name")
    return values


def _time_zone(value: str) -> str:
    zone(value)  # ValueError with the rule
    return value


def _starts(value: str) -> str:
    start_time(value)
    return value


class TableSection(Document):
    """``[table]``: which table, where it stands, its game file (relative to the table file, or a
    shipped game's name), and the casino's gaming day: its IANA time zone and the local time
    each gaming day starts (Pennsylvania time from 06:00 unless the file says otherwise)."""

    id: Identifier
    site: Identifier
    game: NonEmpty
    time_zone: Annotated[str, AfterValidator(_time_zone)] = PENNSYLVANIA.time_zone
    gaming_day_starts: Annotated[str, AfterValidator(_starts)] = f"{PENNSYLVANIA.starts:%H:%M}"

    @property
    def gaming_day(self) -> GamingDay:
        return GamingDay(self.time_zone, start_time(self.gaming_day_starts))


class TelemetrySection(Document):
    """``[telemetry]``: the ops broker (controller/telemetry/config.py)."""

    broker: Annotated[str, Rule("must be an mqtt:// or mqtts:// URL")] | None = None
    username: NonEmpty | None = None
    password: NonEmpty | None = Field(default=None, repr=False)  # never in a repr or a message
    ca_file: NonEmpty | None = None
    keepalive_s: Annotated[int, Rule("must be a whole number of seconds from 2 to 600", ge=2, le=600)] = 10
    require_tls: Annotated[bool, Rule("must be true or false")] = False
    # A NATS cluster's nodes (docs/scale-out.md): the events go through its JetStream stream,
    # confirmed once stored; status, state and commands stay on the MQTT broker above.
    events_nats: Annotated[str, Rule("must be nats:// or tls:// URLs, comma-separated")] | None = None


class ConsoleSection(Document):
    """``[console]``: where the table console listens and whose users file it reads."""

    listen: Annotated[str, Rule("must be a string HOST:PORT")] | None = None
    users: Annotated[str, Field(min_length=1), Rule("must be a path")] | None = None
    # The console's own TLS (PEM files, relative to the table file): both or neither.
    tls_cert: Annotated[str, Field(min_length=1), Rule("must be a path to a PEM certificate")] | None = None
    tls_key: Annotated[str, Field(min_length=1), Rule("must be a path to a PEM private key")] | None = None
    allow_hosts: Annotated[
        list[str],
        AfterValidator(_host_names),
        Rule('must be a list of host names, e.g. ["table-12.pit.example"]'),
    ] = Field(default_factory=list)


class MetricsSection(Document):
    """``[metrics]``: where `tablectl run` serves /metrics and /healthz (``--metrics`` wins)."""

    listen: Annotated[str, Rule("must be a string HOST:PORT")]


class TableFile(Document):
    """A whole table file. ``devices`` are checked by devices.config.load_devices."""

    table: TableSection
    devices: dict[str, Any] = Field(default_factory=dict)
    telemetry: TelemetrySection = TelemetrySection()
    console: ConsoleSection | None = None
    metrics: MetricsSection | None = None


SECTIONS_RULE: Final = (
    "unknown section (expected [table], [devices.<name>], [telemetry], [console], [metrics])"
)


def locate_table_file(path: Path | str) -> Path:
    """``path`` itself, or, when there is no such file and it is a bare name (``down-under``), the
    shipped example table of that name: how `tablectl run --config down-under` works from an
    installed wheel as from a checkout. Anything else is left for the reader to refuse."""
    p = Path(path)
    if p.exists() or p.parent != Path("."):
        return p
    return shipped_file("tables", p.name) or p


def read_table_file(path: Path) -> tuple[dict[str, Any], TableFile]:
    """The table file at ``path`` as read and with its shape checked (the document is kept for
    the sections whose own modules read it); ConfigError with one line naming the file, the key
    and the rule."""
    if not path.exists():
        shipped = ", ".join(shipped_names("tables"))
        raise ConfigError(f"{path}: no such table file (or name a shipped table: {shipped})")
    try:
        doc = read_toml(path)
    except InputRefused as e:
        raise ConfigError(f"{path}: {e}") from None
    try:
        return doc, TableFile.model_validate(doc)
    except ValidationError as e:
        first = first_error(e)
        if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
            raise ConfigError(f"{path}: {first['loc'][0]}: {SECTIONS_RULE}") from None
        raise ConfigError(one_line(e, str(path), model=TableFile)) from None
