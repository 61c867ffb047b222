"""A table config file (config/tables/<table>.toml) as the appliance reads it.

``[table]`` names the table (``id``), where it stands (``site``) and its game file (``game``,
relative to the table file); ``[devices.<name>]`` are loaded by ``devices.config.load_devices``.
Every problem is one ConfigError line: ``<file>: <key>: <rule>``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import ConfigError, RuleViolation
from controller.game_config import GameOptions, load_game_options
from controller.gaming_day import PENNSYLVANIA, GamingDay
from controller.shipped import resolve_ref, shipped_names
from controller.table_file import locate_table_file, read_table_file
from devices.config import DeviceConfig, Side, TransportKind
from devices.config_file import load_devices
from devices.profiles import DeviceKind


@dataclass(frozen=True)
class TableConfig:
    path: Path
    table_id: str
    site: str
    options: GameOptions
    devices: list[DeviceConfig]
    # The file as read, once: the telemetry hashes it and takes [telemetry], the console its
    # [console] (neither reads the file again).
    doc: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # [table] time_zone and gaming_day_starts: which gaming day a journalled instant belongs to.
    gaming_day: GamingDay = PENNSYLVANIA
    metrics_listen: str | None = None  # [metrics] listen: HOST:PORT for /metrics and /healthz

    def device_of(self, kind: DeviceKind) -> DeviceConfig | None:
        return next((d for d in self.devices if d.kind is kind), None)


def load_table_config(path: Path | str, *, side: Side = "appliance") -> TableConfig:
    """The one reading of a table file: every section checked (shapes by the schema, then the
    rules across sections), the game file and device profiles loaded.

    ``side``: which end of an MQTT device's link this process is (see ``load_devices``):
    `tablectl run` reads only the appliance's password, `tablectl sim` only the device's."""
    p = locate_table_file(path)
    doc, file = read_table_file(p)
    table = file.table
    game_path = resolve_ref(p.parent, table.game, "games")
    if game_path is None:
        raise ConfigError(
            f"{p}: table.game: no game file at {table.game} (relative to the table file) and no shipped"
            f" game of that name ({', '.join(shipped_names('games'))})"
        )
    try:
        options = load_game_options(game_path)
    except RuleViolation as e:
        raise ConfigError(f"{p}: table.game: {table.game}: {e}") from None
    except ConfigError as e:  # the game file's own problem, told as the key that named the file
        raise ConfigError(f"{p}: table.game: {e}") from None
    # An MQTT device without a topic gets the one the shipped broker ACL grants it.
    devices = load_devices(
        file.devices, p.parent, source=str(p), topic_prefix=f"tabledev/{table.site}/{table.id}", side=side
    )
    _one_id_per_rtu_line(p, devices)
    kinds = Counter(d.kind for d in devices)
    for kind, n in kinds.items():
        if n > 1:
            raise ConfigError(f"{p}: devices: one {kind.value} per table, not {n}")
    shuffler = next((d for d in devices if d.kind is DeviceKind.SHUFFLER), None)
    if shuffler is not None and "decks" in shuffler.sim and int(shuffler.sim["decks"]) != options.decks:
        raise ConfigError(
            f"{p}: devices.{shuffler.name}.sim.decks: must match the game's decks_per_batch ({options.decks})"
        )
    from controller.server_settings import console_settings

    console_settings(doc, p.parent, str(p), need_users=False)  # [console]'s listen address too
    metrics_listen = file.metrics.listen if file.metrics is not None else None
    if metrics_listen is not None:
        from controller.server_settings import parse_metrics_listen

        parse_metrics_listen(metrics_listen, f"{p}: metrics.listen")
    return TableConfig(p, table.id, table.site, options, devices, doc, table.gaming_day, metrics_listen)


def _one_id_per_rtu_line(p: Path, devices: list[DeviceConfig]) -> None:
    """Modbus RTU addresses a device by its id on a shared line: two with one id would both answer
    (or the wrong one would), and each would read the other's registers."""
    seen: dict[tuple[str, int], str] = {}
    for d in devices:
        if d.endpoint.transport is not TransportKind.MODBUS_RTU:
            continue
        key = (d.endpoint.path, d.device_id)
        if key in seen:
            line = d.endpoint.path or "the simulator's line"
            raise ConfigError(
                f"{p}: devices.{d.name}.device_id: {d.device_id} is already devices.{seen[key]}'s on {line}"
                " (one id per RTU line)"
            )
        seen[key] = d.name
