"""What the table core is told: device observations and dealer or floor actions.

The supervisor turns device events (devices/events.py) into these; dealer and floor actions come
from the keypad or from authorised commands and name who did them. The core never reads a clock:
every input is handled with the time it happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.cards import Card
from controller.rules.requests import MasqueRange
from controller.rules.state import SeatWagers


@dataclass(frozen=True, slots=True)
class Input:
    pass


# -- opening, batches and the shuffler -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DecksOpened(Input):
    """673a.4: a batch's decks received, inspected by the dealer and verified by the floorperson,
    or received preinspected and preshuffled (673a.4(e)), which skips the inspection."""

    back: str
    dealer: str
    floorperson: str | None = None
    preinspected: bool = False


@dataclass(frozen=True, slots=True)
class BatchToShuffler(Input):
    back: str


@dataclass(frozen=True, slots=True)
class ShuffleStarted(Input):
    back: str


@dataclass(frozen=True, slots=True)
class ShuffleCompleted(Input):
    back: str
    cards_counted: int | None = None  # a counting shuffler's count (687a.9(f))


@dataclass(frozen=True, slots=True)
class ShuffleFailed(Input):
    """673a.13(k): a jam, a stop during the shuffle or an incomplete cycle."""

    back: str
    reason: str


@dataclass(frozen=True, slots=True)
class ShufflerOutOfOrder(Input):
    """673a.13(l): the device is covered or signed out of order."""

    by: str


@dataclass(frozen=True, slots=True)
class ShufflerRestored(Input):
    by: str


@dataclass(frozen=True, slots=True)
class HandShuffled(Input):
    """The dealer shuffled a batch by hand (allowed only once the shuffler is out of order)."""

    back: str
    dealer: str


@dataclass(frozen=True, slots=True)
class StackFromShuffler(Input):
    """673a.5(a),(b): the shuffled batch is ready and the shoe empty: the dealer takes the stack
    out of the shuffler to offer the cut (not at a direct-insert shuffler, ruling G13)."""

    back: str


@dataclass(frozen=True, slots=True)
class CutRefused(Input):
    seat: int


@dataclass(frozen=True, slots=True)
class CutMade(Input):
    """673a.5(d): the cover card put ``at`` cards from the top; ``by`` a seat, or 0 for the dealer."""

    at: int
    by: int


@dataclass(frozen=True, slots=True)
class CoverCardPlaced(Input):
    from_bottom: int


@dataclass(frozen=True, slots=True)
class RecutOrdered(Input):
    by: str


@dataclass(frozen=True, slots=True)
class BatchToShoe(Input):
    back: str
    # The shoe reported the batch in it already (controller/supervisor/mapping.py): a
    # direct-insert shuffler is not told to eject what it has put in the shoe.
    in_shoe: bool = False


# -- the shoe --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CardDrawn(Input):
    """A card left the counting shoe; ``face_up_in_shoe`` when it came out already face up."""

    card: Card  # with its back colour
    face_up_in_shoe: bool = False
    remaining: int | None = None  # the shoe's own count after this draw, when it reports one


@dataclass(frozen=True, slots=True)
class CoverCardReached(Input):
    """The shoe reports the cover card; ``remaining``: its count of the cards still in it, the
    cards behind the cover card (None when the shoe does not say)."""

    remaining: int | None = None


@dataclass(frozen=True, slots=True)
class DiscardsReshuffled(Input):
    """673a.13(f): not enough cards to finish the round: the discard rack is shuffled and cut
    (``cut_at`` cards from the top, at least ten from either end) and put in the shoe."""

    back: str
    cut_at: int
    by: str


# -- a round ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RoundOpened(Input):
    wagers: tuple[SeatWagers, ...]


@dataclass(frozen=True, slots=True)
class KeyPressed(Input):
    """A dealer decision key: hit, stand, double, split, surrender, second_chance,
    insurance_closed or next (decline the offer in front of the dealer). ``amount``: the chips
    keyed with a double for less than its limit (673a.10(a), 665a.10(a), 685a.9(a)); None is a
    double for the limit, and no other key takes an amount."""

    key: str
    amount: int | None = None


@dataclass(frozen=True, slots=True)
class WagerPlaced(Input):
    """An amount answering the current offer: insurance or the Double Attack wager."""

    seat: int
    amount: int


@dataclass(frozen=True, slots=True)
class ReaderReport(Input):
    """The reader's answer: dealer Blackjack yes/no (peek), or the Masque light's range."""

    blackjack: bool | None = None
    light: MasqueRange | None = None


@dataclass(frozen=True, slots=True)
class ReaderFailed(Input):
    code: int = 0


@dataclass(frozen=True, slots=True)
class ReaderReplaced(Input):
    by: str


@dataclass(frozen=True, slots=True)
class ReaderInspected(Input):
    """673a.2(d), 665a.2(d), 685a.2(d): the floorperson assigned to the table inspected the card
    reader at the beginning of the gaming day (no tampering, in working order)."""

    floorperson: str


# -- irregularities with one player's hand ---------------------------------------------------
@dataclass(frozen=True, slots=True)
class HeldCardExposed(Input):
    """673a.13(c), 665a.13(c), 685a.12(c): the card drawn in error, held aside, was exposed to the
    players. It is still dealt as the next card, but a player may refuse it."""

    by: str


@dataclass(frozen=True, slots=True)
class ExposedCardRefused(Input):
    """673a.13(c): the player now deciding refuses the exposed card and takes no more cards this
    round; his hands stand."""

    seat: int


@dataclass(frozen=True, slots=True)
class DealerCardMissed(Input):
    """673a.13(e): the dealer missed dealing his first (or second) card to himself; he deals the
    players their first two cards, then himself."""

    by: str


@dataclass(frozen=True, slots=True)
class HandCalledDead(Input):
    """One player's hand is dead and its wagers returned: no cards dealt to the box (673a.13(g)),
    a requested card not dealt and the player chose a dead hand (673a.13(h)), or a wrong Masque
    light (685a.12(h)). The section is decided by the table core from the state."""

    seat: int
    by: str


@dataclass(frozen=True, slots=True)
class PlayerCardMissed(Input):
    """The dealer did not deal box ``seat`` the card the table asks for: its second card
    (673a.13(g), 665a.13(f), 685a.12(f)) or a card the player requested (673a.13(h),
    665a.13(g), 685a.12(g)). The table then offers the player his option: the card dealt after
    all other players have received theirs, or the hand dead (``card_later``)."""

    seat: int
    by: str


@dataclass(frozen=True, slots=True)
class PatronPermitted(Input):
    """673a.6(b)(1): the house lets a patron barred for sitting out a round wager again."""

    seat: int
    by: str


# -- DJ Wild Stud Poker dealt from the hand (687a.9) -------------------------------------------
@dataclass(frozen=True, slots=True)
class WildRoundOpened(Input):
    """Boxes with Ante and Blind wagers (687a.9(c))."""

    boxes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BetSensed(Input):
    box: int
    present: bool


@dataclass(frozen=True, slots=True)
class StartGame(Input):
    pass


@dataclass(frozen=True, slots=True)
class StartRefused(Input):
    """The keypad's driver locked the bet sensors at Start Game ``key_seq`` and the table refused
    it (``section``, ``reason``): the lock is undone unless a round in play holds it (687a.9(b))."""

    device: str
    key_seq: int
    section: str
    reason: str


@dataclass(frozen=True, slots=True)
class WildHandsDealt(Input):
    """687a.9(c)-(e): five cards to each box, five to the dealer, one to the layout."""


@dataclass(frozen=True, slots=True)
class StubCounted(Input):
    count: int


@dataclass(frozen=True, slots=True)
class MisdealDetermined(Input):
    """687a.9(h): after a wrong stub count the dealer determines whether the cards were misdealt."""

    misdealt: bool
    by: str


# -- the floor -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NewDealer(Input):
    name: str


@dataclass(frozen=True, slots=True)
class ReshuffleOrdered(Input):
    by: str


@dataclass(frozen=True, slots=True)
class FirstPlayerSeated(Input):
    """673a.5(c)(1): the first player to arrive when the game is just beginning is offered the cut."""

    seat: int


@dataclass(frozen=True, slots=True)
class NoGamingActivity(Input):
    by: str


@dataclass(frozen=True, slots=True)
class VoidRound(Input):
    """A floor ruling voiding the round and returning every wager (665a.13(h)(1), 685a.12(h))."""

    by: str
    section: str


@dataclass(frozen=True, slots=True)
class AlarmAcknowledged(Input):
    alarm: int
    by: str


@dataclass(frozen=True, slots=True)
class Tick(Input):
    """Time passing with nothing else happening (deck expiry warnings)."""


@dataclass(frozen=True, slots=True)
class Stalled(Input):
    """The table waits for what cannot come: the devices show a state that cannot lead to what
    it asks, or no device that could answer is there (controller/supervisor/stalls.py)."""

    section: str
    message: str
    floor_action: str


# -- the devices themselves (restarts, glitches, out of order) -------------------------------
@dataclass(frozen=True, slots=True)
class DeviceGap(Input):
    """Things a device did that the controller cannot know: cards drawn, keys pressed or reader
    results that fell out of the device's history while the controller was down, or a counter
    that went backwards, jumped or reset. ``what`` is "cards", "keys" or "reader results";
    ``unaccounted`` how many are not known. For the shoe, ``remaining`` is its own count after
    the event, so the table's count is brought to it (the cards unaccounted left the shoe)."""

    device: str
    what: str
    reason: str
    unaccounted: int
    remaining: int | None = None
    # A conflict between what was journalled and what the device now says: it halts dealing
    # until the floor has checked the cards named, as (draw number, card or "" when not known).
    halts: bool = False
    check: tuple[tuple[int, str], ...] = field(default=(), repr=False)


@dataclass(frozen=True, slots=True)
class DeviceCondition(Input):
    """A condition a device reports (a door open, a tilt), as its profile describes it: one
    alarm with the floor's ``action``, halting dealing when ``halts``. ``section`` is the
    subsection it rests on, written once for the blackjack chapters ("7(b)"), or empty."""

    device: str
    name: str
    message: str
    action: str
    halts: bool
    section: str = ""


@dataclass(frozen=True, slots=True)
class DeviceOutOfOrder(Input):
    """673a.13(l) and its like: the floor covers or signs a device out of order. ``device`` is its
    kind (shoe, keypad, reader, shuffler, stub_counter)."""

    device: str
    by: str


@dataclass(frozen=True, slots=True)
class DeviceRestored(Input):
    """The floor puts a device marked out of order back in service."""

    device: str
    by: str


@dataclass(frozen=True, slots=True)
class DeviceFailed(Input):
    """The dealing shoe stopped answering or reports a failure: no round till it is back. The keypad
    the same way, but the main game goes on: its alarm tells the floor a feature is closed."""

    device: str
    reason: str


@dataclass(frozen=True, slots=True)
class DeviceBack(Input):
    """A failed device answers again."""

    device: str
