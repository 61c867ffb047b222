"""What a round procedure asks of the world, one request at a time.

A procedure is a generator: it yields a request and is resumed with the answer. Whoever drives
it (a scripted round, the simulator, the table core fed by devices) answers the same requests,
so the rules are written once. Answers:

- ``CardFor``          -> the next Card out of the shoe
- ``DoubleAttackOffer``, ``InsuranceOffer`` -> an amount (0 = declined)
- ``EvenMoneyOffer``, ``SurrenderOffer``, ``SecondChanceOffer`` -> bool
- ``ReaderUse``        -> the reader's report: bool (dealer Blackjack?) or a MasqueRange
- ``Decision``         -> an Action (a double for the most the rules allow), or a ``DoubleFor``
  (a double for less: the chapters say only that it "may not exceed" a limit)
- ``CardLaterOffer``   -> bool: the card the dealer missed dealt after the others (True), or the
  hand dead (False)

A ``CardFor`` of a player's card may instead be answered ``CardMissed``: the dealer did not deal
it (673a.13(g),(h), 665a.13(f),(g), 685a.12(f),(g)); the procedure then offers the player the
choice (``CardLaterOffer``).

Requests are treated as immutable values. They are plain slotted dataclasses rather than frozen
ones because a frozen dataclass costs twice as much to build, and a round builds a dozen of them:
that alone was a fifth of the simulator's time per round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar, assert_never

DEALER = 0  # the dealer's seat number in CardFor


class Action(StrEnum):
    HIT = "hit"
    STAND = "stand"
    DOUBLE = "double"
    SPLIT = "split"
    SURRENDER = "surrender"


class MasqueRange(StrEnum):
    """The Masque reader's lights, 685a.3(e)."""

    SMALL = "small"  # blue, 2-5
    MEDIUM = "medium"  # red, 6-9
    LARGE = "large"  # yellow, 10-A


@dataclass(frozen=True, slots=True)
class DoubleFor:
    """A double down for ``amount`` chips, at most the limit of 673a.10(a), 665a.10(a) or
    685a.9(a) ("may not exceed"): a double for less than the limit is legal. Answers a
    ``Decision``; a plain ``Action.DOUBLE`` is a double for the limit."""

    amount: int


@dataclass(slots=True)
class CardFor:
    seat: int  # DEALER or a seat number
    hand: int  # hand index within the seat; 0 for the dealer
    face_up: bool = True
    purpose: str = ""  # "second_chance", "double", "split", "bust_it" ...


# Every offer, registered with :func:`offer` where it is declared, in that order:
# OFFER_NAMES: its public name, in the dealer-facing ask, the journal's offer_answered, the docs
# and a game's GameSpec.offers.
# OFFER_ANSWERS: the keypad keys that answer it (docs/mqtt.md, "asking") and what each does.
OFFER_NAMES: dict[type, str] = {}
OFFER_ANSWERS: dict[type, tuple[tuple[str, str], ...]] = {}

C = TypeVar("C", bound=type)

# A wager offer (insurance, Double Attack) is taken with `double` (the largest wager allowed, as
# placed on the layout) and declined with `next`; `insurance_closed` declines every offer still
# open.
WAGER_OFFER_KEYS: tuple[tuple[str, str], ...] = (
    ("double", "take"),
    ("next", "decline"),
    ("insurance_closed", "decline_all"),
)


def offer(name: str, answers: tuple[tuple[str, str], ...]) -> Callable[[C], C]:
    """Register an offer request class: its public ``name`` and the keypad ``answers``
    ((key, what it does), ...). A new offer is its class, so decorated, and its answer."""

    def register(cls: C) -> C:
        if cls in OFFER_NAMES or name in OFFER_NAMES.values():
            raise ValueError(f"offer {name!r} is registered twice")
        OFFER_NAMES[cls] = name
        OFFER_ANSWERS[cls] = answers
        return cls

    return register


@offer("insurance", WAGER_OFFER_KEYS)
@dataclass(slots=True)
class InsuranceOffer:
    seat: int
    maximum: int


