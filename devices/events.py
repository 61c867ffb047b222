"""Typed device events: what a driver tells the supervisor.

Each event class carries a ``secrecy`` class attribute so telemetry can filter by kind:

- ``public``: may leave the process (health, counts, keys pressed, bets sensed);
- ``until_revealed``: table-only until the card is public at the table (a drawn card's identity,
  the reader's answer);
- ``secret``: never leaves the process.

Fields that carry a card or a reader answer are left out of ``repr`` so an event logged by
mistake does not leak what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from controller.cards import Card


class Secrecy(StrEnum):
    PUBLIC = "public"
    UNTIL_REVEALED = "until_revealed"
    SECRET = "secret"


class Health(StrEnum):
    STARTING = "starting"
    ONLINE = "online"
    DEGRADED = "degraded"  # answering, but with errors or missed data
    OFFLINE = "offline"


class Slot(StrEnum):
    A = "A"
    B = "B"


class ShufflerState(StrEnum):
    IDLE = "idle"
    SHUFFLING = "shuffling"
    READY = "ready"
    JAMMED = "jammed"
    FAULT = "fault"
    OUT_OF_ORDER = "out_of_order"
    EMPTY = "empty"


class MasqueLight(StrEnum):
    """685a.7(h): the value range the Masque reader lights up, named as the regulation names it
    (one vocabulary from the register to the journal): small 2-5 (blue light), medium 6-9 (red),
    large 10-A (yellow)."""

    SMALL = "small"
    MEDIUM = "medium"
    LARGE = "large"


class Key(StrEnum):
    START_GAME = "start_game"
    HIT = "hit"
    STAND = "stand"
    DOUBLE = "double"
    SPLIT = "split"
    SURRENDER = "surrender"
    SECOND_CHANCE = "second_chance"
    INSURANCE_CLOSED = "insurance_closed"
    NEXT = "next"


@dataclass(frozen=True, slots=True)
class DeviceEvent:
    device: str
    secrecy: ClassVar[Secrecy] = Secrecy.PUBLIC


# -- health -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceOnline(DeviceEvent):
    pass


@dataclass(frozen=True, slots=True)
class DeviceDegraded(DeviceEvent):
    reason: str


@dataclass(frozen=True, slots=True)
class DeviceOffline(DeviceEvent):
    reason: str


@dataclass(frozen=True, slots=True)
class DeviceGlitch(DeviceEvent):
    """A device's counters could not be trusted: one went backwards, jumped past the device's
    history, stood still while the device's own count moved, or the device was reset. Nothing is
    read from its history for that poll (no card or key is invented); ``unaccounted`` is how many
    ``what`` (cards, keys, reader results) the controller cannot know about, and for the shoe
    ``remaining`` its own count when that is what settles it."""

    what: str
    reason: str
    unaccounted: int = 0
    remaining: int | None = None
    # The counters the driver reads on from after it: journalled with the alarm, so a restart
    # does not take the same reset (or glitch) for news and raise it again.
    counters: tuple[tuple[str, int], ...] = ()
    # A conflict: the device now says something else than what was journalled (a card the
    # journal has that the device disowns). It halts dealing until the floor has checked the
    # cards named here, as (draw number, card); never a silent choice of one side.
    halts: bool = False
    check: tuple[tuple[int, str], ...] = field(default=(), repr=False)
    secrecy: ClassVar[Secrecy] = Secrecy.UNTIL_REVEALED  # ``check`` may name a card not yet shown


@dataclass(frozen=True, slots=True)
class DeviceCondition(DeviceEvent):
    """A condition the device reports on a named bit of its profile (a door open, a tilt) came
    (``active``) or went: what the floor is told while it holds, as the profile's
    ``[conditions.<name>]`` says (devices/profiles.py, ConditionSpec). One event class for every
    such bit, so a vendor's new bit needs no new event, mapping or table code."""

    name: str
    active: bool
    message: str
    action: str  # what the floor does
    halts: str  # devices.profiles.Halts: never, in_round or always
    section: str = ""  # the subsection it rests on, e.g. "7(b)"; empty when none applies


@dataclass(frozen=True, slots=True)
class CountersRead(DeviceEvent):
    """A device's counters at the first reading of a controller that had none journalled for it
    (a fresh journal): journalled at once, before any effect, so that a restart reads what the
    device did meanwhile against them instead of taking its first reading as the start."""

    counters: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class FrameError(DeviceEvent):
    """A frame or register block was rejected; the driver carries on with the next one.
    ``count``: how many in a row this one event stands for (a burst is one event)."""

    reason: str
    count: int = 1


# -- shuffler -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchSlotChanged(DeviceEvent):
    slot: Slot
    state: ShufflerState
    back: str | None
    decks: int


