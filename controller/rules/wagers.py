"""Wager kinds, payout odds and settlement lines.

Money is never multiplied inside the engine. Each settlement line records the stake and the net
result as a whole number of half-stakes (``halves``): a 1 to 1 win is +2, 3 to 2 is +3, 5 to 2 is
+5, a loss -2, a surrender -1, a push 0. Every payout in these chapters is a multiple of half the
stake, so ``stake * halves / 2`` is exact with integer chips, and the simulator can add up
billions of rounds in plain integers.
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar, NamedTuple

from controller.games import registered


class Wager(str):
    """A wager's kind, as its game declares it (:class:`controller.games.WagerKind`'s ``key``)
    and the settlement lines and the journal write it ("bust_it").

    Open: every wager a registered game declares is a Wager. The shipped games' wagers are named
    below for the procedures that settle them; a new game's wager needs no name here.
    """

    __slots__ = ()

    BET: ClassVar[Wager]  # Blackjack Wager (673a) / Bet Wager (665a, 685a); doubles and splits count here
    DOUBLE_ATTACK: ClassVar[Wager]  # 665a.6(e)
    INSURANCE: ClassVar[Wager]
    BUST_IT: ClassVar[Wager]  # 665a.6(f)
    MATCH_THE_DEALER: ClassVar[Wager]  # 685a.6(e)
    SECOND_CHANCE: ClassVar[Wager]  # 673a.7(l)

    @property
    def value(self) -> str:
        """The key as plain text (what an enum member's ``value`` was)."""
        return str(self)

    def __repr__(self) -> str:
        # As an enum member's: <Wager.BUST_IT: 'bust_it'> (settlement lines' reprs, which the rules
        # engine's fingerprint hashes, have always read so).
        return f"<Wager.{self.upper()}: {str(self)!r}>"


Wager.BET = Wager("bet")
Wager.DOUBLE_ATTACK = Wager("double_attack")
Wager.INSURANCE = Wager("insurance")
Wager.BUST_IT = Wager("bust_it")
Wager.MATCH_THE_DEALER = Wager("match_the_dealer")
Wager.SECOND_CHANCE = Wager("second_chance")

# The order the script's nets and the simulator's report have always listed the shipped games'
# wagers in; every other wager follows, in the order its game registered.
_LISTED: tuple[Wager, ...] = (
    Wager.BET,
    Wager.DOUBLE_ATTACK,
    Wager.INSURANCE,
    Wager.BUST_IT,
    Wager.MATCH_THE_DEALER,
    Wager.SECOND_CHANCE,
)


def settled_kinds() -> tuple[Wager, ...]:
    """The wagers the rules engine settles: every wager of a registered blackjack game (one with
    a procedure), each once, in a stable order (the shipped ones as listed above, then the rest
    by registration)."""
    declared = dict.fromkeys(w.key for g in registered() if g.blackjack for w in g.wagers)
    rank: dict[str, int] = {k: i for i, k in enumerate(_LISTED)}
    return tuple(Wager(k) for k in sorted(declared, key=lambda k: rank.get(k, len(rank))))


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
