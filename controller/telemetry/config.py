"""Building a Telemetry from a table config: ``telemetry_from_config`` is what the supervisor calls.

The table file may carry a ``[telemetry]`` section::

    [telemetry]
    broker = "mqtts://broker.floor.example:8883"   # or given by --broker; mqtt:// for a lab
    ca_file = "../mosquitto/ca.crt"                 # relative to the table file
    username = "table-example-floor-dab-01"         # or TABLECTL_MQTT_USERNAME
    # password: TABLECTL_MQTT_PASSWORD (preferred), or password = "..." in a file only root reads
    require_tls = true                              # refuse an mqtt:// URL
    keepalive_s = 10
    # On a NATS cluster (docs/scale-out.md): the events through its JetStream stream, as the
    # user <site>/<table>/events (or TABLECTL_NATS_USERNAME) with TABLECTL_NATS_PASSWORD (default:
    # the MQTT password); tls:// servers are checked against ca_file.
    events_nats = "tls://nats-1.floor.example:4222,tls://nats-2.floor.example:4222"
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError
from controller.gaming_day import PENNSYLVANIA, GamingDay, start_time
from controller.journal import canonical_json
from controller.journal.store import FORMAT_VERSION
from controller.telemetry.broker import broker_settings, telemetry_section
from controller.telemetry.payloads import PAYLOAD_VERSION
from controller.telemetry.publisher import CommandHandler, TableIdentity, Telemetry
from controller.telemetry.topics import TableTopics, check_level


def versions() -> dict[str, str | int]:
    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    return {
        "tablectl": version("tablectl"),
        "python": platform.python_version(),
        "aiomqtt": version("aiomqtt"),
        "journal_format": FORMAT_VERSION,
        "payload": PAYLOAD_VERSION,
    }


def config_hash(table_doc: Mapping[str, Any]) -> str:
    """sha256 of the table config as canonical JSON, without ``[telemetry]``.

    The broker section is left out: it holds a password, and a hash of a short password is a
    way to guess it; and moving a table to another broker does not change how it plays.
    """
    doc = {k: v for k, v in table_doc.items() if k != "telemetry"}
    return "sha256:" + hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def game_name(table: Mapping[str, Any], base_dir: Path) -> str:
    """The game id: the game file's own ``game = ...`` key, else its file name without .toml."""
    ref = table.get("game")
    if not isinstance(ref, str) or not ref:
        return "unknown"
    path = base_dir / ref
    try:
        doc = read_toml(path)
        if isinstance(doc.get("game"), str):
            return str(doc["game"])
    except InputRefused:
        pass
    return Path(ref).stem


def telemetry_from_config(
    table_doc: dict[str, Any],
    base_dir: str | Path,
    broker_url: str | None,
    journal_path: str | Path,
    *,
    command: CommandHandler | None = None,
    environ: Mapping[str, str] | None = None,
    game: str | None = None,
) -> Telemetry | None:
    """The table's Telemetry, or None when no broker is configured (no --broker, no [telemetry] broker).

    ``table_doc`` is the parsed table file; ``base_dir`` the directory it is in (``ca_file`` is
    relative to it); ``broker_url`` (from ``--broker``) wins over the file's. Raises ConfigError
    with one line naming the key for a bad section, URL, CA file, site or table id.
    """
    table = table_doc.get("table")
    if not isinstance(table, dict):
        raise ConfigError("table: the table config has no [table] section")
    section = telemetry_section(table_doc.get("telemetry", {}))
    url = broker_url or section.broker
    if url is None:
        return None
    base = Path(base_dir)
    settings = broker_settings(url, section, base, os.environ if environ is None else environ)
    identity = TableIdentity(
        site=check_level("table.site", table.get("site")),
        table=check_level("table.id", table.get("id")),
        game=game or game_name(table, base),
        config_hash=config_hash(table_doc),
        versions=versions(),
        gaming_day=_gaming_day(table),
    )
    events = None
    if section.events_nats is not None:
        # Here, not at the top: nats-py brings aiohttp (~0.4 s of CPU) that a table without
        # [telemetry] events_nats never needs, and every import delays `ready` after a restart.
        from controller.telemetry.jetstream_events import JetStreamEvents
        from controller.telemetry.nats_link import ENV_PASSWORD, nats_settings

        env = os.environ if environ is None else environ
        nats = nats_settings(
            section.events_nats,
            {ENV_PASSWORD: settings.password, **env} if settings.password else env,
            username=f"{identity.site}/{identity.table}/events",
            ca_file=settings.ca_file,
        )
        events = JetStreamEvents(
            nats, TableTopics(identity.site, identity.table), f"tablectl-{identity.site}-{identity.table}"
        )
    return Telemetry(settings, identity, journal_path, command=command, events_stream=events)


def _gaming_day(table: dict[str, Any]) -> GamingDay:
    """[table] time_zone and gaming_day_starts (the table file's schema checked them already)."""
    try:
        return GamingDay(
            str(table.get("time_zone", PENNSYLVANIA.time_zone)),
            start_time(str(table.get("gaming_day_starts", f"{PENNSYLVANIA.starts:%H:%M}"))),
        )
    except ValueError as e:
        raise ConfigError(f"table.time_zone / table.gaming_day_starts: {e}") from None