@offer("double_attack", WAGER_OFFER_KEYS)
@dataclass(slots=True)
class DoubleAttackOffer:
    seat: int
    maximum: int


@offer("even_money", (("double", "take"), ("next", "decline")))
@dataclass(slots=True)
class EvenMoneyOffer:
    seat: int


@offer("surrender", (("surrender", "take"), ("next", "decline")))
@dataclass(slots=True)
class SurrenderOffer:
    """Double Back Jack: surrender asked before the reader when the up card is an ace or 10 (D5)."""

    seat: int


@offer("second_chance", (("second_chance", "take"), ("next", "decline")))
@dataclass(slots=True)
class SecondChanceOffer:
    seat: int
    hand: int
    stake: int


@dataclass(slots=True)
class ReaderUse:
    """The hole card goes into the reader: peek device (673a/665a) or Masque reader (685a)."""

    masque: bool


@dataclass(slots=True)
class Decision:
    seat: int
    hand: int
    legal: frozenset[Action]


@dataclass(frozen=True, slots=True)
class CardMissed:
    """The answer to a player's ``CardFor`` when the dealer did not deal it; ``section`` is the
    subsection that gives the player his option (673a.13(g) for the second card of the deal,
    673a.13(h) for a card requested after it; 665a.13(f),(g); 685a.12(f),(g))."""

    section: str


# The player asks for his card after the others with `hit`; `next` takes the dead hand.
@offer("card_later", (("hit", "take"), ("next", "decline")))
@dataclass(slots=True)
class CardLaterOffer:
    """The player's option when the dealer missed his card: the card dealt after all other
    players have received theirs (take), or the hand dead and its wagers returned (decline).
    ``section`` as in the ``CardMissed`` it follows."""

    seat: int
    hand: int
    section: str


Request = (
    CardFor
    | DoubleAttackOffer
    | InsuranceOffer
    | EvenMoneyOffer
    | SurrenderOffer
    | SecondChanceOffer
    | ReaderUse
    | Decision
    | CardLaterOffer
)


Offer = (
    InsuranceOffer | DoubleAttackOffer | EvenMoneyOffer | SurrenderOffer | SecondChanceOffer | CardLaterOffer
)

T = TypeVar("T", covariant=True)


class Answerer(Protocol[T]):
    """Whoever answers a round's requests (a script, the simulator, a virtual dealer, a test rig):
    one method per kind of request. ``answer`` is the one dispatch from a request to its method;
    ``T`` is what the answerer gives back (the answer itself, a table step, a coroutine)."""

    def card(self, req: CardFor) -> T: ...
    def decision(self, req: Decision) -> T: ...
    def reader(self, req: ReaderUse) -> T: ...
    def insurance(self, req: InsuranceOffer) -> T: ...
    def double_attack(self, req: DoubleAttackOffer) -> T: ...
    def even_money(self, req: EvenMoneyOffer) -> T: ...
    def surrender(self, req: SurrenderOffer) -> T: ...
    def second_chance(self, req: SecondChanceOffer) -> T: ...
    def card_later(self, req: CardLaterOffer) -> T: ...


def answer(req: Request, by: Answerer[T]) -> T:
    """Route ``req`` to the method of ``by`` that answers its kind (mypy checks every kind is
    routed: a new request type without a case here is an error)."""
    # The commonest first (a failed case costs as much as the call): a card, a decision, Double
    # Attack's offer on every box, then the rarer ones.
    match req:
        case CardFor():
            return by.card(req)
        case Decision():
            return by.decision(req)
        case DoubleAttackOffer():
            return by.double_attack(req)
        case ReaderUse():
            return by.reader(req)
        case InsuranceOffer():
            return by.insurance(req)
        case SecondChanceOffer():
            return by.second_chance(req)
        case EvenMoneyOffer():
            return by.even_money(req)
        case SurrenderOffer():
            return by.surrender(req)
        case CardLaterOffer():
            return by.card_later(req)
        case _:
            assert_never(req)
