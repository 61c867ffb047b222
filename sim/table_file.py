"""What the simulators read of a table file: the table's id and site, its game and decks per
batch, and each device's section (its address, profile and ``sim`` settings).

The controller's loader validates a table file in full (the regulations' checks, the console,
telemetry); the simulators must not import it (sim/ sits beside the controller, not on top of it,
and `tablectl sim` stands in for hardware that knows nothing of the controller). So this reader
checks the file's shape with the one table-file schema (controller/table_file.py, a vocabulary
module), reads the ``[devices.<name>]`` sections through devices.config, the one parser of a
device section that the controller uses too, and the game through its file's own ``game`` and
``decks_per_batch`` keys. The regulations' checks are left to the controller.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any

from controller import table_file
from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError, TablectlError
from controller.games import GameSpec, game_spec
from controller.shipped import resolve_ref
from devices.config import DeviceConfig, Side
from devices.config_file import load_devices


@dataclass(frozen=True)
class SimTableFile:
    path: pathlib.Path
    table_id: str
    site: str
    game: GameSpec
    decks: int
    side_wagers: bool  # the game offers a wager on the second spot (Bust It, Match, Progressive)
    devices: list[DeviceConfig]
    direct_insert: bool = False  # the game file's direct_insert_shuffler


def _read(path: pathlib.Path) -> dict[str, Any]:
    try:
        return read_toml(path)
    except InputRefused as e:
        raise ConfigError(f"{path}: {e}") from None


def read_table_file(path: pathlib.Path | str, *, side: Side = "sim") -> SimTableFile:
    p = table_file.locate_table_file(path)
    # The shape of the whole file through the controller's schema (a vocabulary module): the same
    # one-line errors, and the table's id and site checked as the MQTT topic levels they are.
    _, file = table_file.read_table_file(p)
    table_id, site, ref = file.table.id, file.table.site, file.table.game
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
    devices = load_devices(
        file.devices, p.parent, source=str(p), topic_prefix=f"tabledev/{site}/{table_id}", side=side
    )
    if not devices:
        raise ConfigError(f"{p}: devices: no [devices.<name>] section, nothing to simulate")
    # 673a.5(a): only a direct-insert shuffler puts the stack into the shoe itself (ruling G13);
    # otherwise the stack comes out to the dealer, who has it cut and loads the shoe.
    direct_insert = game_doc.get("direct_insert_shuffler", False) is True
    return SimTableFile(p, table_id, site, spec, decks, side_wagers, devices, direct_insert)
