"""config/games/*.toml: validated at load with one-line errors naming file, key and rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.game_config import load_game_options
from controller.games import game_ids

CONFIGS = sorted(Path(__file__).parent.parent.joinpath("config", "games").glob("*.toml"))


def test_every_game_has_a_config_and_it_loads() -> None:
    games = {load_game_options(p).game for p in CONFIGS}
    assert games == set(game_ids())


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
        ('game = "double-back-jack"\ndecks_per_batch = 0\n', "decks_per_batch: 673a.3(a)"),
        # 673a.3(b) vs 5(h): a batch shuffler or a self-shuffling shoe, not both at one table.
        (
            'game = "double-back-jack"\nself_shuffling_shoe = true\n',
            "self_shuffling_shoe: 673a.5(h): a self-shuffling shoe replaces the batch shuffler",
        ),
        ('game = "double-attack"\nself_shuffling_shoe = true\n', "self_shuffling_shoe: 665a.5(h)"),
        ('game = "down-under"\nself_shuffling_shoe = true\n', "self_shuffling_shoe: 685a.5(h)"),
        # Ruling G13: a direct-insert shuffler is a shuffler that loads the dealing shoe.
        (
            'game = "double-attack"\nautomated_shuffler = false\ndirect_insert_shuffler = true\n',
            "direct_insert_shuffler: 665a.5(a): a direct-insert shuffler is an automated shuffler",
        ),
        ('game = "dj-wild"\ndirect_insert_shuffler = true\n', "direct_insert_shuffler: 687a.9(a)(2)"),
        ('game = "double-back-jack"\nboxes = 7\n', "boxes: 673a.2(a)"),
        ('game = "double-back-jack"\n[wagers]\nbust_it = true\n', "wagers: 665a.6(f)"),
        ('game = "double-attack"\n[rulings]\ndealer_ace_ace = 12\n', "dealer_ace_ace: applies to Down Under"),
        (
            'game = "down-under"\n[rulings]\nmatch_the_dealer_pays = "all"\n',
            "match_the_dealer_pays: must be one of 'best'",
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


def test_673a_3b_one_deck_a_batch_at_a_shuffler_table_is_two_decks_in_all(tmp_path: Path) -> None:
    """673a.3(b): at least two decks, separated into two batches with an equal number of decks
    in each: two batches of one deck meet it (ruling D8), and such a table deals a round."""
    from controller.table import inputs as I
    from controller.table.asking import asking
    from tests.core.conftest import Desk

    options = load_game_options(write(tmp_path, 'game = "double-back-jack"\ndecks_per_batch = 1\n'))
    assert options.automated_shuffler and options.decks == 1
    desk = Desk(options)
    assert desk.table.batches["blue"].size == 52 and asking(desk.table)["what"] == "bets"
    from controller.rules.state import SeatWagers

    desk.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    desk.deal("9C 7D 9D 10H")  # 18 against 17; the dealer stands
    desk.feed(I.KeyPressed(key="stand"))
    assert desk.kinds()[-1] == "round_settled"


def test_687a_9a1_dj_wild_without_its_shuffler_is_refused(tmp_path: Path) -> None:
    """687a.9(a)(1): DJ Wild dealt from the hand is shuffled by an automated shuffler; without one
    the table could never deal, so the file is refused with the section in one line."""
    path = write(tmp_path, 'game = "dj-wild"\nautomated_shuffler = false\n')
    with pytest.raises(ConfigError) as e:
        load_game_options(path)
    assert str(e.value) == (
        f"{path}: automated_shuffler: 687a.9(a)(1): "
        "DJ Wild dealt from the hand is shuffled by an automated shuffler"
    )


@pytest.mark.parametrize("shuffler", ["", "automated_shuffler = false\n"], ids=["with-shuffler", "without"])
def test_687a_9a2_a_self_shuffling_shoe_at_dj_wild_names_its_own_key(tmp_path: Path, shuffler: str) -> None:
    """687a.9(a)(2): DJ Wild is dealt from the dealer's hand; a self-shuffling shoe is refused
    naming ``self_shuffling_shoe``, the key to change, not ``automated_shuffler``."""
    path = write(tmp_path, 'game = "dj-wild"\n' + shuffler + "self_shuffling_shoe = true\n")
    with pytest.raises(ConfigError) as e:
        load_game_options(path)
    assert str(e.value).startswith(
        f"{path}: self_shuffling_shoe: 687a.9(a)(2): DJ Wild is dealt from the dealer's hand"
    )


def test_g3_a_chip_unit_beyond_any_chip_is_refused(tmp_path: Path) -> None:
    """G3: ``min_chip = 100000000000000000000`` passed as a positive integer (issue 38)."""
    path = write(tmp_path, 'game = "double-attack"\n[rulings]\nmin_chip = 100000000000000000000\n')
    with pytest.raises(ConfigError) as e:
        load_game_options(path)
    assert str(e.value) == f"{path}: rulings.min_chip: G3: min_chip must be a chip unit from 1 to 100000"


def test_a_self_shuffling_shoe_table_declares_no_batch_shuffler(tmp_path: Path) -> None:
    text = 'game = "down-under"\nautomated_shuffler = false\nself_shuffling_shoe = true\n'
    options = load_game_options(write(tmp_path, text))
    assert options.self_shuffling_shoe and options.shuffling_device and not options.automated_shuffler


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_game_options(tmp_path / "nope.toml")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_options_round_trip_through_their_document(path: Path) -> None:
    from controller.game_config import options_from_dict, options_to_dict

    options = load_game_options(path)
    assert options_from_dict(options_to_dict(options), "round trip") == options
