"""A table config file (config/tables/<table>.toml) as the appliance reads it.

``[table]`` names the table (``id``), where it stands (``site``) and its game file (``game``,
relative to the table file); ``[devices.<name>]`` are loaded by ``devices.config.load_devices``.
Every problem is one ConfigError line: ``<file>: <key>: <rule>``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError, RuleViolation
from controller.game_config import GameOptions, load_game_options
from controller.games import GameId
from controller.ids import is_identifier
from controller.shipped import resolve_ref, shipped_names
from devices.config import DeviceConfig, Side, TransportKind, load_devices
from devices.profiles import DeviceKind

# Devices the supervisor needs for each game; the rest are optional.
_REQUIRED: dict[GameId, tuple[DeviceKind, ...]] = {
    GameId.DOUBLE_BACK_JACK: (DeviceKind.SHOE,),
    GameId.DOUBLE_ATTACK: (DeviceKind.SHOE,),
    GameId.DOWN_UNDER: (DeviceKind.SHOE,),
    GameId.DJ_WILD: (),
}


@dataclass(frozen=True)
class TableConfig:
    path: Path
    table_id: str
    site: str
    options: GameOptions
    devices: list[DeviceConfig]

    def device_of(self, kind: DeviceKind) -> DeviceConfig | None:
        return next((d for d in self.devices if d.kind is kind), None)


def _string(path: Path, table: dict[str, Any], key: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: table.{key}: must be a non-empty string")
    return value


def _identifier(path: Path, table: dict[str, Any], key: str) -> str:
    value = _string(path, table, key)
    if not is_identifier(value):  # a file name, an MQTT topic level, a broker user name
        rule = "letters, digits, '.', '_' and '-' only, at most 64 characters"
        raise ConfigError(f"{path}: table.{key}: {rule}")
    return value


def load_table_config(path: Path | str, *, side: Side = "appliance") -> TableConfig:
    """``side``: which end of an MQTT device's link this process is (see ``load_devices``):
    `tablectl run` reads only the appliance's password, `tablectl sim` only the device's."""
    p = Path(path)
    try:
        doc = read_toml(p)
    except InputRefused as e:
        raise ConfigError(f"{p}: {e}") from None
    table = doc.get("table")
    if not isinstance(table, dict):
        raise ConfigError(f"{p}: table: a [table] section is required")
    unknown = sorted(set(doc) - {"table", "devices", "telemetry", "console"})
    if unknown:
        raise ConfigError(
            f"{p}: {unknown[0]}: unknown section (expected [table], [devices.<name>], [telemetry], [console])"
        )
    table_id = _identifier(p, table, "id")
    site = _identifier(p, table, "site")
    game_ref = _string(p, table, "game")
    game_path = resolve_ref(p.parent, game_ref, "games")
    if game_path is None:
        raise ConfigError(
            f"{p}: table.game: no game file at {game_ref} (relative to the table file) and no shipped"
            f" game of that name ({', '.join(shipped_names('games'))})"
        )
    try:
        options = load_game_options(game_path)
    except RuleViolation as e:
        raise ConfigError(f"{p}: table.game: {game_ref}: {e}") from None
    extra = sorted(set(table) - {"id", "site", "game"})
    if extra:
        raise ConfigError(f"{p}: table.{extra[0]}: unknown key (expected id, site, game)")
    devices_doc = doc.get("devices", {})
    if not isinstance(devices_doc, dict):
        raise ConfigError(f"{p}: devices: must be a table of [devices.<name>] sections")
    # An MQTT device without a topic gets the one the shipped broker ACL grants it.
    devices = load_devices(
        devices_doc, p.parent, source=str(p), topic_prefix=f"tabledev/{site}/{table_id}", side=side
    )
    _one_id_per_rtu_line(p, devices)
    kinds = Counter(d.kind for d in devices)
    for kind, n in kinds.items():
        if n > 1:
            raise ConfigError(f"{p}: devices: one {kind.value} per table, not {n}")
    for kind in _REQUIRED[options.game]:
        if kind not in kinds:
            raise ConfigError(f"{p}: devices: a {options.spec.title} table needs a {kind.value}")
    shuffler = next((d for d in devices if d.kind is DeviceKind.SHUFFLER), None)
    if shuffler is not None and "decks" in shuffler.sim and int(shuffler.sim["decks"]) != options.decks:
        raise ConfigError(
            f"{p}: devices.{shuffler.name}.sim.decks: must match the game's decks_per_batch ({options.decks})"
        )
    from controller.console.settings import console_settings

    console_settings(doc, p.parent, str(p), need_users=False)  # [console] checked here too
    return TableConfig(p, table_id, site, options, devices)


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


def check_main(argv: list[str]) -> int:
    """``tablectl config check FILE``: exit 0 with a summary line, 2 with the one-line problem."""
    import sys

    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: tablectl config check FILE", file=sys.stderr)
        return 2
    try:
        cfg = load_table_config(argv[0])
        from controller.supervisor.wiring import build_telemetry

        # The [telemetry] section is checked too (the broker URL, CA file, site and table id).
        build_telemetry(cfg, None, cfg.path.with_suffix(".db"))
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 2
    names = ", ".join(f"{d.name} ({d.kind.value})" for d in cfg.devices)
    print(f"{cfg.path}: ok: table {cfg.table_id} at {cfg.site}, {cfg.options.spec.title}, devices: {names}")
    return 0