@dataclass(frozen=True, slots=True)
class ShuffleStarted(DeviceEvent):
    slot: Slot


@dataclass(frozen=True, slots=True)
class ShuffleDone(DeviceEvent):
    slot: Slot
    cards_counted: int | None  # None: the shuffler does not count (its `counts_cards = false`)
    cycle: int  # the device's shuffle cycle counter after this shuffle


@dataclass(frozen=True, slots=True)
class ShuffleIncomplete(DeviceEvent):
    """673a.13(k), 685a.13(j): the cycle stopped or overran; the cards must be reshuffled."""

    slot: Slot
    reason: str


@dataclass(frozen=True, slots=True)
class ShufflerJammed(DeviceEvent):
    slot: Slot
    code: int


@dataclass(frozen=True, slots=True)
class ShufflerFault(DeviceEvent):
    code: int


@dataclass(frozen=True, slots=True)
class ShufflerOutOfOrder(DeviceEvent):
    """673a.13(l): the device is marked out of order; manual shuffling may now be used."""


@dataclass(frozen=True, slots=True)
class ShufflerCleared(DeviceEvent):
    """The jam or fault is cleared and the device reports idle or ready again."""


@dataclass(frozen=True, slots=True)
class EjectedToShoe(DeviceEvent):
    slot: Slot


# -- shoe ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchLoaded(DeviceEvent):
    back: str | None
    cards: int


@dataclass(frozen=True, slots=True)
class CardDrawn(DeviceEvent):
    secrecy: ClassVar[Secrecy] = Secrecy.UNTIL_REVEALED
    card: Card = field(repr=False)  # rank, suit and back colour
    face_up: bool = field(repr=False)
    sequence: int = 0  # the shoe's draw counter
    remaining: int = 0
    batch: int = 0  # the shoe's batch counter (how many batches it has been loaded with)

    @property
    def back(self) -> str | None:
        return self.card.back


@dataclass(frozen=True, slots=True)
class DrawsMissed(DeviceEvent):
    """More cards were drawn than the shoe's history holds since the last poll."""

    count: int


@dataclass(frozen=True, slots=True)
class CoverCardReached(DeviceEvent):
    remaining: int


# -- hole-card reader ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReaderResult(DeviceEvent):
    """The peek device's answer (673a.7(h), 665a.7(g)): does the hole card give Blackjack."""

    secrecy: ClassVar[Secrecy] = Secrecy.UNTIL_REVEALED
    blackjack: bool = field(default=False, repr=False)
    sequence: int = 0


@dataclass(frozen=True, slots=True)
class MasqueRange(DeviceEvent):
    """685a.7(h): the Masque reader's light for the hole card's value range."""

    secrecy: ClassVar[Secrecy] = Secrecy.UNTIL_REVEALED
    light: MasqueLight = field(default=MasqueLight.SMALL, repr=False)
    sequence: int = 0


@dataclass(frozen=True, slots=True)
class ReaderMisuse(DeviceEvent):
    """673a.13(i): a hole card was inserted when the up card does not allow a peek."""

    up_rank: str | None


@dataclass(frozen=True, slots=True)
class ReaderFailed(DeviceEvent):
    """673a.13(j), 665a.13(i), 685a.12(i): dealing must stop until the reader is repaired."""

    code: int


@dataclass(frozen=True, slots=True)
class ReaderRestored(DeviceEvent):
    pass


# -- stub counter -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StubCounted(DeviceEvent):
    """687a.9(f)-(h): the stub count and whether the deck holds its 53 cards."""

    secrecy: ClassVar[Secrecy] = Secrecy.PUBLIC
    count: int
    ok: bool
    sequence: int = 0


# -- keypad -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BetSensed(DeviceEvent):
    box: int  # 1-based betting position
    spot: int  # 1-based sensor within the box
    present: bool


@dataclass(frozen=True, slots=True)
class ButtonPressed(DeviceEvent):
    key: Key
    sequence: int = 0
    amount: int | None = None  # chips keyed with it (a double for less); None: none keyed
    # A Start Game that found the bet sensors open and left them locked before it was handed on
    # (the keypad driver's reflex, or the device's own latch): the journal records the lock
    # before the table's decision, and a refusal unlocks them (controller/table/sensors.py).
    locked: bool = False


@dataclass(frozen=True, slots=True)
class SensorsLocked(DeviceEvent):
    locked: bool


@dataclass(frozen=True, slots=True)
class SensorFault(DeviceEvent):
    """The keypad reports a bet sensor stuck or failed."""

    box: int
    spot: int
    faulty: bool


@dataclass(frozen=True, slots=True)
class MeterShown(DeviceEvent):
    amount_cents: int


@dataclass(frozen=True, slots=True)
class KeysMissed(DeviceEvent):
    count: int
