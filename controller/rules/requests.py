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
- any other registered ``Offer`` -> an amount (0 = declined) for a ``WagerOffer``, else bool

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
from typing import Protocol, TypeVar, assert_never, cast

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


# A wager offer (insurance, Double Attack) is taken with `double` (the largest wager allowed, as
# placed on the layout) and declined with `next`; `insurance_closed` declines every offer still
# open.
WAGER_OFFER_KEYS: tuple[tuple[str, str], ...] = (
    ("double", "take"),
    ("next", "decline"),
    ("insurance_closed", "decline_all"),
)
# A yes/no offer's plainest keys: `double` takes it, `next` declines it.
YES_OR_NO_KEYS: tuple[tuple[str, str], ...] = (("double", "take"), ("next", "decline"))


@dataclass(slots=True)
class Offer:
    """An offer to a box: the player takes it or declines it. A subclass is registered with
    :func:`offer`; one that is taken with a wager up to a maximum is a :class:`WagerOffer`."""

    seat: int

    def refusal(self, key: str) -> str:
        """What the table says when ``key`` does not answer this offer."""
        return f"an answer to the {type(self).__name__} is awaited, not {key!r}"

    def cites(self) -> str | None:
        """The section a refused answer cites, when the offer carries its own (else its
        registration's)."""
        return None


@dataclass(slots=True)
class WagerOffer(Offer):
    """An offer taken with a wager of at most ``maximum`` (placed on the layout, or keyed with
    `double` for the maximum); a wager of 0 declines it."""

    maximum: int

    def refusal(self, key: str) -> str:
        return f"the {type(self).__name__} is open, not {key!r}"


@dataclass(frozen=True, slots=True)
class OfferKind:
    """A registered offer: what is known of it besides the request itself.

    ``name``: its public name, in the dealer-facing ask, the journal's offer_answered, the docs
    and a game's GameSpec.offers. ``answers``: the keypad keys that answer it (docs/mqtt.md,
    "asking") and what each does. ``section``: the rule a refused answer cites (a name or
    subsection for controller.table.sections, or a whole section such as "665a.6(e)").
    ``described``: how the dispute account names it ("offered <described>: took it").
    ``keys``: the keys the table core takes as an answer (those of ``answers`` unless given);
    for a wager offer every key declines, for another every key but `next` takes it.
    ``limit``: a wager offer's rule for a wager over its maximum (``section`` unless given).
    ``before_reader``: declined when the hole card goes into the reader while it is open
    (673a.8(b); ruling D5)."""

    cls: type[Offer]
    name: str
    answers: tuple[tuple[str, str], ...]
    section: str
    described: str
    keys: frozenset[str]
    limit: str
    before_reader: bool

    @property
    def wager(self) -> bool:
        return issubclass(self.cls, WagerOffer)

    def key_for(self, answer: str) -> str:
        """The first key registered to give ``answer`` ("take", "decline")."""
        return next(key for key, what in self.answers if what == answer)

    def declined(self) -> int | bool:
        """The answer that declines it: a wager of 0, or no."""
        return 0 if self.wager else False


# Every offer, registered with :func:`offer` where it is declared, in that order.
OFFER_KINDS: dict[type, OfferKind] = {}
# The same by name and keys (derived; kept for the places that need only those).
OFFER_NAMES: dict[type, str] = {}
OFFER_ANSWERS: dict[type, tuple[tuple[str, str], ...]] = {}

OfferT = TypeVar("OfferT", bound=type[Offer])


def offer(
    name: str,
    answers: tuple[tuple[str, str], ...],
    *,
    section: str,
    described: str,
    keys: tuple[str, ...] = (),
    limit: str = "",
    before_reader: bool = False,
) -> Callable[[OfferT], OfferT]:
    """Register an offer request class (see :class:`OfferKind` for the rest). A new offer is its
    class, so decorated, and what its game's procedure does with the answer: every answerer
    answers it (``Answerer.offer``), and the table core, the ask, the journal and the dispute
    account take it from here."""

    def register(cls: OfferT) -> OfferT:
        if cls in OFFER_NAMES or name in OFFER_NAMES.values():
            raise ValueError(f"offer {name!r} is registered twice")
        kind = OfferKind(
            cls,
            name,
            answers,
            section,
            described,
            # A wager offer is taken by the wager placed, so by default its keys only decline.
            frozenset(
                keys or (k for k, what in answers if what != "take" or not issubclass(cls, WagerOffer))
            ),
            limit or section,
            before_reader,
        )
        OFFER_KINDS[cls] = kind
        OFFER_NAMES[cls] = name
        OFFER_ANSWERS[cls] = answers
        return cls

    return register


