"""config/games/*.toml: validated at load with one-line errors naming file, key and rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.game_config import load_game_options
from controller.games import GameId

CONFIGS = sorted(Path(__file__).parent.parent.joinpath("config", "games").glob("*.toml"))


def test_every_game_has_a_config_and_it_loads() -> None:
    games = {load_game_options(p).game for p in CONFIGS}
    assert games == set(GameId)


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "game.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'game = "down-under"\ndecks_per_batch = 4\n[wagers]\nmatch_the_dealer = true\n',
            "wagers.match_the_dealer: 685a.6(e): Match-the-Dealer is offered only with six- or eight-deck",
        ),
        ('game = "down-under"\ndecks_per_batch = 7\n', "decks_per_batch: 685a.3(a)"),
        ('game = "double-attack"\ndecks_per_batch = 6\n', "decks_per_batch: 665a.3(a)"),
        ('game = "double-back-jack"\ndecks_per_batch = 1\n', "decks_per_batch: 673a.3(b)"),
        ('game = "double-back-jack"\nboxes = 7\n', "boxes: 673a.2(a)"),
        ('game = "double-back-jack"\n[wagers]\nbust_it = true\n', "wagers: 665a.6(f)"),
        ('game = "double-attack"\n[rulings]\ndealer_ace_ace = 12\n', "dealer_ace_ace: applies to Down Under"),
        (
            'game = "down-under"\n[rulings]\nmatch_both_cards = "all"\n',
            "match_both_cards: must be one of 'best'",
        ),
        (
            'game = "double-attack"\n[rulings]\nsettlement_procedure = 2\n',
            "settlement_procedure: applies to Double Back Jack and Down Under Blackjack, not Double",
        ),
        ('game = "double-attack"\nboxes = 3\nboxes_per_player = 4\n', "boxes_per_player: 665a.6(g)"),
        ('game = "down-under"\nboxes_per_player = 0\n', "boxes_per_player: 685a.6(f)"),
        ('game = "dj-wild"\nbar_non_wagering = true\n', "bar_non_wagering: applies to the blackjack games"),
        # The schema's words, the same in every document, and never the value itself.
        ('game = "down-under"\ndecks_per_batch = true\n', "decks_per_batch: must be an integer"),
        ('game = "down-under"\ndecks_per_batch = 6.0\n', "decks_per_batch: must be an integer"),
        ('game = "down-under"\n[rulings]\nmin_chip = "5"\n', "rulings.min_chip: must be an integer"),
        ('game = "down-under"\n[rulings]\nmin_chip = 0\n', "min_chip: G3: min_chip must be"),
        ('game = "down-under"\n[wagers]\nmatch_the_dealer = 1\n', "match_the_dealer: must be true or false"),
        ('game = "down-under"\n[wagers]\nlucky_ladies = true\n', "lucky_ladies: unknown optional wager"),
        ('game = "down-under"\nwagers = 3\n', "wagers: must be a table"),
        ('game = "down-under"\ndecks = 6\n', "decks: unknown key"),
        ('game = "roulette"\n', "game: unknown game 'roulette'"),
        ("decks_per_batch = 6\n", "game: missing"),
        ('game = "down-under"\n[rulings]\nfree_drinks = true\n', "rulings.free_drinks: unknown ruling"),
        ('game = "down-under"\ndecks_per_batch = ', "not valid TOML"),
    ],
)
def test_bad_config_is_refused_naming_the_key_and_rule(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_game_options(path)
    message = str(e.value)
    assert message.startswith(str(path)) and expected in message, message
    assert "\n" not in message


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_game_options(tmp_path / "nope.toml")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_options_round_trip_through_their_document(path: Path) -> None:
    from controller.game_config import options_from_dict, options_to_dict

    options = load_game_options(path)
    assert options_from_dict(options_to_dict(options), "round trip") == options
