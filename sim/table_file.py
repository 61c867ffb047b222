"""What the simulators read of a table file: the table's id and site, its game and decks per
batch, and each device's section (its address, profile and ``sim`` settings).

The controller's loader validates a table file in full (the regulations' checks, the console,
telemetry); the simulators must not import it (sim/ sits beside the controller, not on top of it,
and `tablectl sim` stands in for hardware that knows nothing of the controller). So this reader
takes only what a device would be configured with: the ``[devices.<name>]`` sections go through
devices.config, the one parser of a device section that the controller uses too, and the game
through its file's own ``game`` and ``decks_per_batch`` keys. Anything else is left to the
controller, which refuses a bad table with its own one-line errors.
"""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass
from typing import Any

from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError, TablectlError
from controller.games import GameSpec, game_spec
from controller.shipped import resolve_ref
from devices.config import DeviceConfig, Side, load_devices


@dataclass(frozen=True)
class SimTableFile:
    path: pathlib.Path
    table_id: str
    site: str
    game: GameSpec
    decks: int
    side_wagers: bool  # the game offers a wager on the second spot (Bust It, Match, Progressive)
    devices: list[DeviceConfig]


# The table's id and site are MQTT topic levels (tabledev/<site>/<table>/..., docs/mqtt.md): the
# letters, digits and - _ . the broker ACL's names use, as the controller's loader requires.
_LEVEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}\Z")


def _text(path: pathlib.Path, section: dict[str, Any], key: str) -> str:
    value = section.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}: table.{key}: must be a non-empty string")
    return value


def _level(path: pathlib.Path, section: dict[str, Any], key: str) -> str:
    value = _text(path, section, key)
    if not _LEVEL.match(value):
        raise ConfigError(
            f"{path}: table.{key}: 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit"
        )
    return value


def _read(path: pathlib.Path) -> dict[str, Any]:
    try:
        return read_toml(path)
    except InputRefused as e:
        raise ConfigError(f"{path}: {e}") from None


def read_table_file(path: pathlib.Path | str, *, side: Side = "sim") -> SimTableFile:
    p = pathlib.Path(path)
    doc = _read(p)
    table = doc.get("table")
    if not isinstance(table, dict):
        raise ConfigError(f"{p}: table: a [table] section is required")
    table_id, site, ref = _level(p, table, "id"), _level(p, table, "site"), _text(p, table, "game")
    game_path = resolve_ref(p.parent, ref, "games")
    if game_path is None:
        raise ConfigError(f"{p}: table.game: no game file at {ref}")
    game_doc = _read(game_path)
    try:
        spec = game_spec(str(game_doc.get("game", "")))
    except TablectlError as e:
        raise ConfigError(f"{p}: table.game: {ref}: {e}") from None
    decks = game_doc.get("decks_per_batch", spec.default_decks)
    if not isinstance(decks, int) or isinstance(decks, bool) or not 1 <= decks <= 8:
        raise ConfigError(f"{p}: table.game: {ref}: decks_per_batch must be a whole number 1-8")
    wagers = game_doc.get("wagers", {})
    side_wagers = isinstance(wagers, dict) and any(v is True for v in wagers.values())
    devices_doc = doc.get("devices", {})
    if not isinstance(devices_doc, dict):
        raise ConfigError(f"{p}: devices: must be a table of [devices.<name>] sections")
    devices = load_devices(
        devices_doc, p.parent, source=str(p), topic_prefix=f"tabledev/{site}/{table_id}", side=side
    )
    if not devices:
        raise ConfigError(f"{p}: devices: no [devices.<name>] section, nothing to simulate")
    return SimTableFile(p, table_id, site, spec, decks, side_wagers, devices)
