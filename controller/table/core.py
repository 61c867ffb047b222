"""The table core: procedure at one table as a sans-I/O state machine.

``Table.handle(input, now)`` checks an input against the state and the rules and returns a
``Step``: the domain events it decided (to be journalled before anything else happens) and the
device commands that carry them out. A refused input raises RuleViolation naming the section and
changes nothing. ``Table.apply(event)`` is the only place state changes; ``handle`` applies the
events it decides, and a restart rebuilds the table by applying the journal's events in order
(``Table.replay``). No clock, no I/O, no randomness.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from controller.cards import Card, parse_card
from controller.errors import RuleViolation
from controller.game_config import GameOptions
from controller.games import GameId
from controller.rules.requests import (
    DEALER,
    Action,
    CardFor,
    Decision,
    DoubleAttackOffer,
    EvenMoneyOffer,
    InsuranceOffer,
    MasqueRange,
    ReaderUse,
    SecondChanceOffer,
    SurrenderOffer,
)
from controller.rules.round import Round, check_wagers
from controller.rules.settlement_order import PLAYER_BY_PLAYER, dealer_order
from controller.rules.state import SeatWagers
from controller.shoe import MIN_CUT_FROM_END, min_cover_from_bottom
from controller.table import inputs as I
from controller.table.asking import asking
from controller.table.batches import Batch, Place, ShufflerState
from controller.table.events import DomainEvent
from controller.table.sections import section

BACKS = ("blue", "red")  # default back colours of the two batches
DECK_LIFETIME = 24 * 3600.0  # 673a.3(c), 665a.3(c), 685a.3(c)
# 673a.2(d): the reader is inspected "at the beginning of each gaming day". The chapters are
# Pennsylvania's, so the gaming day is counted in Pennsylvania time, from 6 a.m.
GAMING_DAY_ZONE = ZoneInfo("America/New_York")
GAMING_DAY_STARTS = timedelta(hours=6)
EXPIRY_WARNING = 3600.0  # warn an hour ahead
STUB_COUNT_EVERY = 5  # 687a.9(f)
WILD_CARDS_PER_HAND = 5


@dataclass(frozen=True, slots=True)
class Command:
    """An effect for a device, carried out by the supervisor after the events are journalled."""

    device: str  # shuffler | shoe | reader | keypad | stub_counter
    action: str
    args: tuple[Any, ...] = ()


@dataclass(slots=True)
class Step:
    events: list[DomainEvent] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)


@dataclass(slots=True)
class Alarm:
    id: int
    section: str
    message: str
    floor_action: str
    halts: bool
    acknowledged_by: str | None = None


@dataclass(slots=True)
class CutProcedure:
    """673a.5(b)-(e) for a batch shuffled by hand."""

    back: str
    offer_order: list[int]  # seats to offer the cut to, in order; the dealer cuts if all refuse
    cutter: int | None = None  # seat that cut (0 = dealer)
    cut_at: int | None = None
    cover_from_bottom: int | None = None


@dataclass(slots=True)
class WildRound:
    boxes: tuple[int, ...]
    sensed: set[int] = field(default_factory=set)
    locked: bool = False
    dealt: bool = False
    stub_expected: int = 0


class Table:
    def __init__(self, options: GameOptions, table_id: str = "table", backs: tuple[str, str] = BACKS) -> None:
        options.validate()
        if backs[0] == backs[1]:
            raise RuleViolation(
                f"{options.spec.chapter}.3(b)(2)", "the two batches need different back colours"
            )
        self.options = options
        self.table_id = table_id
        self.chapter = options.spec.chapter
        self.blackjack = options.game is not GameId.DJ_WILD
        composition = Counter(str(c) for c in options.spec.batch(options.decks))
        self.batches: dict[str, Batch] = {b: Batch(back=b, composition=Counter(composition)) for b in backs}
        self.shoe_back: str | None = None  # the batch in the shoe
        self.last_shoe_back: str | None = None  # the batch of the previous shoe (673a.3(b)(4))
        self.burns_due = 0  # 673a.7(c)
        self.cover_reached = False
        self.reshuffle_due = False  # after this round the shoe is ended (673a.7(d), 673a.5(f))
        self.cut_reason: tuple[str, int] = ("first", 0)  # 673a.5(c): why the next cut is offered
        self.cut: CutProcedure | None = None
        self.shuffler_out_of_order = False
        self.reader_failed = False
        self.dealer_name: str | None = None
        self.round_no = 0
        self.round: Round | None = None
        self.round_cards: list[Card] = []  # cards on the layout this round (for the discard)
        self.cover_target: tuple[int, int] | None = None  # box (or DEALER) where the cover appeared
        self.held_card: Card | None = None  # 673a.13(b)
        self.dealer_stood = False  # the last round ended with the dealer on 17 or more (673a.13(d))
        self.wild: WildRound | None = None
        self.rounds_since_stub_count = 0
        self.alarms: dict[int, Alarm] = {}
        self.next_alarm = 1
        self.last_seats: tuple[int, ...] = ()
        self.expiry_warned: set[str] = set()
        # The devices themselves: the last value of each counter the controller acted on (a
        # restart diffs the device against it), devices the floor marked out of order (kind ->
        # who), devices that failed (kind -> the alarm raised for it).
        self.device_seen: dict[str, dict[str, int]] = {}
        self.out_of_order: dict[str, str] = {}
        self.failed_devices: dict[str, int] = {}
        self.held_exposed = False  # 673a.13(c): the held card was exposed to the players
        self.hole_shown = False  # this round's hole_card_turned is out
        self.refused_seats: set[int] = set()  # 673a.13(c): took no more cards this round
        self.wagering_seats: frozenset[int] | None = None  # 673a.6(b): seats still allowed this shoe
        self.reader_inspected_day: str | None = None  # 673a.2(d): the gaming day last inspected
        self.now = 0.0

    # ================================================================== public API
    def handle(self, inp: I.Input, now: float) -> Step:
        """Decide what ``inp`` means at ``now``; apply and return the events and commands."""
        handler: Callable[[Any, Step], None] | None = getattr(self, f"_on_{type(inp).__name__}", None)
        if handler is None:
            raise RuleViolation("input", f"{type(inp).__name__} is not an input of the table core")
        step = Step()
        self.now = now
        handler(inp, step)
        return step

    def emit(self, step: Step, kind: str, **payload: Any) -> DomainEvent:
        event = DomainEvent(kind, payload, self.now)
        self.apply(event)
        step.events.append(event)
        return event

    def apply(self, event: DomainEvent) -> None:
        """The one state transition per event kind. Replay calls only this."""
        self.now = event.at
        getattr(self, f"_apply_{event.kind}")(event.payload)

    @classmethod
    def replay(cls, options: GameOptions, events: Iterable[DomainEvent], table_id: str = "table") -> Table:
        table = cls(options, table_id)
        for event in events:
            table.apply(event)
        return table

    # ----------------------------------------------------------------- queries
    @property
    def halted(self) -> list[Alarm]:
        return [a for a in self.alarms.values() if a.halts and a.acknowledged_by is None]

    @property
    def in_round(self) -> bool:
        return self.round is not None or self.wild is not None

    def batch_in(self, place: Place) -> list[str]:
        return [b.back for b in self.batches.values() if b.location is place]

    def fingerprint(self) -> dict[str, Any]:
        """Everything that decides what the table does next, for comparing a replay with the live
        table (secrets included: this never leaves the process)."""
        rnd = self.round
        return {
            "batches": {
                b.back: (b.location.value, b.shuffler.value, sorted(b.places.items()),
                         sorted(b.drawn.items()), b.opened_at, b.counted_53)
                for b in self.batches.values()
            },
            "shoe": (self.shoe_back, self.last_shoe_back, self.burns_due, self.cover_reached,
                     self.reshuffle_due, self.cut_reason),
            "cut": None if self.cut is None else (self.cut.back, self.cut.offer_order, self.cut.cutter,
                                                  self.cut.cut_at, self.cut.cover_from_bottom),
            "round": None if rnd is None else (
                self.round_no, [str(c) for c in rnd.state.dealer], repr(rnd.request),
                [[(h.index, [str(c) for c in h.cards], h.result) for h in b.hands] for b in rnd.state.boxes],
                len(rnd.state.settlements),
            ),
            "wild": None if self.wild is None else (
                self.wild.boxes, sorted(self.wild.sensed), self.wild.locked, self.wild.dealt,
                self.wild.stub_expected,
            ),
            "alarms": [(a.id, a.section, a.halts, a.acknowledged_by) for a in self.alarms.values()],
            "misc": (self.round_no, self.shuffler_out_of_order, self.reader_failed, self.dealer_name,
                     None if self.held_card is None else str(self.held_card), self.rounds_since_stub_count,
                     self.dealer_stood,
                     self.last_seats, sorted(self.expiry_warned)),
            "devices": (sorted(self.out_of_order.items()), sorted(self.failed_devices.items()),
                        sorted((d, sorted(c.items())) for d, c in self.device_seen.items())),
            "irregular": (self.held_exposed, self.hole_shown, sorted(self.refused_seats),
                          None if self.wagering_seats is None else sorted(self.wagering_seats),
                          self.reader_inspected_day),
        }  # fmt: skip

    def snapshot(self) -> dict[str, Any]:
        """The public state: what the ops view may show (no card identities)."""
        shoe = self.batches[self.shoe_back] if self.shoe_back else None
        return {
            "round": self.round_no,
            "in_round": self.in_round,
            "batch_in_shoe": self.shoe_back,
            "cards_in_shoe": shoe.places[Place.SHOE] if shoe else 0,
            "cover_card_reached": self.cover_reached,
            "batches": {
                b.back: {"location": b.location.value, "shuffler": b.shuffler.value}
                for b in self.batches.values()
            },
            "halted": [{"id": a.id, "section": a.section, "message": a.message} for a in self.halted],
            "alarms": [
                {"id": a.id, "section": a.section, "message": a.message, "floor_action": a.floor_action}
                for a in self.alarms.values()
                if a.acknowledged_by is None
            ],
            "shuffler_out_of_order": self.shuffler_out_of_order,
            "reader_failed": self.reader_failed,
            "out_of_order": sorted(self.out_of_order),
            "reader_inspected_for": self.reader_inspected_day,
            "asking": asking(self),  # what the dealer display shows next (controller/table/asking.py)
        }

    # ================================================================== helpers for handlers
    def _refuse(self, section: str, message: str) -> RuleViolation:
        return RuleViolation(section, message)

    def _sec(self, rule: str) -> str:
        return section(self.chapter, rule)

    def _alarm(self, step: Step, section: str, message: str, floor_action: str, halts: bool) -> None:
        self.emit(
            step,
            "alarm_raised",
            id=self.next_alarm,
            section=section,
            message=message,
            floor_action=floor_action,
            halts=halts,
        )

    def _batch(self, back: str) -> Batch:
        batch = self.batches.get(back)
        if batch is None:
            raise self._refuse(
                self._sec("3(b)(2)"), f"no batch has {back} backs at this table ({', '.join(self.batches)})"
            )
        return batch

    def _not_halted(self, what: str) -> None:
        if self.halted:
            a = self.halted[0]
            raise self._refuse(a.section, f"dealing is stopped ({a.message}); {what} must wait")

    # ================================================================== opening and batches
    def _on_DecksOpened(self, inp: I.DecksOpened, step: Step) -> None:
        self._batch(inp.back)
        if self.shoe_back == inp.back:
            raise self._refuse(self._sec("4"), f"the {inp.back} batch is in play; change decks between shoes")
        if not inp.preinspected and not inp.floorperson:
            raise self._refuse(
                self._sec("4(a)"), "the floorperson assigned to the table verifies the inspection"
            )
        self.emit(
            step,
            "decks_opened",
            back=inp.back,
            dealer=inp.dealer,
            floorperson=inp.floorperson,
            preinspected=inp.preinspected,
            expires_at=self.now + DECK_LIFETIME,
        )

    def _apply_decks_opened(self, p: dict[str, Any]) -> None:
        batch = self.batches[p["back"]]
        batch.opened_at = self.now
        batch.inspected = True
        batch.gather(Place.NEW)  # new decks arrive on the table, to be loaded and shuffled
        batch.shuffler = ShufflerState.UNSHUFFLED
        self.expiry_warned.discard(batch.back)

    def _on_Tick(self, inp: I.Tick, step: Step) -> None:
        for batch in self.batches.values():
            if batch.opened_at is None or batch.back in self.expiry_warned:
                continue
            left = batch.opened_at + DECK_LIFETIME - self.now
            if left <= EXPIRY_WARNING:
                self.emit(step, "deck_expiry_warning", back=batch.back, seconds_left=max(0.0, left))

    def _apply_deck_expiry_warning(self, p: dict[str, Any]) -> None:
        self.expiry_warned.add(p["back"])

    def _expired(self, batch: Batch) -> bool:
        return batch.opened_at is None or self.now >= batch.opened_at + DECK_LIFETIME

    def _on_BatchToShuffler(self, inp: I.BatchToShuffler, step: Step) -> None:
        batch = self._batch(inp.back)
        if self.shuffler_out_of_order:
            raise self._refuse(self._sec("shuffler_out_of_order"), "the shuffler is marked out of order")
        if batch.location not in (Place.DISCARD, Place.NEW):
            raise self._refuse(self._sec("3(b)"), f"the {inp.back} batch is not off the table to be shuffled")
        other = [b for b in self.batches.values() if b.back != inp.back and b.location is Place.SHUFFLER]
        if other:
            raise self._refuse(self._sec("3(b)(3)"), f"the shuffler already stores the {other[0].back} batch")
        self.emit(step, "batch_to_shuffler", back=inp.back)

    def _apply_batch_to_shuffler(self, p: dict[str, Any]) -> None:
        batch = self.batches[p["back"]]
        batch.gather(Place.SHUFFLER)
        batch.shuffler = ShufflerState.UNSHUFFLED
        batch.counted_53 = False

    def _on_ShuffleStarted(self, inp: I.ShuffleStarted, step: Step) -> None:
        batch = self._batch(inp.back)
        if self.shuffler_out_of_order:
            raise self._refuse(self._sec("shuffler_out_of_order"), "the shuffler is marked out of order")
        if batch.location is not Place.SHUFFLER:
            raise self._refuse(self._sec("3(b)(3)"), f"the {inp.back} batch is not in the shuffler")
        self.emit(step, "shuffle_started", back=inp.back)

    def _apply_shuffle_started(self, p: dict[str, Any]) -> None:
        self.batches[p["back"]].shuffler = ShufflerState.SHUFFLING

    def _on_ShuffleCompleted(self, inp: I.ShuffleCompleted, step: Step) -> None:
        batch = self._batch(inp.back)
        if batch.shuffler is not ShufflerState.SHUFFLING:
            raise self._refuse(self._sec("shuffle_failed"), f"the {inp.back} batch was not being shuffled")
        self.emit(step, "shuffle_completed", back=inp.back, cards_counted=inp.cards_counted)
        if inp.cards_counted is not None and inp.cards_counted != batch.size:
            self._alarm(
                step,
                self._sec("shuffle_failed"),
                f"the shuffler counted {inp.cards_counted} of the {batch.size} cards of the {inp.back} batch",
                "count the batch and reshuffle it before it is dealt",
                halts=False,
            )

    def _apply_shuffle_completed(self, p: dict[str, Any]) -> None:
        batch = self.batches[p["back"]]
        counted = p["cards_counted"]
        good = counted is None or counted == batch.size
        batch.shuffler = ShufflerState.READY if good else ShufflerState.JAMMED
        batch.counted_53 = counted == batch.size and batch.size == 53

    def _on_ShuffleFailed(self, inp: I.ShuffleFailed, step: Step) -> None:
        batch = self._batch(inp.back)
        if batch.location is not Place.SHUFFLER:
            raise self._refuse(self._sec("shuffle_failed"), f"the {inp.back} batch is not in the shuffler")
        self.emit(step, "shuffle_failed", back=inp.back, reason=inp.reason)
        self._alarm(
            step,
            self._sec("shuffle_failed"),
            f"the shuffler stopped ({inp.reason}) with the {inp.back} batch",
            "clear the shuffler; the batch is reshuffled",
            halts=False,
        )
        step.commands.append(Command("shuffler", "clear_fault"))

    def _apply_shuffle_failed(self, p: dict[str, Any]) -> None:
        self.batches[p["back"]].shuffler = ShufflerState.JAMMED

    def _on_ShufflerOutOfOrder(self, inp: I.ShufflerOutOfOrder, step: Step) -> None:
        if self.shuffler_out_of_order:
            raise self._refuse(
                self._sec("shuffler_out_of_order"), "the shuffler is already marked out of order"
            )
        self.emit(step, "shuffler_out_of_order", by=inp.by)
        step.commands.append(Command("shuffler", "mark_out_of_order"))

    def _apply_shuffler_out_of_order(self, p: dict[str, Any]) -> None:
        self.shuffler_out_of_order = True
        for batch in self.batches.values():
            if batch.location is Place.SHUFFLER:  # the stored batch comes out to be shuffled by hand
                batch.gather(Place.NEW)
                batch.shuffler = ShufflerState.UNSHUFFLED

    def _on_ShufflerRestored(self, inp: I.ShufflerRestored, step: Step) -> None:
        if not self.shuffler_out_of_order:
            raise self._refuse(self._sec("shuffler_out_of_order"), "the shuffler is not marked out of order")
        self.emit(step, "shuffler_restored", by=inp.by)

    def _apply_shuffler_restored(self, p: dict[str, Any]) -> None:
        self.shuffler_out_of_order = False

    # ------------------------------------------------------------------ shuffling by hand and the cut
    def _on_HandShuffled(self, inp: I.HandShuffled, step: Step) -> None:
        if not self.blackjack:
            raise self._refuse(
                "687a.9(a)(1)", "cards dealt from the hand are shuffled by an automated shuffler"
            )
        batch = self._batch(inp.back)
        if self.options.automated_shuffler and not self.shuffler_out_of_order:
            raise self._refuse(
                self._sec("shuffler_out_of_order"),
                "cards are shuffled by another method only after the shuffler is marked out of order",
            )
        if batch.location not in (Place.DISCARD, Place.NEW):
            raise self._refuse(self._sec("5(a)"), f"the {inp.back} batch is not off the table to be shuffled")
        if self.shoe_back is not None:
            raise self._refuse(self._sec("3(b)(5)"), "the shoe still holds a batch")
        self.emit(step, "shuffle_started", back=inp.back, by_hand=inp.dealer)
        self.emit(step, "shuffle_completed", back=inp.back, cards_counted=None)
        self.emit(step, "cut_offered", back=inp.back, seats=self._cut_order(), reason=self.cut_reason[0])

    def _cut_order(self) -> list[int]:
        """673a.5(c): who is offered the cut, in order; the dealer cuts when all refuse (b)."""
        reason, seat = self.cut_reason
        seats = sorted(self.last_seats, reverse=True)  # farthest to the dealer's right first
        if reason == "cover_on_seat" and seat:
            return [seat]
        if reason == "first" and seat:
            return [seat]
        return seats

    def _apply_cut_offered(self, p: dict[str, Any]) -> None:
        self.cut = CutProcedure(back=p["back"], offer_order=list(p["seats"]))

    def _on_CutRefused(self, inp: I.CutRefused, step: Step) -> None:
        cut = self._cut_or_refuse()
        if not cut.offer_order or cut.offer_order[0] != inp.seat:
            raise self._refuse(self._sec("5(c)"), f"the cut was not offered to seat {inp.seat}")
        self.emit(step, "cut_refused", seat=inp.seat)

    def _apply_cut_refused(self, p: dict[str, Any]) -> None:
        assert self.cut is not None
        self.cut.offer_order.pop(0)

    def _cut_or_refuse(self) -> CutProcedure:
        if self.cut is None:
            raise self._refuse(self._sec("5(b)"), "no cut is being offered")
        return self.cut

    def _on_CutMade(self, inp: I.CutMade, step: Step) -> None:
        cut = self._cut_or_refuse()
        expected = cut.offer_order[0] if cut.offer_order else 0
        if inp.by != expected and not (cut.cutter is not None and inp.by == cut.cutter):
            who = f"seat {expected}" if expected else "the dealer"
            raise self._refuse(
                self._sec("5(c)"), f"the cut is offered to {who}, not to {inp.by or 'the dealer'}"
            )
        n = self.batches[cut.back].size
        if not MIN_CUT_FROM_END <= inp.at <= n - MIN_CUT_FROM_END:
            raise self._refuse(
                self._sec("5(d)"), f"the cover card goes at least ten cards from either end of {n}"
            )
        self.emit(step, "cut_made", at=inp.at, by=inp.by)

    def _apply_cut_made(self, p: dict[str, Any]) -> None:
        assert self.cut is not None
        self.cut.cutter = p["by"]
        self.cut.cut_at = p["at"]
        self.cut.cover_from_bottom = None

    def _on_CoverCardPlaced(self, inp: I.CoverCardPlaced, step: Step) -> None:
        cut = self._cut_or_refuse()
        if cut.cut_at is None:
            raise self._refuse(self._sec("5(d)"), "the stack is cut before the cover card is placed")
        n = self.batches[cut.back].size
        if not min_cover_from_bottom(n) <= inp.from_bottom <= n:
            raise self._refuse(
                self._sec("5(d)"),
                "the cover card goes at least 1/4 of the way in from the bottom "
                f"({min_cover_from_bottom(n)} of {n})",
            )
        self.emit(step, "cover_card_placed", from_bottom=inp.from_bottom)

    def _apply_cover_card_placed(self, p: dict[str, Any]) -> None:
        assert self.cut is not None
        self.cut.cover_from_bottom = p["from_bottom"]

    def _on_RecutOrdered(self, inp: I.RecutOrdered, step: Step) -> None:
        cut = self.cut
        if cut is None:
            raise self._refuse(
                self._sec("5(e)"), "a recut is ordered after the cut and before the cards go in the shoe"
            )
        if cut.cut_at is None:
            raise self._refuse(self._sec("5(e)"), "a recut is ordered after the cut")
        self.emit(step, "recut_ordered", by=inp.by, seat=cut.cutter)

    def _apply_recut_ordered(self, p: dict[str, Any]) -> None:
        assert self.cut is not None
        # 673a.5(e): the last cutter or the next person entitled to cut.
        self.cut.offer_order = [p["seat"]] + [s for s in self.cut.offer_order if s != p["seat"]]
        self.cut.cut_at = None
        self.cut.cover_from_bottom = None

    # ------------------------------------------------------------------ into the shoe
    def _on_BatchToShoe(self, inp: I.BatchToShoe, step: Step) -> None:
        batch = self._batch(inp.back)
        if self.shoe_back is not None:
            raise self._refuse(self._sec("7(d)"), f"the shoe still holds the {self.shoe_back} batch")
        if self._expired(batch):
            raise self._refuse(
                self._sec("3(c)"), f"the {inp.back} decks were opened over 24 hours ago; change them"
            )
        self._check_shuffled_for_shoe(batch)
        self.emit(step, "batch_to_shoe", back=inp.back)
        if self.two_batches:
            step.commands.append(Command("shuffler", "eject_to_shoe", (inp.back,)))

    def _check_shuffled_for_shoe(self, batch: Batch) -> None:
        """The batch was shuffled the way this table shuffles, ready to go into the shoe."""
        if self.options.self_shuffling_shoe and not self.shuffler_out_of_order:
            return  # 673a.5(h): the approved device shuffles and counts; 5(b)-(g) do not apply
        if self.manual:
            cut = self.cut
            if cut is None or cut.back != batch.back or cut.cover_from_bottom is None:
                raise self._refuse(
                    self._sec("5(d)"), "the stack is cut and the cover card placed before it goes in the shoe"
                )
            return
        if batch.back == self.last_shoe_back:
            raise self._refuse(
                self._sec("3(b)(4)"), f"the {batch.back} batch was dealt last shoe; the batches alternate"
            )
        if batch.location is not Place.SHUFFLER or batch.shuffler is not ShufflerState.READY:
            jammed = batch.shuffler is ShufflerState.JAMMED
            section = self._sec("shuffle_failed") if jammed else self._sec("3(b)(3)")
            raise self._refuse(section, f"the {batch.back} batch is not shuffled and ready in the shuffler")

    def _apply_batch_to_shoe(self, p: dict[str, Any]) -> None:
        batch = self.batches[p["back"]]
        batch.gather(Place.SHOE)
        batch.shuffler = ShufflerState.UNSHUFFLED
        self.shoe_back = batch.back
        self.last_shoe_back = batch.back
        self.wagering_seats = None  # 673a.6(b)(2): a reshuffle lets every patron wager again
        self.burns_due = 1  # 673a.7(c)
        self.cover_reached = False
        self.reshuffle_due = False
        self.cut = None
        if self.options.game is GameId.DJ_WILD:
            self.burns_due = 0  # dealt from the hand: no burn card in 687a.9

    # ================================================================== the shoe
    def _on_CoverCardReached(self, inp: I.CoverCardReached, step: Step) -> None:
        if self.options.self_shuffling_shoe:
            raise self._refuse(self._sec("5(h)"), "a self-shuffling shoe has no cover card")
        if self.shoe_back is None:
            raise self._refuse(self._sec("7(d)"), "no batch is in the shoe")
        if self.cover_reached:
            return
        self.emit(step, "reshuffle_ordered", by="cover card", reason="cover")

    def _on_CardDrawn(self, inp: I.CardDrawn, step: Step) -> None:
        self._route_drawn(inp, step)
        self._check_remaining(inp, step)  # card conservation against the shoe's own count

    def _route_drawn(self, inp: I.CardDrawn, step: Step) -> None:
        if self.shoe_back is None:
            raise self._refuse(self._sec("7(a)"), "a card was drawn with no batch in the shoe")
        batch = self.batches[self.shoe_back]
        card = inp.card
        text = str(card)
        if card.back != batch.back:
            # 673a.3(b)(2): a card of the other batch's colour in the shoe.
            self._alarm(
                step,
                self._sec("3(b)(2)"),
                f"a card with {card.back} backs came out of the shoe holding the {batch.back} batch",
                "stop dealing; find how the batches mixed, account for both batches",
                halts=True,
            )
            return
        if not batch.can_draw(text) or batch.places[Place.SHOE] <= 0:
            self._alarm(
                step,
                self._sec("3(b)"),
                "a card came out of the shoe more often than the batch holds it, or past the count",
                "stop dealing; count the batch",
                halts=True,
            )
            return
        if inp.face_up_in_shoe:
            # 673a.13(a): not used this round; into the discard rack.
            self.emit(step, "card_discarded_face_up", card=text, back=card.back)
            return
        if self.burns_due:
            self.emit(step, "card_burned", card=text, back=card.back)
            self._check_rack(step)
            return
        if self.halted and self.held_card is None:
            # Dealing is stopped: the card is kept aside, not dealt, and used as the next card once
            # the floor has resolved the alarm (673a.13(b) by analogy).
            self._alarm(
                step,
                self.halted[0].section,
                "a card was drawn while dealing is stopped; it is held aside",
                "resolve the alarm; the held card is dealt next",
                halts=False,
            )
            self.emit(step, "card_held", card=text, back=card.back)
            return
        if self.round is None:
            self._card_outside_round(card, step)
            return
        req = self.round.request
        if not isinstance(req, CardFor):
            self._card_outside_round(card, step)
            return
        self._deal(card, req, step)
        self._advance(step)

    def _other_batch_in_rack(self) -> str | None:
        """673a.3(b)(5): the batch not in the shoe, when it sits in the discard rack of a table that
        keeps two batches (the rack holds one batch at a time there)."""
        if not self.two_batches:
            return None
        return next((back for back in self.batch_in(Place.DISCARD) if back != self.shoe_back), None)

    def _refuse_other_in_rack(self) -> None:
        other = self._other_batch_in_rack()
        if other is not None:
            raise self._refuse(
                self._sec("3(b)(5)"),
                f"the {other} batch is still in the discard rack; load it into the shuffler first",
            )

    def _check_rack(self, step: Step) -> None:
        """673a.3(b)(5): only one batch in the discard rack at a time."""
        other = self._other_batch_in_rack()
        if other is not None:
            self._alarm(
                step,
                self._sec("3(b)(5)"),
                f"{self.shoe_back} cards went into the discard rack holding the {other} batch",
                f"separate the batches; load the {other} batch into the shuffler",
                halts=False,
            )

    def _check_remaining(self, inp: I.CardDrawn, step: Step) -> None:
        if inp.remaining is None or self.shoe_back is None:
            return
        in_shoe = self.batches[self.shoe_back].places[Place.SHOE]
        if inp.remaining != in_shoe:
            self._alarm(
                step,
                self._sec("3(b)"),
                f"the shoe reports {inp.remaining} cards left; the table accounts for {in_shoe}",
                "stop dealing; count the cards in the shoe and the discard rack",
                halts=True,
            )

    def _card_outside_round(self, card: Card, step: Step) -> None:
        if self.dealer_stood:
            # 673a.13(d), 665a.13(d), 685a.12(d): the dealer had 17 or more and drew by mistake.
            self.emit(step, "card_discarded_extra", card=str(card), back=card.back)
            return
        if self.held_card is not None:
            self._alarm(
                step,
                self._sec("drawn_in_error"),
                "a second card was drawn out of turn",
                "stop dealing; rule on the cards drawn in error",
                halts=True,
            )
            return
        # 673a.13(b): drawn in error face down; used as though it were the next card.
        self.emit(step, "card_held", card=str(card), back=card.back)

    def _apply_card_held(self, p: dict[str, Any]) -> None:
        self._take_from_shoe(p)
        self.held_card = parse_card(p["card"], p["back"])

    def _take_from_shoe(self, p: dict[str, Any], to: Place = Place.LAYOUT) -> Card:
        batch = self.batches[p["back"]]
        batch.drawn[p["card"]] += 1
        batch.move(1, Place.SHOE, to)
        return parse_card(p["card"], p["back"])

    def _apply_card_burned(self, p: dict[str, Any]) -> None:
        self._take_from_shoe(p, Place.DISCARD)
        self.burns_due -= 1

    def _apply_card_discarded_face_up(self, p: dict[str, Any]) -> None:
        self._take_from_shoe(p, Place.DISCARD)

    def _apply_card_discarded_extra(self, p: dict[str, Any]) -> None:
        self._take_from_shoe(p, Place.DISCARD)
        self.dealer_stood = False

    # ================================================================== a blackjack round
    def _on_RoundOpened(self, inp: I.RoundOpened, step: Step) -> None:
        if not self.blackjack:
            raise self._refuse("687a.9", "DJ Wild rounds open with WildRoundOpened")
        self._ready_for_round()
        check_wagers(self.options, list(inp.wagers))
        if self.options.bar_non_wagering and self.wagering_seats is not None:
            barred = sorted(w.seat for w in inp.wagers if w.seat not in self.wagering_seats)
            if barred:
                raise self._refuse(
                    self._sec("6(b)"),
                    f"box {', '.join(map(str, barred))} sat out a round of this shoe: no wager until "
                    "the reshuffle or until the house permits it",
                )
        wagers = [
            {"seat": w.seat, "bet": w.bet, "bust_it": w.bust_it, "match_the_dealer": w.match_the_dealer}
            | ({"player": w.player} if w.player else {})
            for w in inp.wagers
        ]
        self.emit(step, "round_started", round=self.round_no + 1, wagers=wagers, dealer=self.dealer_name)
        self._advance(step)

    @property
    def manual(self) -> bool:
        """Shuffling by hand: no shuffler configured, or it is marked out of order (673a.13(l))."""
        return self.shuffler_out_of_order or not self.options.automated_shuffler

    @property
    def two_batches(self) -> bool:
        """673a.3(b) governs a table whose automated shuffler stores one batch while the other is
        dealt: not a hand-shuffled table, not a self-shuffling shoe or continuous shuffler."""
        return not self.manual and not self.options.self_shuffling_shoe

    def _ready_for_round(self) -> None:
        self._refuse_other_in_rack()
        if self.in_round:
            raise self._refuse(self._sec("7"), f"round {self.round_no} is not finished")
        self._not_halted("a new round")
        if "shoe" in self.out_of_order:
            raise self._refuse(self._sec("7(a)"), "the dealing shoe is marked out of order")
        if self.shoe_back is None:
            raise self._refuse(self._sec("7(a)"), "no batch is in the shoe")
        if self.options.reader_inspection_required and self.reader_inspected_day != self._gaming_day():
            raise self._refuse(
                self._sec("2(d)"), "the floorperson has not inspected the card reader this gaming day"
            )
        if self._expired(self.batches[self.shoe_back]):
            # 673a.3(c) (ruling G6): cards past their 24 hours are no longer "opened for use"; a
            # round that started before the hour is finished, no new one starts.
            raise self._refuse(
                self._sec("3(c)"),
                f"the {self.shoe_back} decks were opened over 24 hours ago; end the shoe and change them",
            )
        if self.reshuffle_due and not self.cover_reached:
            raise self._refuse(self._sec("5(f)"), "a reshuffle was ordered: the batch is reshuffled first")
        # A cover card that came out between rounds: that round is played, then the batch is
        # reshuffled (673a.7(d) "appears as the first card ... at the beginning of a round").

    def _apply_round_started(self, p: dict[str, Any]) -> None:
        self.round_no = p["round"]
        self.dealer_stood = False
        if "wild_boxes" in p:
            self.wild = WildRound(boxes=tuple(p["wild_boxes"]))
            return
        wagers = [SeatWagers(**w) for w in p["wagers"]]
        self.round = Round(self.options, wagers, checked=True)
        self.round_cards = []
        self.cover_target = None
        self.last_seats = tuple(w.seat for w in wagers)
        self.refused_seats = set()
        self.hole_shown = False
        if self.options.bar_non_wagering:
            # 673a.6(b): who sat this round out may not wager on the next ones of this shoe.
            self.wagering_seats = frozenset(self.last_seats)

    def _deal(self, card: Card, req: CardFor, step: Step, *, held: bool = False) -> None:
        """Record ``card`` going where the round asked: face up, or the hole card face down."""
        extra = {"held": True} if held else {}
        self.emit(
            step,
            "card_dealt" if req.face_up else "hole_card_dealt",
            round=self.round_no,
            seat=req.seat,
            hand=req.hand,
            card=str(card),
            back=card.back,
            purpose=req.purpose,
            **extra,
        )

    def _apply_card_dealt(self, p: dict[str, Any]) -> None:
        if p.get("held"):
            assert self.held_card is not None
            card, self.held_card = self.held_card, None  # already out of the shoe (card_held)
            self.held_exposed = False
        else:
            card = self._take_from_shoe(p)
        self._answer_card(card, p)

    _apply_hole_card_dealt = _apply_card_dealt

    def _answer_card(self, card: Card, p: dict[str, Any]) -> None:
        assert self.round is not None
        if self.cover_reached and self.cover_target is None:
            self.cover_target = (p["seat"], p["hand"])  # 673a.5(c)(2),(3): where the cover appeared
        self.round_cards.append(card)
        self.round.answer(card)

    def _advance(self, step: Step) -> None:
        """Answer what the round asks that needs no one at the table; stop at what does."""
        rnd = self.round
        while rnd is not None:
            req = rnd.request
            if isinstance(req, CardFor) and self.held_card is not None:
                # 673a.13(b),(c): the card drawn in error is used as though it were the next card.
                self._deal(self.held_card, req, step, held=True)
            elif isinstance(req, Decision) and req.seat in self.refused_seats:
                # 673a.13(c): a player who refused the exposed card gets no more cards: he stands.
                self.emit(step, "decision", round=self.round_no, seat=req.seat, hand=req.hand, action="stand")
            else:
                break
        if rnd is not None and rnd.state.hole_turned and not (rnd.state.hole_exposed or self.hole_shown):
            # 673a.7(n), 665a.7(l), 685a.7(l): the hole card is turned when the players are done,
            # before the dealer draws (unless 685a.7(h) already showed it).
            self.emit(step, "hole_card_turned", round=self.round_no, hole=str(rnd.state.dealer[1]))
        if rnd is not None and rnd.request is None:
            self._finish_round(step)

    def _finish_round(self, step: Step) -> None:
        rnd = self.round
        assert rnd is not None
        state = rnd.state
        if self.held_card is not None and self.held_exposed:
            # 673a.13(c): refused by the players and not used by the dealer: to the discard rack.
            held = self.held_card
            self.emit(step, "exposed_card_discarded", round=self.round_no, card=str(held), back=held.back)
        if state.dealer and not (state.hole_exposed or self.hole_shown):
            self.emit(step, "hole_card_turned", round=self.round_no, hole=str(state.dealer[1]))
        self.emit(step, "round_settled", round=self.round_no, **self._settlement())
        if self.reshuffle_due:
            self._end_shoe(step)

    def _settlement(self) -> dict[str, Any]:
        assert self.round is not None
        state = self.round.state
        return {
            **self.round.outcome(),
            "settlements": [
                {
                    "seat": s.seat,
                    "hand": s.hand,
                    "wager": s.wager.value,
                    "stake": s.stake,
                    "halves": s.halves,
                    "section": s.section,
                }
                for s in state.settlements
            ],
            # 673a.7(t), 685a.7(r): the Rules Submission's procedure; 665a.7(p) has one.
            "dealer_order": dealer_order(
                state.settlements,
                len(state.settlements) if state.final_from is None else state.final_from,
                PLAYER_BY_PLAYER
                if self.options.game is GameId.DOUBLE_ATTACK
                else self.options.rulings.settlement_procedure,
            ),
            "reader": None if state.reader_report is None else {"agrees": state.reader_agrees},
            "dealer_played": state.dealer_played,
        }

    def _apply_hole_card_turned(self, p: dict[str, Any]) -> None:
        self.hole_shown = True

    def _apply_round_settled(self, p: dict[str, Any]) -> None:
        if self.wild is None:
            self.dealer_stood = p["dealer"]["total"] >= 17 and len(p["dealer"]["cards"]) >= 2
            if self.cover_target is not None:
                seat, _ = self.cover_target
                self.cut_reason = ("cover_on_dealer", 0) if seat == DEALER else ("cover_on_seat", seat)
        self._clear_layout()

    def _clear_layout(self) -> None:
        """Cards on the layout go to the discard rack in order (673a.7(u)); the round is over."""
        if self.round is not None and self.shoe_back is not None:
            self.batches[self.shoe_back].move(len(self.round_cards), Place.LAYOUT, Place.DISCARD)
        self.round = None
        self.round_cards = []
        if self.wild is not None:
            self._wild_to_discard()
        self.wild = None

    # ----------------------------------------------------------------- decisions and offers
    def _on_KeyPressed(self, inp: I.KeyPressed, step: Step) -> None:
        if self.wild is not None:
            if inp.key != "next" or not self.wild.dealt:
                raise self._refuse("687a.9", f"{inp.key!r} has no meaning in this DJ Wild round now")
            self._not_halted("the end of the round")  # e.g. a wrong stub count, 687a.9(h)
            if self._stub_count_due():
                raise self._refuse(
                    "687a.9(f)", "the stub is counted at least once every 5 rounds; count it now"
                )
            self._wild_finish(step)
            return
        rnd = self._round_or_refuse()
        req = rnd.request
        key = inp.key
        if isinstance(req, Decision):
            try:
                action = Action(key)
            except ValueError:
                raise self._refuse(
                    self._sec("decisions"), f"the dealer's decision is awaited, not {key!r}"
                ) from None
            if action not in req.legal:
                box = next(b for b in rnd.state.boxes if b.seat == req.seat)
                why = rnd.procedure.refusal(action, box.hands[req.hand], box)
                raise why or self._refuse(self._sec("decisions"), f"{key} is not allowed now")
            self.emit(
                step, "decision", round=self.round_no, seat=req.seat, hand=req.hand, action=action.value
            )
        elif isinstance(req, SecondChanceOffer | SurrenderOffer | EvenMoneyOffer):
            if key not in ("next", "second_chance", "surrender", "even_money"):
                raise self._refuse(
                    self._sec("7"), f"an answer to the {type(req).__name__} is awaited, not {key!r}"
                )
            self._answer_offer(step, req, key != "next")
        elif isinstance(req, InsuranceOffer | DoubleAttackOffer):
            if key not in ("next", "insurance_closed"):
                raise self._refuse(self._sec("8(b)"), f"the {type(req).__name__} is open, not {key!r}")
            # "insurance closed" declines every remaining offer; "next" declines this one.
            while True:
                self._answer_offer(step, req, 0)
                req = rnd.request
                if key == "next" or not isinstance(req, InsuranceOffer | DoubleAttackOffer):
                    break
        else:
            raise self._refuse(self._sec("7"), f"no decision is awaited ({key!r})")
        self._advance(step)

    def _on_WagerPlaced(self, inp: I.WagerPlaced, step: Step) -> None:
        rnd = self._round_or_refuse()
        req = rnd.request
        if not isinstance(req, InsuranceOffer | DoubleAttackOffer) or req.seat != inp.seat:
            section = self._sec("8(b)") if isinstance(req, ReaderUse) else self._sec("wager_timing")
            raise self._refuse(section, f"no wager is being taken from seat {inp.seat} now")
        if not 0 <= inp.amount <= req.maximum:
            section = "665a.6(e)" if isinstance(req, DoubleAttackOffer) else self._sec("8(b)")
            raise self._refuse(
                section, f"seat {inp.seat}: {inp.amount} is more than the {req.maximum} allowed"
            )
        self._answer_offer(step, req, inp.amount)
        self._advance(step)

    def _answer_offer(self, step: Step, offer: Any, value: int | bool) -> None:
        """Record the answer to the offer in front of the dealer (an amount, or yes/no)."""
        self.emit(
            step,
            "offer_answered",
            round=self.round_no,
            offer=type(offer).__name__,
            seat=offer.seat,
            value=value,
        )

    def _apply_decision(self, p: dict[str, Any]) -> None:
        assert self.round is not None
        self.round.answer(Action(p["action"]))

    def _apply_offer_answered(self, p: dict[str, Any]) -> None:
        assert self.round is not None
        self.round.answer(p["value"])

    def _round_or_refuse(self) -> Round:
        if self.round is None or self.round.request is None:
            raise self._refuse(self._sec("7"), "no round is in progress")
        return self.round

    # ----------------------------------------------------------------- the reader
    def _on_ReaderReport(self, inp: I.ReaderReport, step: Step) -> None:
        rnd = self.round
        req = rnd.request if rnd is not None else None
        if self.reader_failed:
            raise self._refuse(self._reader_failed_section(), "the reader is out of order until replaced")
        if isinstance(req, InsuranceOffer):
            # 673a.8(b): insurance is placed before the hole card goes into the reader.
            self._alarm(
                step,
                self._sec("8(b)"),
                "the reader was used before insurance closed",
                "notify the floor; insurance offers still open are declined",
                halts=False,
            )
        # Using the reader closes the window before it: open insurance and early-surrender
        # offers (ruling D5) are declined.
        while rnd is not None and isinstance(rnd.request, InsuranceOffer | SurrenderOffer):
            pending = rnd.request
            self._answer_offer(step, pending, 0 if isinstance(pending, InsuranceOffer) else False)
        req = rnd.request if rnd is not None else None
        if not isinstance(req, ReaderUse):
            self._reader_misuse(step)
            return
        assert rnd is not None
        answer: Any
        if req.masque:
            if inp.light is None:
                raise self._refuse("685a.7(h)", "the Masque reader reports a light")
            answer = inp.light.value
        else:
            if inp.blackjack is None:
                raise self._refuse(self._sec("peek"), "the reader reports whether the dealer has Blackjack")
            answer = inp.blackjack
            if answer != rnd.procedure.dealer_blackjack():
                self._reader_malfunctioned(step)
                return
        self.emit(step, "reader_used", round=self.round_no)
        self.emit(step, "reader_result", round=self.round_no, result=answer)
        state = rnd.state
        if state.hole_exposed:
            self.emit(step, "hole_card_exposed", round=self.round_no, hole=str(state.dealer[1]))
        if not state.reader_agrees:
            # 685a.12(h): a wrong light is the one reader error with a remedy other than stopping:
            # each player continues with the decisions made, or the hand is called dead.
            self._alarm(
                step,
                "685a.12(h)",
                "the reader's light does not match the hole card",
                "for each hand: continue with the decisions made, or call the hand dead",
                halts=False,
            )
        self._advance(step)

    def _reader_malfunctioned(self, step: Step) -> None:
        """673a.13(j), 665a.13(i): a peek reader whose answer is wrong has malfunctioned; the dealer
        may not continue dealing until it is repaired or replaced. The answer is not used: the round
        waits at the reader, and the hole card is read again by the replacement. Nothing said
        publicly tells which way the reader was wrong."""
        self.emit(step, "reader_used", round=self.round_no)
        self.emit(step, "reader_failed", code=0)
        self._alarm(
            step,
            self._reader_failed_section(),
            "the card reader malfunctioned",
            "stop dealing until the reader is repaired or replaced; then read the hole card again",
            halts=True,
        )

    def _apply_reader_used(self, p: dict[str, Any]) -> None:
        pass

    def _apply_reader_result(self, p: dict[str, Any]) -> None:
        assert self.round is not None
        result = p["result"]
        self.round.answer(MasqueRange(result) if isinstance(result, str) else bool(result))

    def _apply_hole_card_exposed(self, p: dict[str, Any]) -> None:
        pass

    def _reader_misuse(self, step: Step) -> None:
        """673a.13(i), 665a.13(h), 685a.12(h): the hole card went into the reader out of turn."""
        rnd = self.round
        up = rnd.state.dealer[0] if rnd is not None and rnd.state.dealer else None
        if (
            self.options.game is GameId.DOUBLE_ATTACK
            and self.options.rulings.reader_reveals_hole_card
            and rnd
        ):
            self._alarm(
                step,
                "665a.13(h)(1)",
                "the hole card went into a reader that shows it, out of turn",
                "all hands are dead; wagers returned",
                halts=False,
            )
            self._void(step, "665a.13(h)(1)", "floor")
            return
        self._alarm(
            step,
            self._sec("reader_misuse"),
            f"the hole card went into the reader out of turn (up card {up})",
            "notify the floorperson; play continues",
            halts=False,
        )

    def _reader_failed_section(self) -> str:
        return self._sec("reader_failed")

    def _on_ReaderFailed(self, inp: I.ReaderFailed, step: Step) -> None:
        if self.reader_failed:
            return
        self.emit(step, "reader_failed", code=inp.code)
        self._alarm(
            step,
            self._reader_failed_section(),
            "the card reader malfunctioned",
            "stop dealing until the reader is repaired or replaced",
            halts=True,
        )

    def _apply_reader_failed(self, p: dict[str, Any]) -> None:
        self.reader_failed = True

    def _on_ReaderReplaced(self, inp: I.ReaderReplaced, step: Step) -> None:
        if not self.reader_failed:
            raise self._refuse(self._reader_failed_section(), "the reader has not failed")
        self.emit(step, "reader_replaced", by=inp.by)
        for alarm in self.halted:
            if alarm.section == self._reader_failed_section():
                self.emit(step, "alarm_acknowledged", id=alarm.id, by=inp.by)
        self._advance(step)

    def _apply_reader_replaced(self, p: dict[str, Any]) -> None:
        self.reader_failed = False

    def _gaming_day(self) -> str:
        local = datetime.fromtimestamp(self.now, GAMING_DAY_ZONE) - GAMING_DAY_STARTS
        return local.date().isoformat()

    def _on_ReaderInspected(self, inp: I.ReaderInspected, step: Step) -> None:
        if not self.blackjack:
            raise self._refuse("687a.9", "DJ Wild dealt from the hand has no card reader")
        if not inp.floorperson.strip():
            raise self._refuse(self._sec("2(d)"), "the floorperson assigned to the table inspects the reader")
        self.emit(step, "reader_inspected", floorperson=inp.floorperson, gaming_day=self._gaming_day())

    def _apply_reader_inspected(self, p: dict[str, Any]) -> None:
        self.reader_inspected_day = p["gaming_day"]

    # ================================================================== one player's hand
    def _on_HeldCardExposed(self, inp: I.HeldCardExposed, step: Step) -> None:
        section = self._sec("exposed_in_error")
        held = self.held_card
        if held is None or self.held_exposed:
            raise self._refuse(section, "no card drawn in error is held face down")
        rnd = self.round
        if rnd is None or len(rnd.state.dealer) < 2:
            raise self._refuse(
                section, "an exposed card is offered on only after the initial two cards to each player"
            )
        self.emit(step, "held_card_exposed", round=self.round_no, card=str(held), back=held.back, by=inp.by)

    def _apply_held_card_exposed(self, p: dict[str, Any]) -> None:
        self.held_exposed = True

    def _on_ExposedCardRefused(self, inp: I.ExposedCardRefused, step: Step) -> None:
        section = self._sec("exposed_in_error")
        req = self.round.request if self.round is not None else None
        if not self.held_exposed:
            raise self._refuse(section, "no exposed card is being offered")
        if not isinstance(req, Decision) or req.seat != inp.seat:
            raise self._refuse(
                section, f"the exposed card is offered to the player deciding, not to box {inp.seat}"
            )
        self.emit(step, "exposed_card_refused", round=self.round_no, seat=inp.seat)
        self._advance(step)

    def _apply_exposed_card_refused(self, p: dict[str, Any]) -> None:
        self.refused_seats.add(p["seat"])

    def _apply_exposed_card_discarded(self, p: dict[str, Any]) -> None:
        self.batches[p["back"]].move(1, Place.LAYOUT, Place.DISCARD)
        self.held_card = None
        self.held_exposed = False

    def _on_DealerCardMissed(self, inp: I.DealerCardMissed, step: Step) -> None:
        if self.options.game is not GameId.DOUBLE_BACK_JACK:
            raise self._refuse(self._sec("deal"), "this chapter has no remedy for a dealer's missed card")
        rnd = self.round
        req = rnd.request if rnd is not None else None
        if rnd is None or not isinstance(req, CardFor) or req.seat != DEALER or len(rnd.state.dealer) >= 2:
            raise self._refuse("673a.13(e)", "the dealer's first or second card is not due now")
        first = not rnd.state.dealer and all(len(b.first.cards) <= 1 for b in rnd.state.boxes)
        if not rnd.state.dealer and not first:
            raise self._refuse("673a.13(e)", "the players have their cards; the dealer deals his own now")
        self.emit(
            step, "dealer_card_missed", round=self.round_no, card="first" if first else "second", by=inp.by
        )

    def _apply_dealer_card_missed(self, p: dict[str, Any]) -> None:
        if p["card"] == "first":  # the second card comes after the players' anyway
            assert self.round is not None
            self.round.answer(None)

    def _on_HandCalledDead(self, inp: I.HandCalledDead, step: Step) -> None:
        rnd = self._round_or_refuse()
        state = rnd.state
        req = rnd.request
        box = next((b for b in state.boxes if b.seat == inp.seat), None)
        if box is None or box.dead or all(h.settled for h in box.hands):
            raise self._refuse(self._sec("card_not_dealt"), f"box {inp.seat} has no hand in play")
        asked = getattr(req, "seat", None) == inp.seat
        if not box.first.cards:
            section = self._sec("no_cards_dead")
            if not isinstance(req, CardFor) or not asked:
                raise self._refuse(section, f"box {inp.seat} is dead only when the deal passes it by")
        elif self.chapter == "685a" and not state.reader_agrees:
            section = "685a.12(h)"  # any hand, while the round is on, after a wrong light
            if asked and not isinstance(req, CardFor | Decision):
                raise self._refuse(section, f"box {inp.seat} is answering an offer")
        else:
            section = self._sec("card_not_dealt")
            if not (isinstance(req, CardFor) and asked and len(state.dealer) >= 2 and not state.hole_turned):
                raise self._refuse(
                    section, f"box {inp.seat} is called dead when the card it asked for was not dealt to it"
                )
        self.emit(step, "hand_called_dead", round=self.round_no, seat=inp.seat, section=section, by=inp.by)
        self._advance(step)

    def _apply_hand_called_dead(self, p: dict[str, Any]) -> None:
        assert self.round is not None
        self.round.call_dead(p["seat"], p["section"])

    def _on_PatronPermitted(self, inp: I.PatronPermitted, step: Step) -> None:
        barred = self.wagering_seats
        if not self.options.bar_non_wagering or barred is None or inp.seat in barred:
            raise self._refuse(self._sec("6(b)(1)"), f"box {inp.seat} is not barred from wagering")
        self.emit(step, "patron_permitted", seat=inp.seat, by=inp.by)

    def _apply_patron_permitted(self, p: dict[str, Any]) -> None:
        assert self.wagering_seats is not None
        self.wagering_seats = self.wagering_seats | {p["seat"]}

    # ================================================================== voids, reshuffles, dealers
    def _on_VoidRound(self, inp: I.VoidRound, step: Step) -> None:
        if not self.in_round:
            raise self._refuse(inp.section, "no round to void")
        self._void(step, inp.section, inp.by)

    def _void(self, step: Step, section: str, by: str, *, remove_deck: bool = False) -> None:
        self.emit(step, "round_voided", round=self.round_no, section=section, by=by)
        if remove_deck:
            self.emit(step, "deck_removed", back=self.shoe_back, by=by)  # 687a.9(h): off the table
        elif self.shoe_back is not None and (self.reshuffle_due or not self.blackjack):
            self._end_shoe(step)  # a DJ Wild deck is reshuffled after a void, never dealt from again

    def _apply_round_voided(self, p: dict[str, Any]) -> None:
        self._clear_layout()

    def _on_ReshuffleOrdered(self, inp: I.ReshuffleOrdered, step: Step) -> None:
        if self.shoe_back is None:
            raise self._refuse(self._sec("5(f)"), "no batch is in the shoe")
        if not self.in_round:
            self._refuse_other_in_rack()
        self.emit(step, "reshuffle_ordered", by=inp.by, reason="floor")
        if not self.in_round:
            self._end_shoe(step)

    def _apply_reshuffle_ordered(self, p: dict[str, Any]) -> None:
        self.reshuffle_due = True
        if p["reason"] == "cover":
            self.cover_reached = True
        else:
            self.cut_reason = ("floor", 0)  # 673a.5(c)(4)

    def _on_FirstPlayerSeated(self, inp: I.FirstPlayerSeated, step: Step) -> None:
        if self.cut_reason[0] != "first":
            raise self._refuse(self._sec("5(c)(1)"), "the game is not just beginning")
        if not 1 <= inp.seat <= self.options.boxes:
            raise self._refuse(self._sec("2(a)"), f"seat {inp.seat} does not exist at this table")
        self.emit(step, "first_player_seated", seat=inp.seat)

    def _apply_first_player_seated(self, p: dict[str, Any]) -> None:
        self.cut_reason = ("first", p["seat"])  # 673a.5(c)(1): offered the first cut

    def _on_NoGamingActivity(self, inp: I.NoGamingActivity, step: Step) -> None:
        if self.in_round:
            raise self._refuse(self._sec("5(g)"), "a round is in progress")
        self.emit(step, "no_gaming_activity", by=inp.by)
        if self.shoe_back is not None:
            self._end_shoe(step)

    def _apply_no_gaming_activity(self, p: dict[str, Any]) -> None:
        self.cut_reason = ("first", 0)  # 673a.5(g): the first player to arrive

    def _end_shoe(self, step: Step) -> None:
        """673a.7(d)(1): the cards left in the shoe go to the discard rack; the batch is reshuffled."""
        assert self.shoe_back is not None
        self.emit(
            step, "shoe_ended", back=self.shoe_back, left=self.batches[self.shoe_back].places[Place.SHOE]
        )

    def _apply_shoe_ended(self, p: dict[str, Any]) -> None:
        batch = self.batches[p["back"]]
        batch.move(batch.places[Place.SHOE], Place.SHOE, Place.DISCARD)
        if self.held_card is not None and self.held_card.back == batch.back:
            # 673a.7(d)(1): the batch is collected so that no card is missing, a held card too.
            batch.move(1, Place.LAYOUT, Place.DISCARD)
            self.held_card = None
        batch.location = Place.DISCARD
        self.shoe_back = None
        self.wagering_seats = None
        self.reshuffle_due = False
        self.cover_reached = False
        self.burns_due = 0

    def _on_DiscardsReshuffled(self, inp: I.DiscardsReshuffled, step: Step) -> None:
        section = self._sec("insufficient_cards")
        batch = self._batch(inp.back)
        rnd = self.round
        if rnd is None or not isinstance(rnd.request, CardFor) or self.shoe_back != inp.back:
            raise self._refuse(section, "the discards are reshuffled only when a round cannot be finished")
        if batch.places[Place.SHOE] > 0:
            raise self._refuse(section, f"the shoe still holds {batch.places[Place.SHOE]} cards")
        n = batch.places[Place.DISCARD]
        if not MIN_CUT_FROM_END <= inp.cut_at <= n - MIN_CUT_FROM_END:
            raise self._refuse(self._sec("5(d)"), f"the cut goes at least ten cards from either end of {n}")
        self.emit(step, "discards_reshuffled", back=inp.back, cards=n, cut_at=inp.cut_at, by=inp.by)

    def _apply_discards_reshuffled(self, p: dict[str, Any]) -> None:
        batch = self.batches[p["back"]]
        batch.move(p["cards"], Place.DISCARD, Place.SHOE)
        # Out of the shoe now: only the cards on the layout (and a held card).
        batch.drawn = Counter(str(c) for c in self.round_cards)
        if self.held_card is not None:
            batch.drawn[str(self.held_card)] += 1
        self.burns_due = 1  # 673a.13(f): the first card is drawn face down into the discard rack
        self.reshuffle_due = True  # the whole batch is reshuffled after this round

    def _on_NewDealer(self, inp: I.NewDealer, step: Step) -> None:
        if self.in_round:
            raise self._refuse(self._sec("7(c)"), "a new dealer comes in between rounds")
        self.emit(step, "new_dealer", name=inp.name)

    def _apply_action_taken(self, p: dict[str, Any]) -> None:
        """Who took the action whose events follow in the same step (journalled by the recorder):
        a record for the people who read the journal; it changes nothing at the table."""

    def _apply_new_dealer(self, p: dict[str, Any]) -> None:
        self.dealer_name = p["name"]
        if self.shoe_back is not None and self.blackjack:
            self.burns_due += 1  # 673a.7(c): each new dealer burns one card

    # ================================================================== alarms
    def _apply_alarm_raised(self, p: dict[str, Any]) -> None:
        self.alarms[p["id"]] = Alarm(p["id"], p["section"], p["message"], p["floor_action"], p["halts"])
        self.next_alarm = p["id"] + 1

    def _on_AlarmAcknowledged(self, inp: I.AlarmAcknowledged, step: Step) -> None:
        alarm = self.alarms.get(inp.alarm)
        if alarm is None or alarm.acknowledged_by is not None:
            raise self._refuse("alarm", f"no active alarm {inp.alarm}")
        if alarm.section == self._reader_failed_section() and self.reader_failed:
            raise self._refuse(alarm.section, "the reader is replaced before dealing resumes")
        self.emit(step, "alarm_acknowledged", id=inp.alarm, by=inp.by)
        self._advance(step)

    def _apply_alarm_acknowledged(self, p: dict[str, Any]) -> None:
        self.alarms[p["id"]].acknowledged_by = p["by"]

    def _apply_table_opened(self, p: dict[str, Any]) -> None:
        pass  # read by JournaledTable before the replay starts

    # ================================================================== DJ Wild (687a.9)
    def _on_WildRoundOpened(self, inp: I.WildRoundOpened, step: Step) -> None:
        if self.blackjack:
            raise self._refuse(self._sec("7"), "blackjack rounds open with RoundOpened")
        if self.in_round:
            raise self._refuse("687a.9", f"round {self.round_no} is not finished")
        self._not_halted("a new round")
        if self.shoe_back is None:
            raise self._refuse("687a.9(a)(2)", "the shuffled deck is not in the dealer's hand")
        if not inp.boxes or any(not 1 <= b <= self.options.boxes for b in inp.boxes):
            raise self._refuse("687a.9(c)", f"boxes with Ante and Blind wagers are 1 to {self.options.boxes}")
        self.emit(
            step,
            "round_started",
            round=self.round_no + 1,
            wild_boxes=list(inp.boxes),
            dealer=self.dealer_name,
        )

    def _on_BetSensed(self, inp: I.BetSensed, step: Step) -> None:
        wild = self.wild
        if wild is None:
            return  # sensors between rounds are not wagers yet
        if wild.locked:
            if inp.present and inp.box not in wild.sensed:
                self._alarm(
                    step,
                    "687a.9(b)",
                    f"a Progressive wager appeared on box {inp.box} after Start Game",
                    "refused as past-posting: remove the wager; review the surveillance",
                    halts=False,
                )
            return
        if (inp.box in wild.sensed) != inp.present:
            self.emit(step, "bet_sensed", round=self.round_no, box=inp.box, present=inp.present)

    def _apply_bet_sensed(self, p: dict[str, Any]) -> None:
        assert self.wild is not None
        if p["present"]:
            self.wild.sensed.add(p["box"])
        else:
            self.wild.sensed.discard(p["box"])

    def _on_StartGame(self, inp: I.StartGame, step: Step) -> None:
        wild = self.wild
        if wild is None:
            raise self._refuse("687a.9(b)", "no round is open")
        if wild.locked:
            raise self._refuse("687a.9(b)", "Start Game was already pressed")
        lit = sorted(wild.sensed)
        self.emit(step, "progressive_locked", round=self.round_no, boxes=lit)
        self.emit(step, "progressive_collected", round=self.round_no, boxes=lit)
        step.commands.append(Command("keypad", "lock_sensors"))
        for box in lit:
            step.commands.append(Command("keypad", "set_light", (box, True)))

    def _on_WildHandsDealt(self, inp: I.WildHandsDealt, step: Step) -> None:
        wild = self.wild
        if wild is None or wild.dealt:
            raise self._refuse("687a.9(c)", "no round is waiting to be dealt")
        if self.options.progressive and not wild.locked:
            raise self._refuse(
                "687a.9(b)", "Start Game locks the Progressive wagers before the cards are dealt"
            )
        dealt = WILD_CARDS_PER_HAND * (len(wild.boxes) + 1) + 1  # boxes, the dealer, the layout card
        self.emit(step, "wild_round_dealt", round=self.round_no, cards=dealt)

    def _stub_count_due(self) -> bool:
        """687a.9(f): without a shuffler that counted 53 cards, the stub is counted at least once
        every 5 rounds."""
        batch = self.batches[self.shoe_back] if self.shoe_back else None
        return not (batch and batch.counted_53) and self.rounds_since_stub_count >= STUB_COUNT_EVERY

    def _on_StubCounted(self, inp: I.StubCounted, step: Step) -> None:
        wild = self.wild
        if wild is None or not wild.dealt:
            raise self._refuse("687a.9(f)", "the stub is counted after the cards are dealt")
        if any(x.section == "687a.9(h)" for x in self.halted):
            raise self._refuse(
                "687a.9(h)", "the count was wrong: the dealer now determines whether it was a misdeal"
            )
        ok = inp.count == wild.stub_expected
        self.emit(
            step, "stub_counted", round=self.round_no, count=inp.count, expected=wild.stub_expected, ok=ok
        )
        if ok:
            self._wild_finish(step)  # 687a.9(g)
        else:
            self._alarm(
                step,
                "687a.9(h)",
                f"the stub holds {inp.count} cards, not {wild.stub_expected}",
                "determine whether the cards were misdealt; all hands are void and wagers returned",
                halts=True,
            )

    def _on_MisdealDetermined(self, inp: I.MisdealDetermined, step: Step) -> None:
        wild = self.wild
        alarm = next((a for a in self.halted if a.section == "687a.9(h)"), None)
        if wild is None or alarm is None:
            raise self._refuse("687a.9(h)", "no wrong stub count is waiting for a ruling")
        self._void(step, "687a.9(h)", inp.by, remove_deck=not inp.misdealt)
        self.emit(step, "alarm_acknowledged", id=alarm.id, by=inp.by)

    def _wild_finish(self, step: Step) -> None:
        self.emit(step, "round_settled", round=self.round_no, wild=True)
        self._end_shoe(step)

    def _apply_progressive_locked(self, p: dict[str, Any]) -> None:
        assert self.wild is not None
        self.wild.locked = True

    def _apply_progressive_collected(self, p: dict[str, Any]) -> None:
        pass

    def _apply_wild_round_dealt(self, p: dict[str, Any]) -> None:
        assert self.wild is not None and self.shoe_back is not None
        batch = self.batches[self.shoe_back]
        batch.move(p["cards"], Place.SHOE, Place.LAYOUT)
        self.wild.dealt = True
        self.wild.stub_expected = batch.places[Place.SHOE]
        self.rounds_since_stub_count += 1

    def _apply_stub_counted(self, p: dict[str, Any]) -> None:
        self.rounds_since_stub_count = 0

    def _apply_deck_removed(self, p: dict[str, Any]) -> None:
        batch = self.batches[p["back"]]
        batch.move(batch.places[Place.DISCARD], Place.DISCARD, Place.REMOVED)
        batch.move(batch.places[Place.SHOE], Place.SHOE, Place.REMOVED)
        batch.location = Place.REMOVED
        batch.opened_at = None
        if self.shoe_back == batch.back:
            self.shoe_back = None

    def _wild_to_discard(self) -> None:
        if self.shoe_back is None:
            return
        batch = self.batches[self.shoe_back]
        batch.move(batch.places[Place.LAYOUT], Place.LAYOUT, Place.DISCARD)

    # ================================================================== the devices themselves
    # Counters the controller acted on are journalled by the shell (JournaledTable) as
    # ``device_seen`` in the same transaction as what they caused; the core only keeps them, so a
    # restart knows where each device's history was read up to.
    def _apply_device_seen(self, p: dict[str, Any]) -> None:
        self.device_seen.setdefault(p["device"], {}).update(p["counters"])

    def _gap_section(self, what: str) -> str:
        return {"cards": self._sec("3(b)"), "keys": self._sec("decisions")}.get(what, self._sec("peek"))

    def _on_DeviceGap(self, inp: I.DeviceGap, step: Step) -> None:
        """One alarm for what a device did that cannot be known; never a card invented."""
        unaccounted = max(0, inp.unaccounted)
        batch = self.batches[self.shoe_back] if self.shoe_back else None
        if inp.what == "cards" and inp.remaining is not None and batch is not None:
            # The shoe's own count says how many left it unseen (none when a counter only glitched).
            unaccounted = max(0, batch.places[Place.SHOE] - inp.remaining)
        if unaccounted and inp.what == "cards" and batch is not None:
            unaccounted = min(unaccounted, batch.places[Place.SHOE])
            self.emit(step, "cards_unaccounted", back=batch.back, count=unaccounted, device=inp.device)
        if inp.what == "cards":
            action = (
                "count the shoe and the discard rack; compare the round in play with the layout and "
                "void it if they differ"
                if unaccounted
                else "no card is unaccounted for; check the shoe if it happens again"
            )
        elif inp.what == "keys":
            action = "the dealer presses again any decision the table view does not show"
        else:
            action = "insert the hole card again if the round still asks for the reader"
        self._alarm(
            step,
            self._gap_section(inp.what),
            f"{inp.device}: {inp.reason}; {unaccounted} {inp.what} unaccounted for",
            action,
            halts=False,
        )

    def _apply_cards_unaccounted(self, p: dict[str, Any]) -> None:
        # Which cards is not known: they count as out of the shoe, in the discard rack.
        self.batches[p["back"]].move(p["count"], Place.SHOE, Place.DISCARD)

    def _on_DeviceOutOfOrder(self, inp: I.DeviceOutOfOrder, step: Step) -> None:
        if inp.device == "shuffler":
            self._on_ShufflerOutOfOrder(I.ShufflerOutOfOrder(by=inp.by), step)
            return
        if inp.device in self.out_of_order:
            raise self._refuse("device", f"the {inp.device} is already marked out of order")
        self.emit(step, "device_out_of_order", device=inp.device, by=inp.by)
        if inp.device == "reader":
            self._on_ReaderFailed(I.ReaderFailed(code=0), step)

    def _apply_device_out_of_order(self, p: dict[str, Any]) -> None:
        self.out_of_order[p["device"]] = p["by"]

    def _on_DeviceRestored(self, inp: I.DeviceRestored, step: Step) -> None:
        if inp.device == "shuffler":
            self._on_ShufflerRestored(I.ShufflerRestored(by=inp.by), step)
            return
        if inp.device not in self.out_of_order:
            raise self._refuse("device", f"the {inp.device} is not marked out of order")
        self.emit(step, "device_restored", device=inp.device, by=inp.by)
        if inp.device == "reader" and self.reader_failed:
            self._on_ReaderReplaced(I.ReaderReplaced(by=inp.by), step)

    def _apply_device_restored(self, p: dict[str, Any]) -> None:
        self.out_of_order.pop(p["device"], None)

    def _on_DeviceFailed(self, inp: I.DeviceFailed, step: Step) -> None:
        if inp.device in self.failed_devices:
            return
        self.emit(step, "device_failed", device=inp.device, reason=inp.reason, alarm=self.next_alarm)
        self._alarm(
            step,
            self._sec("7(a)"),
            f"the dealing {inp.device} has failed ({inp.reason})",
            f"no round till the {inp.device} is back; repair or replace it",
            halts=True,
        )

    def _apply_device_failed(self, p: dict[str, Any]) -> None:
        self.failed_devices[p["device"]] = p["alarm"]

    def _on_DeviceBack(self, inp: I.DeviceBack, step: Step) -> None:
        alarm = self.failed_devices.get(inp.device)
        if alarm is None:
            return
        self.emit(step, "device_back", device=inp.device)
        if self.alarms[alarm].acknowledged_by is None:
            self.emit(step, "alarm_acknowledged", id=alarm, by=f"{inp.device} back")

    def _apply_device_back(self, p: dict[str, Any]) -> None:
        self.failed_devices.pop(p["device"], None)
