"""Wager kinds, payout odds and settlement lines.

Money is never multiplied inside the engine. Each settlement line records the stake and the net
result as a whole number of half-stakes (``halves``): a 1 to 1 win is +2, 3 to 2 is +3, 5 to 2 is
+5, a loss -2, a surrender -1, a push 0. Every payout in these chapters is a multiple of half the
stake, so ``stake * halves / 2`` is exact with integer chips, and the simulator can add up
billions of rounds in plain integers.
"""

from __future__ import annotations

from enum import StrEnum
from fractions import Fraction
from typing import NamedTuple


class Wager(StrEnum):
    BET = "bet"  # Blackjack Wager (673a) / Bet Wager (665a, 685a); doubles and splits count here
    DOUBLE_ATTACK = "double_attack"  # 665a.6(e)
    INSURANCE = "insurance"
    BUST_IT = "bust_it"  # 665a.6(f)
    MATCH_THE_DEALER = "match_the_dealer"  # 685a.6(e)
    SECOND_CHANCE = "second_chance"  # 673a.7(l)


WAGER_KINDS: tuple[Wager, ...] = tuple(Wager)


def odds(to: int, per: int = 1) -> int:
    """Net half-stakes of a win paid at ``to`` to ``per``."""
    halves, rest = divmod(2 * to, per)
    if rest:
        raise ValueError(f"{to} to {per} is not a multiple of half the stake")
    return halves


LOSE = -2
PUSH = 0
HALF_LOST = -1  # surrender: half collected, half returned
EVEN = odds(1)


def as_number(x: Fraction) -> int | float:
    """A money amount for JSON: whole chips as an int, a half chip as a float (7.5)."""
    return int(x) if x.denominator == 1 else float(x)


class Settled(NamedTuple):
    """One wager's settlement: who, which wager, the stake, the net in half-stakes, and why."""

    seat: int
    hand: int | None  # None for box-level wagers (insurance, side wagers)
    wager: Wager
    stake: int | Fraction
    halves: int
    section: str

    @property
    def net(self) -> Fraction:
        return Fraction(self.stake) * self.halves / 2
