"""Hands, totals and the wagers that ride on them.

Totals follow the chapters' card values: 2-10 at face value, J/Q/K 10, an ace 11 unless that
takes the hand over the limit (21 for players; 21 for the dealer in 673a and 665a, 22 for the
dealer in Down Under, 685a.3(d)(3)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.cards import PLAYER_LIMIT, Card, hard_total, total

__all__ = ["PLAYER_LIMIT", "Hand", "hard_total", "is_blackjack", "total"]


def is_blackjack(cards: Sequence[Card]) -> bool:
    """An ace and a 10-value card as the initial two cards (673a.1, 665a.1, 685a.1)."""
    return len(cards) == 2 and (
        (cards[0].is_ace and cards[1].is_ten_value) or (cards[1].is_ace and cards[0].is_ten_value)
    )


@dataclass(slots=True, eq=False)
class Hand:
    """One player hand. A box starts with one; splitting adds more (673a.11, 665a.11, 685a.10).

    Stakes are the chips on the layout for this hand. ``bet`` is the Bet (Blackjack) Wager, or on
    a hand formed by a split, the split wager (which in Double Attack equals the original Bet plus
    Double Attack, 665a.11(a); ruling A3).

    Cards enter only through :meth:`add` and leave only through :meth:`take_last` (a split), so the
    hard total and the ace count are kept as the hand changes instead of recounted per question.
    """

    seat: int
    index: int
    cards: list[Card] = field(default_factory=list)
    bet: int = 0
    double_attack: int = 0
    double_down: int = 0
    second_chance: int = 0
    from_split: bool = False
    split_aces: bool = False
    doubled: bool = False
    acted: bool = False  # a decision other than the first has been taken on this hand
    stood: bool = False  # the player decided to stand (665a.9(a): no surrender after that)
    done: bool = False
    # The card the dealer missed and the player takes after the others (673a.13(h)): what it was
    # for ("hit", "double", "split"); None when no card is put off.
    later: str | None = None
    settled: bool = False  # the Bet (and its companions) are settled; nothing more to do
    result: str = ""  # blackjack | win | lose | push | surrender, of the Bet wager
    second_chance_card: Card | None = None
    hard: int = 0
    aces: int = 0

    def __post_init__(self) -> None:
        if self.cards:
            self.hard = hard_total(self.cards)
            self.aces = sum(1 for c in self.cards if c.is_ace)

    def add(self, card: Card) -> None:
        self.cards.append(card)
        self.hard += card.points
        if card.is_ace:
            self.aces += 1

    def add_second_chance(self, card: Card) -> None:
        """673a.7(l): the card's value (an ace 1) is subtracted from the hand's hard total."""
        self.cards.append(card)
        self.second_chance_card = card
        self.hard -= card.points

    def take_last(self) -> Card:
        card = self.cards.pop()
        self.hard -= card.points
        if card.is_ace:
            self.aces -= 1
        return card

    @property
    def total(self) -> int:
        hard = self.hard
        if self.aces and hard <= 11 and self.second_chance_card is None:
            return hard + 10
        return hard

    @property
    def soft(self) -> bool:
        return bool(self.aces) and self.hard <= 11 and self.second_chance_card is None

    @property
    def blackjack(self) -> bool:
        return not self.from_split and is_blackjack(self.cards)

    @property
    def busted(self) -> bool:
        return self.total > PLAYER_LIMIT