def unregister_offer(cls: type[Offer]) -> None:
    """Forget a registered offer (a test's made-up offer, after the test)."""
    for registry in (OFFER_KINDS, OFFER_NAMES, OFFER_ANSWERS):
        registry.pop(cls, None)


def offer_kind(req: Offer) -> OfferKind:
    return OFFER_KINDS[type(req)]


def offer_named(name: str) -> OfferKind | None:
    return next((k for k in OFFER_KINDS.values() if k.name == name), None)


# Keys that take a yes/no offer of the shipped games: any of their take keys takes any of them.
_TAKE_OR_NEXT = ("next", "second_chance", "surrender", "even_money")


@offer(
    "insurance",
    WAGER_OFFER_KEYS,
    section="8(b)",
    described="insurance",
    keys=("next", "insurance_closed"),
    before_reader=True,
)
@dataclass(slots=True)
class InsuranceOffer(WagerOffer):
    pass


@offer(
    "double_attack",
    WAGER_OFFER_KEYS,
    section="8(b)",
    described="the Double Attack wager",
    keys=("next", "insurance_closed"),
    limit="665a.6(e)",
)
@dataclass(slots=True)
class DoubleAttackOffer(WagerOffer):
    pass


@offer(
    "even_money",
    YES_OR_NO_KEYS,
    section="7",
    described="even money",
    keys=(*_TAKE_OR_NEXT, "double"),
)
@dataclass(slots=True)
class EvenMoneyOffer(Offer):
    pass


@offer(
    "surrender",
    (("surrender", "take"), ("next", "decline")),
    section="7",
    described="surrender (before the reader)",
    keys=_TAKE_OR_NEXT,
    before_reader=True,
)
@dataclass(slots=True)
class SurrenderOffer(Offer):
    """Double Back Jack: surrender asked before the reader when the up card is an ace or 10 (D5)."""


@offer(
    "second_chance",
    (("second_chance", "take"), ("next", "decline")),
    section="7",
    described="the Second Chance wager",
    keys=_TAKE_OR_NEXT,
)
@dataclass(slots=True)
class SecondChanceOffer(Offer):
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
@offer(
    "card_later",
    (("hit", "take"), ("next", "decline")),
    section="13(g)",  # the request cites its own subsection
    described="the card the dealer missed, after the others",
)
@dataclass(slots=True)
class CardLaterOffer(Offer):
    """The player's option when the dealer missed his card: the card dealt after all other
    players have received theirs (take), or the hand dead and its wagers returned (decline).
    ``section`` as in the ``CardMissed`` it follows."""

    hand: int
    section: str

    def refusal(self, key: str) -> str:
        return f"box {self.seat}: the card after the others (hit) or a dead hand (next), not {key!r}"

    def cites(self) -> str | None:
        return self.section


# An offer is any registered subclass of Offer: the procedures yield them, and nothing else
# lists them.
Request = CardFor | ReaderUse | Decision | Offer

T = TypeVar("T", covariant=True)


class Answerer(Protocol[T]):
    """Whoever answers a round's requests (a script, the simulator, a virtual dealer, a test rig).
    ``answer`` is the one dispatch from a request to its method; ``T`` is what the answerer gives
    back (the answer itself, a table step, a coroutine). Every offer goes to ``offer``, unless
    the answerer has a method named as the offer (its registered name, e.g. ``insurance``): a
    hook for the offers it answers in a way of their own."""

    def card(self, req: CardFor) -> T: ...
    def decision(self, req: Decision) -> T: ...
    def reader(self, req: ReaderUse) -> T: ...
    def offer(self, req: Offer) -> T: ...


def answer(req: Request, by: Answerer[T]) -> T:
    """Route ``req`` to the method of ``by`` that answers its kind (mypy checks every kind is
    routed: a new request type without a case here is an error)."""
    # The commonest first (a failed case costs as much as the call): a card, a decision, then
    # the offers (Double Attack's on every box) and the reader.
    match req:
        case CardFor():
            return by.card(req)
        case Decision():
            return by.decision(req)
        case Offer():
            hook = getattr(by, OFFER_KINDS[type(req)].name, None)
            return by.offer(req) if hook is None else cast("T", hook(req))
        case ReaderUse():
            return by.reader(req)
        case _:
            assert_never(req)
