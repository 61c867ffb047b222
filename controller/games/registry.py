"""The games tablectl knows: each registered once, by its own module.

:func:`register` checks a game whole before it is known (every rule of
:data:`~controller.games.spec.RULE_NAMES` placed in its chapter, a blackjack game's adjacent-boxes
section, one name per wager key), so the places that read a game never meet a gap: no KeyError,
no fallback to another chapter's section. Games are kept in the order they were registered; the
ones tablectl ships register in :mod:`controller.games` (double-back-jack, double-attack,
down-under, dj-wild), which is the order every listing of games shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from controller.errors import RuleViolation
from controller.games.spec import RULE_NAMES, GameId, GameSpec, WagerKind

_GAMES: dict[GameId, GameSpec] = {}
# Every registered game, by name, read-only (the registry changes only through register()).
GAMES: Final[Mapping[GameId, GameSpec]] = MappingProxyType(_GAMES)


# The other keys of a box's wagers as RoundStarted journals them (seat, bet, player).
_NOT_WAGER_KEYS: Final = frozenset({"seat", "bet", "player", "side"})


class GameRegistrationError(ValueError):
    """A game that cannot be registered: what it lacks, named."""


def register(spec: GameSpec) -> GameSpec:
    """Make ``spec`` known to tablectl; returns it, so a game module can write
    ``GAME = register(GameSpec(...))``."""
    where = f"game {spec.id!s}"
    if not spec.id or not isinstance(spec.id, GameId):
        raise GameRegistrationError(f"{where}: id must be a GameId such as GameId('free-bet')")
    if spec.id in _GAMES:
        raise GameRegistrationError(f"{where}: is already registered")
    missing = sorted(RULE_NAMES - set(spec.lettering))
    unknown = sorted(set(spec.lettering) - RULE_NAMES)
    if missing or unknown:
        raise GameRegistrationError(
            f"{where}: lettering must place every rule of RULE_NAMES"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; not a rule name: {', '.join(unknown)}" if unknown else "")
        )
    if spec.procedure and ":" not in spec.procedure:
        raise GameRegistrationError(f"{where}: procedure is 'module:Class', not {spec.procedure!r}")
    if spec.procedure and not spec.adjacent_boxes:
        raise GameRegistrationError(
            f"{where}: a blackjack game names where the Rules Submission limits one player's"
            " adjacent boxes (adjacent_boxes, e.g. 673a.6(e))"
        )
    taken = sorted({w.key for w in spec.optional_wagers} & _NOT_WAGER_KEYS)
    if taken:
        # A side wager is a keyword of the box's wagers as the journal writes them.
        raise GameRegistrationError(f"{where}: {taken[0]!r} cannot name an optional wager")
    names = {w.key: w.name for g in _GAMES.values() for w in g.wagers}
    for w in spec.wagers:
        if names.get(w.key, w.name) != w.name:
            raise GameRegistrationError(
                f"{where}: wager {w.key} is called {names[w.key]!r} by another game, not {w.name!r}"
            )
    _GAMES[spec.id] = spec
    return spec


def unregister(game: str) -> None:
    """Forget a game (for a test that registers one of its own)."""
    _GAMES.pop(GameId(game), None)


def game_spec(name: str) -> GameSpec:
    """The registered game of this name; RuleViolation naming the known games if there is none."""
    spec = _GAMES.get(GameId(name))
    if spec is None:
        raise RuleViolation("game", f"unknown game {name!r} (one of {', '.join(game_ids())})")
    return spec


def registered() -> tuple[GameSpec, ...]:
    return tuple(_GAMES.values())


def game_ids() -> tuple[GameId, ...]:
    return tuple(_GAMES)


def blackjack_games() -> tuple[GameId, ...]:
    """The games whose rounds the rules engine plays (those with a blackjack procedure)."""
    return tuple(g.id for g in _GAMES.values() if g.blackjack)


def wager_kinds() -> dict[str, WagerKind]:
    """Every registered game's wagers, by key (one name per key: register() sees to it)."""
    out: dict[str, WagerKind] = {}
    for g in _GAMES.values():
        for w in g.wagers:
            out.setdefault(w.key, w)
    return out
