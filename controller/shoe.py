"""Cutting a shuffled stack and dealing it from a shoe with a cover card.

Pure: randomness comes in as a ``random.Random`` (the simulator's seeded one) and is never drawn
from a global source.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from controller.cards import Card
from controller.errors import RuleViolation

MIN_CUT_FROM_END = 10  # 673a.5(d): the cut is at least ten cards from the top or bottom


def cut(stack: list[Card], at: int) -> list[Card]:
    """673a.5(d): the cards above the cover card go to the bottom. ``at`` counts from the top."""
    n = len(stack)
    if not MIN_CUT_FROM_END <= at <= n - MIN_CUT_FROM_END:
        raise RuleViolation(
            "673a.5(d)",
            f"the cut must be at least {MIN_CUT_FROM_END} cards from either end of {n}, not at {at}",
        )
    return stack[at:] + stack[:at]


def min_cover_from_bottom(n: int) -> int:
    """673a.5(d): the cover card at least 1/4 of the way in from the bottom."""
    return -(-n // 4)


def check_cover(n: int, from_bottom: int) -> None:
    if not min_cover_from_bottom(n) <= from_bottom <= n:
        raise RuleViolation(
            "673a.5(d)",
            f"the cover card must be at least 1/4 of the way in from the bottom "
            f"({min_cover_from_bottom(n)} of {n} cards), not {from_bottom}",
        )


@dataclass(slots=True)
class Shoe:
    """Cards in the order they leave the shoe, and how many lie behind the cover card."""

    cards: list[Card]  # stored reversed so that dealing is list.pop()
    behind_cover: int
    dealt: int = 0

    @classmethod
    def load(cls, stack: list[Card], cover_from_bottom: int) -> Shoe:
        check_cover(len(stack), cover_from_bottom)
        return cls(cards=stack[::-1], behind_cover=cover_from_bottom)

    @property
    def remaining(self) -> int:
        return len(self.cards)

    @property
    def cover_reached(self) -> bool:
        """673a.7(d): the cover card has come out; finish the round, then reshuffle."""
        return len(self.cards) <= self.behind_cover

    def draw(self) -> Card:
        self.dealt += 1
        return self.cards.pop()


def shuffled_shoe(
    batch: list[Card], rng: random.Random, *, penetration: tuple[float, float] = (0.70, 0.75)
) -> Shoe:
    """Shuffle, cut at a random legal place and put the cover card so that between 70% and 75%
    of the cards are dealt: 25-30% from the bottom, inside 673a.5(d)'s quarter."""
    stack = list(batch)
    rng.shuffle(stack)
    n = len(stack)
    stack = cut(stack, rng.randint(MIN_CUT_FROM_END, n - MIN_CUT_FROM_END))
    lo = max(min_cover_from_bottom(n), round(n * (1 - penetration[1])))
    hi = max(lo, round(n * (1 - penetration[0])))
    return Shoe.load(stack, rng.randint(lo, hi))
