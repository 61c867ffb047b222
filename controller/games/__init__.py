"""The games: one module each, registered in :mod:`controller.games.registry`.

``from controller.games import GameId, GameSpec, game_spec`` is how the rest of tablectl reads a
game. The games tablectl ships register by being imported below, in the order every listing of
games shows; a game of its own (a test's, a plug-in's) calls :func:`register` itself.
"""

from __future__ import annotations

from controller.games.registry import (
    GAMES,
    GameRegistrationError,
    blackjack_games,
    game_ids,
    game_spec,
    register,
    registered,
    unregister,
    wager_kinds,
)
from controller.games.spec import RULE_NAMES, DeckRule, GameId, GameSpec, WagerKind, blackjack_devices

# The shipped games, each registering itself on import (the order is the listings' order).
from controller.games import double_back_jack, double_attack, down_under, dj_wild  # noqa: F401  # isort: skip

__all__ = [
    "GAMES",
    "RULE_NAMES",
    "DeckRule",
    "GameId",
    "GameRegistrationError",
    "GameSpec",
    "WagerKind",
    "blackjack_devices",
    "blackjack_games",
    "game_ids",
    "game_spec",
    "register",
    "registered",
    "unregister",
    "wager_kinds",
]
