"""The registry of games (controller/games/): every registered game is whole, so nothing that
reads one meets a gap; and register() refuses a game with one, naming it."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from controller.game_config import GENERAL_RULINGS, Rulings, load_game_options, optional_wager_keys
from controller.games import (
    RULE_NAMES,
    GameId,
    GameRegistrationError,
    GameSpec,
    WagerKind,
    game_spec,
    register,
    registered,
)
from controller.rules.procedure import BlackjackProcedure
from controller.rules.requests import OFFER_NAMES
from controller.rules.round import procedure_of
from controller.rules.wagers import settled_kinds
from devices.profiles import DeviceKind

GAMES_DIR = Path(__file__).parent.parent / "config" / "games"
EVERY_GAME = [g.id for g in registered()]


@pytest.mark.parametrize("game", EVERY_GAME)
def test_a_registered_game_is_whole(game: GameId) -> None:
    """What each place that reads a game asks of it is there: the procedure loads (rules/round.py),
    the required devices are device kinds (config check), the rulings and optional wagers are
    the game file's, the offers the rules engine's, every named rule has its section."""
    spec = game_spec(game)
    if spec.blackjack:
        assert issubclass(procedure_of(spec), BlackjackProcedure)
        assert spec.adjacent_boxes.startswith(spec.chapter)
        # The rules engine settles every wager a blackjack game declares (rules/wagers.py).
        assert {w.key for w in spec.wagers} <= set(settled_kinds())
    for kind, section in spec.required_devices:
        DeviceKind(kind)
        assert section.startswith(spec.chapter)
    assert set(spec.rulings) <= {f.name for f in fields(Rulings)} - set(GENERAL_RULINGS)
    assert {w.key for w in spec.optional_wagers} <= set(optional_wager_keys())
    assert set(spec.offers) <= set(OFFER_NAMES.values())
    assert set(spec.lettering) == RULE_NAMES
    spec.check_decks(spec.default_decks)
    assert len(spec.batch(1)) == spec.cards_per_deck


def test_the_shipped_wagers_keep_their_order() -> None:
    """The script's nets and the simulator's report list the wagers in this order, as they always
    have; the game file's [wagers] keys are the games' optional wagers in registration order."""
    assert settled_kinds() == (
        "bet", "double_attack", "insurance", "bust_it", "match_the_dealer", "second_chance"
    )  # fmt: skip
    assert optional_wager_keys() == ("bust_it", "match_the_dealer", "progressive")


@pytest.mark.parametrize("game", EVERY_GAME)
def test_each_shipped_game_has_its_game_file(game: GameId) -> None:
    assert load_game_options(GAMES_DIR / f"{game}.toml").game == game


def test_every_ruling_is_general_or_some_games() -> None:
    """A ruling no game claims would apply to none: the game file could never set it."""
    claimed = {r for g in registered() for r in g.rulings} | set(GENERAL_RULINGS)
    assert claimed == {f.name for f in fields(Rulings)}


def _game(**changes: object) -> GameSpec:
    base = game_spec(GameId.DOUBLE_BACK_JACK)
    return replace(base, **{"id": GameId("half-made"), **changes})


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"id": GameId.DOUBLE_BACK_JACK}, "already registered"),
        ({"lettering": {"peek": "673a.7(h)"}}, "missing"),
        ({"adjacent_boxes": ""}, "adjacent boxes"),
        ({"procedure": "DoubleBackJack"}, "module:Class"),
        ({"wagers": (WagerKind("bet", "Wager", "673a.6"),)}, "'Bet'"),
        ({"wagers": (WagerKind("player", "Player", "673a.6", optional=True),)}, "'player' cannot name"),
    ],
)
def test_register_refuses_a_game_with_a_gap(changes: dict[str, object], words: str) -> None:
    spec = _game(**changes)
    with pytest.raises(GameRegistrationError, match=words):
        register(spec)
    assert [g.id for g in registered()] == EVERY_GAME
