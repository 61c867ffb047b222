"""The player strategy the simulator uses, documented so its figures can be reproduced.

One table for all three games: the common six-deck basic strategy for a dealer who stands on
soft 17, double after split allowed, late surrender (Wizard of Odds' chart for 4-8 decks, S17,
DAS, LS). It is not the optimal strategy for these variants (Double Attack has no 10s, Down Under
dealers draw to 22, Double Back Jack pays 21 at once); it is a fixed, well-known player so the
house edge figures are comparable run to run. Wager choices ("every optional wager placed"):
Bust It, Match-the-Dealer and Double Attack equal to the bet, insurance at half the bet whenever
offered, even money never, Second Chance when the hand's total is 26 or less; a double for its
limit (the simulated table's players double anything but an 11 for half of it: ``double_stake``).

Domain vocabulary, not rules: it imports only controller.cards, because two sides use it. The
controller's statistical simulator (controller/simulate.py) plays its players with it, and the
simulated players at a table on the wire (sim/wire_dealer.py) choose with it from the cards face
up, and sim/ may not import the rules engine. So it works on anything holding ``cards`` and picks
from the legal actions it is given (rules.requests.Action values, or the strings of a public ask).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from controller.cards import Card, total

A = TypeVar("A", bound=str)


class Holding(Protocol):
    """A player hand as the strategy sees it: its cards, face up at the table."""

    @property
    def cards(self) -> Sequence[Card]: ...


UP_COLUMNS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11)  # 11 = ace

# Codes: H hit, S stand, D double else hit, T double else stand, R surrender else hit.
_HARD = {
    9: "HDDDDHHHHH",
    10: "DDDDDDDDHH",
    11: "DDDDDDDDDH",
    12: "HHSSSHHHHH",
    13: "SSSSSHHHHH",
    14: "SSSSSHHHHH",
    15: "SSSSSHHHRH",
    16: "SSSSSHHRRR",
}
_SOFT = {
    13: "HHHDDHHHHH",
    14: "HHHDDHHHHH",
    15: "HHDDDHHHHH",
    16: "HHDDDHHHHH",
    17: "HDDDDHHHHH",
    18: "STTTTSSHHH",
}
_PAIRS = {  # P split, - do not
    1: "PPPPPPPPPP",
    2: "PPPPPP----",
    3: "PPPPPP----",
    4: "---PP-----",
    6: "PPPPP-----",
    7: "PPPPPP----",
    8: "PPPPPPPPPP",
    9: "PPPPP-PP--",
}
SECOND_CHANCE_UP_TO = 26
BET = 10  # chips per box; Bust It, Match-the-Dealer and Double Attack equal it


def insurance_stake(bet: int) -> int:
    """Insurance at half the bet, whenever offered."""
    return bet // 2


def double_stake(hand: Holding, limit: int) -> int:
    """The chips a double is for at the simulated table: its limit on 11, half of it (at least
    one chip) on anything else (a soft hand, a 9 or a 10), so the wire carries doubles for less
    (673a.10(a), 665a.10(a), 685a.9(a) allow any amount up to the limit). The statistical
    simulator always doubles for the limit."""
    t, soft = total(hand.cards)
    return limit if t == 11 and not soft else max(1, limit // 2)


def takes_second_chance(hand: Holding) -> bool:
    """673a.7(l): buy the Second Chance card when the busted total is 26 or less."""
    return total(hand.cards)[0] <= SECOND_CHANCE_UP_TO


def up_value(up: Card) -> int:
    return 11 if up.is_ace else up.points


def _code(hand_total: int, soft: bool, up: int) -> str:
    col = up - 2
    if soft:
        if hand_total >= 19:
            return "S"
        return _SOFT[hand_total][col] if hand_total in _SOFT else "H"
    if hand_total <= 8:
        return "H"
    if hand_total >= 17:
        return "S"
    return _HARD[hand_total][col]


def choose(hand: Holding, up: Card, legal: frozenset[A]) -> A:
    """The action basic strategy takes, one of ``legal`` (hit, stand, double, split, surrender)."""

    def pick(name: str) -> A | None:
        return next((a for a in legal if a == name), None)

    upv = up_value(up)
    cards = hand.cards
    split = pick("split")
    if split is not None and cards[0].points != 10:
        row = _PAIRS.get(cards[0].points)
        if row is not None and row[upv - 2] == "P":
            return split
    t, soft = total(cards)
    code = _code(t, soft, upv)
    stand, double = pick("stand"), pick("double")
    if code == "S" and stand is not None:
        return stand
    if code in "DT" and double is not None:
        return double
    if code == "T" and stand is not None:
        return stand
    surrender = pick("surrender")
    if code == "R" and surrender is not None:
        return surrender
    chosen = pick("hit") or stand
    if chosen is None:
        raise ValueError(f"no hit or stand among {sorted(legal)}")
    return chosen
