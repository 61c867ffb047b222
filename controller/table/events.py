"""Domain events: the facts the table core decides, in the order they happen.

Each machine of the core declares its events as typed dataclasses (``Event``
subclasses registered under their journal kind with ``@event``); a typed event serialises to the
journal's ``DomainEvent`` (a kind and a JSON object) and back, field for key, so journals written
before the events were typed replay unchanged. A field declared with ``metadata=OMIT`` is left
out of the payload when it is None, as those keys always were.

Every event is journalled before its effects are carried out, and the table's state is the fold
of its events (``Table.apply``). Each kind has a fixed classification, held here as data, that the
telemetry layer filters on:

- ``public``: may leave the process (ops MQTT, logs);
- ``until_revealed``: table-only until a later public event shows it (a hole card before it is
  turned; the reader's answer);
- ``secret``: never leaves the process (a burned card, a card found face up in the shoe before it
  is discarded, anything that would tell the order of the cards still in the shoe).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar, Self, TypeVar

from controller.journal import Classification

P, U, S = Classification.PUBLIC, Classification.UNTIL_REVEALED, Classification.SECRET

CLASSIFICATION: dict[str, Classification] = {
    # opening and batches
    "table_opened": P,  # the first record of a journal: the table and its game options
    "decks_opened": P,
    "deck_expiry_warning": P,
    "shuffle_started": P,
    "shuffle_completed": P,
    "shuffle_failed": P,
    "shuffler_out_of_order": P,
    "shuffler_restored": P,
    "batch_to_shuffler": P,
    "cut_offered": P,
    "cut_refused": P,
    "cut_made": P,
    "cover_card_placed": P,
    "recut_ordered": P,
    "batch_to_shoe": P,
    "card_burned": S,  # never shown: its identity would tell about the shoe
    "shoe_ended": P,
    "discards_reshuffled": P,
    "reshuffle_ordered": P,
    "no_gaming_activity": P,
    "first_player_seated": P,
    "new_dealer": P,
    # a blackjack round
    "round_started": P,
    "card_dealt": P,  # face up at the table
    "hole_card_dealt": U,
    "hole_card_exposed": P,  # 685a.7(h): both dealer cards Large
    "hole_card_turned": P,
    "offer_answered": P,
    "decision": P,
    "reader_used": P,
    "reader_result": U,
    "card_discarded_face_up": S,  # 673a.13(a): exposed to the dealer, not to play; kept in
    "card_discarded_extra": P,  # 673a.13(d): the dealer's extra card was seen by all
    "card_held": S,  # 673a.13(b): drawn in error face down; used as the next card
    "held_card_exposed": P,  # 673a.13(c): the held card was seen by the players
    "exposed_card_refused": P,  # 673a.13(c): that player takes no more cards this round
    "exposed_card_discarded": P,  # 673a.13(c): refused by all and unused: to the discard rack
    "dealer_card_missed": P,  # 673a.13(e)
    "hand_called_dead": P,  # 673a.13(g),(h), 665a.13(f),(g), 685a.12(f)-(h)
    "card_missed": P,  # 673a.13(g),(h), 665a.13(f),(g), 685a.12(f),(g): the option is offered
    "patron_permitted": P,  # 673a.6(b)(1)
    "round_settled": P,
    "round_voided": P,
    # DJ Wild (687a.9)
    "bet_sensed": P,
    "progressive_locked": P,
    "progressive_collected": P,
    "wild_round_dealt": P,
    "stub_counted": P,  # the count only; the stub's contents are never known to the core
    # the bet sensors at Start Game (controller/table/sensors.py)
    "sensors_locked": P,
    "sensors_unlocked": P,
    "deck_removed": P,
    # floor and alarms
    "action_taken": P,  # who (signed in) took a dealer or floor action; the events after it say what
    "alarm_raised": P,
    "alarm_acknowledged": P,
    "reader_failed": P,
    "reader_replaced": P,
    # the devices themselves: what the controller last saw of their counters (restarts replay
    # from there), counters that cannot be trusted, devices out of order or failed
    "device_seen": P,  # a counter's value only (how many cards drawn, keys pressed): public
    "cards_unaccounted": P,  # a count only: which cards is not known
    "device_out_of_order": P,
    "device_restored": P,
    "device_failed": P,
    "device_back": P,
    "reader_inspected": P,  # 673a.2(d)
}

# Payload fields that carry a card or a reader answer. Telemetry must never find one of these in
# an event it publishes; tests check every public event against this list.
SECRET_FIELDS = frozenset({"card", "cards_in_shoe", "order", "blackjack", "light", "hole"})

# Public kinds whose payload is allowed a "card" or "hole" field because the card is face up at
# the table when the event happens.
REVEALING_KINDS = frozenset(
    {
        "card_dealt",
        "hole_card_exposed",
        "hole_card_turned",
        "card_discarded_extra",
        "held_card_exposed",
        "exposed_card_discarded",
    }
)


@dataclass(frozen=True, slots=True)
class DomainEvent:
    kind: str
    payload: dict[str, Any]
    at: float  # the table's clock when it happened

    @property
    def classification(self) -> Classification:
        return CLASSIFICATION[self.kind]


# Field metadata: the key is absent from the payload when the value is None. Declared as
# ``field(default=None, metadata=OMIT)``.
OMIT: dict[str, Any] = {"omit_none": True}


@dataclass(slots=True)
class Event:
    """A typed domain event. ``kind`` is its name in the journal (set by ``@event``).

    Events are treated as immutable values. They are plain slotted dataclasses rather than frozen
    ones, as the rules' requests are, because a frozen dataclass costs twice as much to build and
    the core builds one for every event it decides and every event it replays."""

    kind: ClassVar[str]
    _names: ClassVar[tuple[str, ...]]  # the payload's keys, in order
    _omit: ClassVar[frozenset[str]]  # keys left out when None

    def payload(self) -> dict[str, Any]:
        if not self._omit:
            return {name: getattr(self, name) for name in self._names}
        out: dict[str, Any] = {}
        for name in self._names:
            value = getattr(self, name)
            if value is not None or name not in self._omit:
                out[name] = value
        return out

    @classmethod
    def decode(cls, **payload: Any) -> Self:
        """The event a journal record's payload holds (an event whose payload is not its fields
        one for one overrides this and ``payload``)."""
        return cls(**payload)


E = TypeVar("E", bound=Event)

EVENT_TYPES: dict[str, type[Event]] = {}
DECODERS: dict[str, Callable[..., Event]] = {}  # kind -> the typed event from the payload's keys


def event(kind: str) -> Callable[[type[E]], type[E]]:
    """Register a typed event class under its journal kind."""

    def register(cls: type[E]) -> type[E]:
        if kind not in CLASSIFICATION:
            raise TypeError(f"{kind} has no classification")
        if kind in EVENT_TYPES:
            raise TypeError(f"{kind} is declared twice")
        cls.kind = kind
        declared: tuple[Field[Any], ...] = fields(cls)
        cls._names = tuple(f.name for f in declared)
        cls._omit = frozenset(f.name for f in declared if f.metadata.get("omit_none"))
        EVENT_TYPES[kind] = cls
        # The class itself when its fields are the payload's keys: one call less on replay.
        overridden = cls.decode.__func__ is not Event.decode.__func__  # type: ignore[attr-defined]
        DECODERS[kind] = cls.decode if overridden else cls
        return cls

    return register


def typed(event: DomainEvent) -> Event:
    """The typed event a journal record holds; a record this version cannot read is refused."""
    decode = DECODERS.get(event.kind)
    if decode is None:
        raise ValueError(f"{event.kind} is not an event of the table core")
    try:
        return decode(**event.payload)
    except TypeError as e:
        raise ValueError(f"{event.kind}: the payload does not fit the event ({e})") from None
