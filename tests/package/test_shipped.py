"""A table file names its game and profiles relative to itself, or by a shipped file's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.shipped import shipped_names, table_file
from controller.supervisor.config import load_table_config


def test_every_game_has_a_shipped_example_table() -> None:
    """Each game's example table is named after it; another shipped table (a device variant's
    example) plays a shipped game too."""
    for game in shipped_names("games"):
        assert load_table_config(table_file(game), side="both").options.game.value == game
    for table in shipped_names("tables"):
        assert load_table_config(table_file(table), side="both").options.game.value in shipped_names("games")


def test_a_table_file_copied_elsewhere_still_finds_its_game_and_profiles(tmp_path: Path) -> None:
    copy = tmp_path / "my-table.toml"
    copy.write_text(table_file("down-under").read_text(encoding="utf-8"), encoding="utf-8")
    cfg = load_table_config(copy, side="both")
    assert cfg.options.game.value == "down-under"
    assert {d.name for d in cfg.devices} == {"shuffler", "shoe", "reader", "keypad"}


def test_a_local_game_file_wins_over_the_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "games").mkdir()
    (tmp_path / "games" / "down-under.toml").write_text("decks_per_batch = [", encoding="utf-8")
    copy = tmp_path / "t.toml"
    copy.write_text(table_file("down-under").read_text(encoding="utf-8"), encoding="utf-8")
    copy.write_text(copy.read_text(encoding="utf-8").replace("../games/", "games/"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"/games/down-under\.toml: not valid TOML"):
        load_table_config(copy, side="both")  # the broken local file was read, not the shipped one


def test_an_unknown_game_names_the_file_key_and_the_shipped_games(tmp_path: Path) -> None:
    copy = tmp_path / "t.toml"
    text = table_file("down-under").read_text(encoding="utf-8")
    copy.write_text(text.replace('game = "../games/down-under.toml"', 'game = "baccarat"'), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"t\.toml: table\.game: no game file at baccarat .*down-under"):
        load_table_config(copy, side="both")
