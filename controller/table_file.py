"""The schema of a table file (config/tables/<table>.toml): its sections and their keys.

``read_table_file`` reads a table file and checks its shape: ``load_table_config``
(controller/supervisor/config.py) reads it once through it, and the telemetry and the console
take their sections from that one reading; `tablectl sim` reads its devices' sections through it
too (sim/table_file.py). Each
``[devices.<name>]`` section has its own model in devices/config.py (the device layer's), so
here it is only a table of tables.

A table file may start from another (``extends = "<file>"``, see ``read_table_doc``): the
document read is the base's with the file's own keys merged over it, so every reader above sees
one whole table file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import AfterValidator, Field, ValidationError

from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError
from controller.gaming_day import PENNSYLVANIA, GamingDay, start_time, zone
from controller.ids import is_host_name, is_identifier
from controller.schema import Document, NonEmpty, Rule, first_error, one_line
from controller.shipped import shipped_dir, shipped_file, shipped_names

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


# ``extends``: how many bases one table file may stand on (its base, the base's base, ...). A
# file is at most 1 MiB (controller/bounded.py), so a chain is read in bounded time and memory.
MAX_EXTENDS: Final = 8
EXTENDS_RULE: Final = (
    "must be the path of a table file to extend (relative to this file), or a shipped table's name"
)

# The keys that name a file by a path relative to the table file ("*": any device). A value a
# base gives them is relative to the base's folder; merged into the extending file it is rewritten
# to be relative to that file's folder. A key added to a section that names a file belongs here.
PATH_KEYS: Final = (
    ("table", "game"),
    ("telemetry", "ca_file"),
    ("console", "users"),
    ("console", "tls_cert"),
    ("console", "tls_key"),
    ("devices", "*", "profile"),
    ("devices", "*", "cert"),
    ("devices", "*", "key"),
    ("devices", "*", "ca_file"),
    ("devices", "*", "sim", "cert"),
    ("devices", "*", "sim", "key"),
    ("devices", "*", "sim", "ca_file"),
)


def _read_one(path: Path) -> dict[str, Any]:
    try:
        return read_toml(path)
    except InputRefused as e:
        raise ConfigError(f"{path}: {e}") from None


def _locate_base(folder: Path, ref: str) -> Path | None:
    """The file ``extends = ref`` names: relative to the extending file's folder, else the
    shipped table (or shipped base) of that path or name, as a game or profile is found."""
    local = folder / ref
    if local.is_file():
        return local
    tables = shipped_dir("tables")
    shipped = tables / ref
    if shipped.is_file() and shipped.resolve().is_relative_to(tables.resolve()):
        return shipped
    return shipped_file("tables", ref)


def _rebase(doc: dict[str, Any], source: Path, target: Path) -> None:
    """Rewrite, in place, the relative paths of ``PATH_KEYS`` in ``doc`` (written in the folder
    ``source``) to name the same files from the folder ``target``. A value that is no file
    there (a shipped game's or profile's name) is left as written."""
    if source == target:
        return

    def visit(node: Any, keys: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        head, rest = keys[0], keys[1:]
        names = list(node) if head == "*" else [head]
        for name in names:
            if rest:
                visit(node.get(name), rest)
                continue
            value = node.get(name)
            if not isinstance(value, str) or not value or os.path.isabs(value):
                continue
            there = Path(os.path.normpath(source / value))
            if there.is_file():
                node[name] = os.path.relpath(there, target)

    for keys in PATH_KEYS:
        visit(doc, keys)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged over ``base``: a table in both is merged key by key, any other value
    (a string, a number, an array) in ``over`` replaces the base's. Keys keep ``over``'s order,
    then the base's other keys follow in the base's order (the order of the ``[devices.<name>]``
    sections is the order the devices are listed in)."""
    out: dict[str, Any] = {}
    for key, value in over.items():
        old = base.get(key)
        out[key] = _merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    for key, value in base.items():
        out.setdefault(key, value)
    return out


def _read_extending(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    doc = _read_one(path)
    if "extends" not in doc:
        return doc
    ref = doc.pop("extends")
    # Printable and short: the value is named in the one-line errors below.
    if not isinstance(ref, str) or not ref.strip() or not ref.isprintable() or len(ref) > 1024:
        raise ConfigError(f"{path}: extends: {EXTENDS_RULE}")
    base = _locate_base(path.parent, ref)
    if base is None:
        raise ConfigError(f"{path}: extends: {ref}: no such table file (relative to this file's folder)")
    seen = (*chain, path.resolve())
    if base.resolve() in seen:
        loop = " -> ".join(p.name for p in (*seen, base.resolve()))
        raise ConfigError(f"{path}: extends: {ref}: a cycle ({loop})")
    if len(seen) > MAX_EXTENDS:
        raise ConfigError(f"{path}: extends: {ref}: more than {MAX_EXTENDS} bases deep")
    try:
        base_doc = _read_extending(base, seen)
    except ConfigError as e:
        raise ConfigError(f"{path}: extends: {e}") from None
    _rebase(base_doc, Path(os.path.abspath(base.parent)), Path(os.path.abspath(path.parent)))
    return _merge(base_doc, doc)


def read_table_doc(path: Path) -> dict[str, Any]:
    """The table file at ``path`` as one document: with ``extends = "<file>"`` (a path relative
    to this file, or a shipped table's name), the file it names is read first (itself perhaps
    extending another, at most ``MAX_EXTENDS`` deep, never one already in the chain) and this
    file's keys are merged over it (``_merge``); the relative paths the base gives are rewritten
    to be relative to this file (``PATH_KEYS``). The ``extends`` key itself is not in the result.
    ConfigError with one line naming the file and the key."""
    if not path.exists():
        shipped = ", ".join(shipped_names("tables"))
        raise ConfigError(f"{path}: no such table file (or name a shipped table: {shipped})")
    return _read_extending(path, ())


def read_table_file(path: Path) -> tuple[dict[str, Any], TableFile]:
    """The table file at ``path`` as read (``read_table_doc``: with the file it extends merged in)
    and with its shape checked (the document is kept for the sections whose own modules read
    it); ConfigError with one line naming the file, the key and the rule."""
    doc = read_table_doc(path)
    try:
        return doc, TableFile.model_validate(doc)
    except ValidationError as e:
        first = first_error(e)
        if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
            raise ConfigError(f"{path}: {first['loc'][0]}: {SECTIONS_RULE}") from None
        raise ConfigError(one_line(e, str(path), model=TableFile)) from None
