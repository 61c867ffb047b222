"""The reference keypad without its latch, for the tests and the bench about the keypad that does
not latch (the driver's reflex lock, docs/design.md).

The shipped reference keypad latches its own sensors at Start Game (``latches_on_start_game``,
687a.9(b)); a keypad that does not is still supported, and what is said of it is tested against
this variant: the shipped profile's text with the one option turned off, written where the test
says (its ``tmp_path``), never a second copy of the profile kept in the repository.

The variant is written as ``<dir>/devices/ref-keypad.toml``: a copy of a shipped table file in
``<dir>/tables/`` (``not_latching_table``) then finds it by its own relative path
(``../devices/ref-keypad.toml``), and its game and other profiles, absent there, by their shipped
names (controller/shipped.py).
"""

from __future__ import annotations

from pathlib import Path

from controller.shipped import shipped_file, table_file
from devices.profiles import LATCHES
from tests.support.flat_table import flat_text

LATCHING = f"{LATCHES} = true\n"


def shipped_keypad() -> Path:
    path = shipped_file("devices", "ref-keypad")
    assert path is not None
    return path


def not_latching_keypad(where: Path) -> Path:
    """The reference keypad's profile with ``latches_on_start_game = false``, under ``where``."""
    text = shipped_keypad().read_text(encoding="utf-8")
    assert text.count(LATCHING) == 1, f"{shipped_keypad()}: no single `{LATCHING.strip()}` to turn off"
    out = where / "devices" / "ref-keypad.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.replace(LATCHING, f"{LATCHES} = false\n"), encoding="utf-8")
    return out


def not_latching_table(game: str, where: Path) -> Path:
    """The shipped example table of ``game``, as is, but for its keypad: the one that does not latch."""
    not_latching_keypad(where)
    out = where / "tables" / f"{game}.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(flat_text(table_file(game)), encoding="utf-8")  # its keypad profile is ../devices/
    return out


def not_latching_run_config(config: Path, where: Path) -> Path:
    """A table file ``concrete_config`` wrote (absolute profile paths), its keypad turned into the
    one that does not latch, in place."""
    text = config.read_text(encoding="utf-8")
    shipped = str(shipped_keypad().resolve())
    assert shipped in text, f"{config}: no reference keypad to turn"
    config.write_text(text.replace(shipped, str(not_latching_keypad(where).resolve())), encoding="utf-8")
    return config
