from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any

from controller.cards import parse_card
from controller.game_config import GameOptions, default_options
from controller.rules.requests import ReaderUse
from controller.rules.state import SeatWagers
from controller.script import ScriptedRound, ScriptSeat


def seat(n: int, bet: int = 10, *actions: str, **extra: Any) -> ScriptSeat:
    wagers = SeatWagers(
        seat=n, bet=bet, bust_it=extra.pop("bust_it", 0), match_the_dealer=extra.pop("match_the_dealer", 0)
    )
    return ScriptSeat(seat=n, wagers=wagers, actions=deque(actions), **extra)


def options(game: str, decks: int | None = None, **rulings: Any) -> GameOptions:
    opts = default_options(game, decks)
    return replace(opts, rulings=replace(opts.rulings, **rulings))


def play(opts: GameOptions, shoe: str, *seats: ScriptSeat, reader: Any = None) -> dict[str, Any]:
    """Play a round from a space-separated shoe. ``reader`` overrides the reader's report (a
    misreading device); by default it reports the truth."""
    cards = [parse_card(c) for c in shoe.split()]
    rnd = ScriptedRound(opts, cards, list(seats))
    if reader is not None:

        def misread(req: ReaderUse) -> Any:
            return reader

        rnd.reader = misread  # type: ignore[method-assign]
    return rnd.play()


def net(result: dict[str, Any], seat_no: int = 1) -> dict[str, Any]:
    s = next(s for s in result["seats"] if s["seat"] == seat_no)
    return {k: v for k, v in s["net"].items() if v} | {"total": s["total"]}
