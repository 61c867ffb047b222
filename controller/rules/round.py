"""One round of a blackjack game as a sans-I/O object.

``Round`` opens with the wagers on the layout and then asks, one request at a time, for what the
procedure needs (:mod:`controller.rules.requests`). ``answer()`` resumes it. When ``request`` is
None the round is over and ``state.settlements`` holds every wager's settlement, each with the
section that decided it.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from controller.errors import RuleViolation
from controller.game_config import GameOptions
from controller.games import GameSpec, wager_kinds
from controller.rules.hand import Hand
from controller.rules.procedure import BlackjackProcedure
from controller.rules.requests import Action, CardFor, Decision, Request
from controller.rules.state import Box, RoundState, SeatWagers


def procedure_of(spec: GameSpec) -> type[BlackjackProcedure]:
    """The blackjack procedure the game names (GameSpec.procedure, "module:Class"); RuleViolation
    for a game the rules engine does not play round by round."""
    if not spec.blackjack:
        raise RuleViolation(spec.chapter, f"{spec.title} is not a blackjack round")
    return _load(spec.procedure)


@cache
def _load(reference: str) -> type[BlackjackProcedure]:
    # The game names its procedure rather than importing it: the games are the vocabulary every
    # layer reads (the simulators too), the procedures are the rules engine's.
    module, _, name = reference.partition(":")
    found = getattr(importlib.import_module(module), name, None)
    if not (isinstance(found, type) and issubclass(found, BlackjackProcedure)):
        raise TypeError(f"{reference} is not a BlackjackProcedure")
    return found


def check_wagers(options: GameOptions, wagers: list[SeatWagers]) -> None:
    """Refuse wagers the chapter does not allow, naming the section."""
    chapter = options.spec.chapter
    seen: set[int] = set()
    for w in wagers:
        if not 1 <= w.seat <= options.boxes:
            raise RuleViolation(
                f"{chapter}.2(a)", f"seat {w.seat} does not exist; this table has boxes 1 to {options.boxes}"
            )
        if w.seat in seen:
            raise RuleViolation(f"{chapter}.6", f"seat {w.seat} is listed twice")
        seen.add(w.seat)
        if w.bet <= 0:
            raise RuleViolation(f"{chapter}.6(d)", f"seat {w.seat}: a Bet Wager is needed to play the round")
        for key, stake in w.side:
            check_side_wager(options, w, key, stake)
    check_boxes_per_player(options, wagers)


def side_wagers(options: GameOptions, amount: int) -> dict[str, int]:
    """Every side wager the table offers, each of ``amount``: the wagers a box places with its
    Bet when it places them all (the simulator's, a virtual table's, a sensed side spot's)."""
    return {w.key: amount for w in options.spec.optional_wagers if options.offers(w.key)}


def check_side_wager(options: GameOptions, w: SeatWagers, key: str, stake: int) -> None:
    """A side wager goes down only where the game declares it optional and the game file offers
    it (at the decks it may be offered with), as the chapter limits it."""
    spec = options.spec
    kind = next((k for k in spec.wagers if k.key == key), None) or wager_kinds().get(key)
    if kind is None:
        raise RuleViolation(f"{spec.chapter}.6", f"seat {w.seat}: there is no {key} wager in {spec.title}")
    if not options.offers(key):
        if kind.optional and kind in spec.wagers and kind.decks and options.decks not in kind.decks:
            raise RuleViolation(kind.section, kind.decks_refusal.format(decks=options.decks))
        raise RuleViolation(kind.section, f"this table does not offer the {kind.name} wager")
    if kind.at_most_bet and not 0 < stake <= w.bet:
        raise RuleViolation(
            kind.section, f"seat {w.seat}: a {kind.name} wager of {stake} is more than the Bet of {w.bet}"
        )
    if stake < 0:
        raise RuleViolation(kind.section, "a wager cannot be negative")


def check_boxes_per_player(options: GameOptions, wagers: list[SeatWagers]) -> None:
    """673a.6(e), 665a.6(g), 685a.6(f): a player bets on at most the Rules Submission's number of
    boxes, and they are adjacent. Boxes whose player is not known are not grouped."""
    section = options.spec.adjacent_boxes
    by_player: dict[str, list[int]] = {}
    for w in wagers:
        if w.player:
            by_player.setdefault(w.player, []).append(w.seat)
    for player, seats in by_player.items():
        seats.sort()
        if len(seats) > options.boxes_per_player:
            raise RuleViolation(
                section,
                f"player {player} bets on {len(seats)} boxes; the Rules Submission allows "
                f"{options.boxes_per_player}",
            )
        if seats[-1] - seats[0] != len(seats) - 1:
            raise RuleViolation(
                section, f"player {player}'s boxes {', '.join(map(str, seats))} are not adjacent"
            )


class Round:
    def __init__(self, options: GameOptions, wagers: list[SeatWagers], *, checked: bool = False) -> None:
        """Open a round. ``checked=True`` skips :func:`check_wagers` for wagers already checked
        (the simulator places the same wagers every round)."""
        procedure = procedure_of(options.spec)
        if not checked:
            check_wagers(options, wagers)
        boxes = [
            Box(
                seat=w.seat,
                bet=w.bet,
                side=dict(w.side),
                hands=[Hand(seat=w.seat, index=0, bet=w.bet)],
            )
            for w in sorted(wagers, key=lambda w: w.seat)
        ]
        self.state = RoundState(options=options, boxes=boxes)
        self.procedure = procedure(self.state)
        self._steps = self.procedure.run()
        self.request: Request | None = next(self._steps)

    def outcome(self) -> dict[str, Any]:
        """The dealer's hand and every box's hands with totals and results, in plain data."""
        state = self.state
        return {
            "dealer": {
                "cards": [str(c) for c in state.dealer],
                "total": self.procedure.dealer_total(),
                "blackjack": self.procedure.dealer_blackjack(),
            },
            "boxes": [
                {
                    "seat": box.seat,
                    "hands": [
                        {"cards": [str(c) for c in h.cards], "total": h.total, "result": h.result}
                        for h in box.hands
                    ],
                }
                for box in state.boxes
            ],
        }

    @property
    def finished(self) -> bool:
        return self.request is None

    def call_dead(self, seat: int, section: str) -> None:
        """One box's hands called dead (the table core checked when this is allowed). A card or a
        decision the round was waiting for from that box is answered: no card, stand."""
        box = next(b for b in self.state.boxes if b.seat == seat)
        self.procedure.call_dead(box, section)
        while self.request is not None and getattr(self.request, "seat", None) == seat:
            if isinstance(self.request, CardFor):
                self.answer(None)
            elif isinstance(self.request, Decision):
                self.answer(Action.STAND)
            else:  # pragma: no cover - the table core refuses a dead call at an offer
                raise RuleViolation(section, f"seat {seat} is answering an offer")

    def answer(self, value: Any) -> Request | None:
        """Resume the procedure with the answer to the current request; return the next one."""
        if self.request is None:
            raise RuleViolation("round", "the round is over; nothing is asked")
        try:
            self.request = self._steps.send(value)
        except StopIteration:
            self.request = None
        return self.request
