"""Playing cards as the regulations describe them.

A card has a rank, a suit and (once it belongs to a batch) a back colour. Card objects are
interned: there is exactly one object per (rank, suit, back), so the rules engine can compare
and hash them cheaply and a 416-card shoe costs 416 references, not 416 objects.

Text form, used by scripts, the journal and device frames: rank then suit, e.g. ``"10H"``,
``"AS"``, ``"QD"``; the DJ Wild joker is ``"JK"``. The cover card is not a playing card and
never appears in a shoe listing; it is a position (see ``controller.shoe``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Final

RANKS: Final = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUITS: Final = ("S", "H", "D", "C")
JOKER_RANK: Final = "JK"

_POINTS: Final = {
    "A": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9,
    "10": 10, "J": 10, "Q": 10, "K": 10, JOKER_RANK: 0,
}  # fmt: skip


class Colour(StrEnum):
    """The colour of a suit's pips, used by the Bust It 8-8-8 pays (665a.12(c))."""

    RED = "red"
    BLACK = "black"


SUIT_COLOUR: Final = {"S": Colour.BLACK, "C": Colour.BLACK, "H": Colour.RED, "D": Colour.RED}


class CardError(ValueError):
    """A card text that names no card."""


@dataclass(frozen=True, slots=True)
class Card:
    """One playing card. Build with :func:`card` or :func:`parse_card`, never directly."""

    rank: str
    suit: str  # "" for the joker
    back: str | None  # back colour of the batch this card belongs to; None when not tracked
    points: int  # ace counts 1 here; hand totals decide when it counts 11
    is_ace: bool
    is_ten_value: bool  # 10, J, Q or K: 673a.3(d)(1),(2)
    is_face: bool  # J, Q or K: the 665a insurance and peek cards

    def __str__(self) -> str:
        return self.rank + self.suit

    @property
    def colour(self) -> Colour | None:
        return SUIT_COLOUR.get(self.suit)

    @property
    def is_joker(self) -> bool:
        return self.rank == JOKER_RANK

    def with_back(self, back: str | None) -> Card:
        return card(self.rank, self.suit, back)


@cache
def card(rank: str, suit: str, back: str | None = None) -> Card:
    """The one Card object for this rank, suit and back colour."""
    if rank == JOKER_RANK:
        if suit:
            raise CardError(f"the joker has no suit: {rank}{suit}")
    elif rank not in _POINTS:
        raise CardError(f"no such rank {rank!r} (A 2-10 J Q K, or JK for the joker)")
    elif suit not in SUIT_COLOUR:
        raise CardError(f"no such suit {suit!r} in {rank}{suit} (S H D C)")
    return Card(
        rank=rank,
        suit=suit,
        back=back,
        points=_POINTS[rank],
        is_ace=rank == "A",
        is_ten_value=rank in ("10", "J", "Q", "K"),
        is_face=rank in ("J", "Q", "K"),
    )


@cache
def parse_card(text: str, back: str | None = None) -> Card:
    """Parse ``"10H"``, ``"as"``, ``"JK"`` (joker). Raises CardError with a one-line reason."""
    if not isinstance(text, str):
        raise CardError(f"a card is text like '10H', not {text!r}")
    t = text.strip().upper()
    if t == JOKER_RANK:
        return card(JOKER_RANK, "", back)
    if len(t) < 2:
        raise CardError(f"not a card: {text!r} (rank then suit, e.g. '10H', 'AS')")
    return card(t[:-1], t[-1], back)


def standard_deck(back: str | None = None) -> list[Card]:
    """Fifty-two cards, one of each rank and suit."""
    return [card(r, s, back) for s in SUITS for r in RANKS]


JOKER: Final = card(JOKER_RANK, "")


# -- totals ---------------------------------------------------------------------------------------
# The chapters' card values added up: shared by the rules (controller/rules/hand.py) and by the
# simulated players' strategy (controller/strategy.py), which must not import the rules.
PLAYER_LIMIT: Final = 21


def hard_total(cards: Sequence[Card]) -> int:
    """Every ace counted 1 (the 'hard total' of 673a.1)."""
    return sum(c.points for c in cards)


def total(cards: Sequence[Card], limit: int = PLAYER_LIMIT) -> tuple[int, bool]:
    """The hand's total and whether it is soft (an ace counted 11), 673a.3(d)(3), 685a.3(d)(3):
    an ace counts 11 unless that takes the hand over ``limit`` (21 for players; 22 for the
    Down Under dealer)."""
    hard = 0
    has_ace = False
    for c in cards:
        hard += c.points
        if c.is_ace:
            has_ace = True
    if has_ace and hard + 10 <= limit:
        return hard + 10, True
    return hard, False
