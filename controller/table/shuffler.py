"""The two batches and the automated shuffler: decks opened, loaded, shuffled, failed.

673a.3(b),(c), 673a.4 and 673a.13(k),(l) (and the same letters of 665a and 685a; 687a.9(a)(1)
for DJ Wild). Where each card of a batch is lives in ``Batch`` (controller/table/batches.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.table import inputs as I
from controller.table.alarms import raise_alarm
from controller.table.batches import Batch, Place, ShufflerState
from controller.table.events import OMIT, Event, event
from controller.table.machine import Command, Step, applies, handles, public

if TYPE_CHECKING:
    from controller.table.core import Table

DECK_LIFETIME = 24 * 3600.0  # 673a.3(c), 665a.3(c), 685a.3(c)
EXPIRY_WARNING = 3600.0  # warn an hour ahead


@dataclass(slots=True)
class BatchesState:
    batches: dict[str, Batch]
    shuffler_out_of_order: bool = field(default=False, metadata=public("shuffler_out_of_order"))
    expiry_warned: set[str] = field(default_factory=set)

    def batch_in(self, place: Place) -> list[str]:
        return [b.back for b in self.batches.values() if b.location is place]


@event("decks_opened")
@dataclass(slots=True)
class DecksOpened(Event):
    back: str
    dealer: str
    floorperson: str | None
    preinspected: bool
    expires_at: float


@event("deck_expiry_warning")
@dataclass(slots=True)
class DeckExpiryWarning(Event):
    back: str
    seconds_left: float


@event("batch_to_shuffler")
@dataclass(slots=True)
class BatchToShuffler(Event):
    back: str


@event("shuffle_started")
@dataclass(slots=True)
class ShuffleStarted(Event):
    back: str
    by_hand: str | None = field(default=None, metadata=OMIT)  # the dealer who shuffled


@event("shuffle_completed")
@dataclass(slots=True)
class ShuffleCompleted(Event):
    back: str
    cards_counted: int | None


@event("shuffle_failed")
@dataclass(slots=True)
class ShuffleFailed(Event):
    back: str
    reason: str


@event("shuffler_out_of_order")
@dataclass(slots=True)
class ShufflerOutOfOrder(Event):
    by: str


@event("shuffler_restored")
@dataclass(slots=True)
class ShufflerRestored(Event):
    by: str


def expired(t: Table, batch: Batch) -> bool:
    return batch.opened_at is None or t.now >= batch.opened_at + DECK_LIFETIME


def _refuse_out_of_order(t: Table) -> None:
    if t.state.batches.shuffler_out_of_order:
        raise t.refuse(t.sec("shuffler_out_of_order"), "the shuffler is marked out of order")


@handles(I.DecksOpened)
def _decks_opened(t: Table, inp: I.DecksOpened, step: Step) -> None:
    t.batch(inp.back)
    if t.state.shoe.back == inp.back:
        raise t.refuse(t.sec("4"), f"the {inp.back} batch is in play; change decks between shoes")
    if not inp.preinspected and not inp.floorperson:
        raise t.refuse(t.sec("4(a)"), "the floorperson assigned to the table verifies the inspection")
    t.emit(step, DecksOpened(inp.back, inp.dealer, inp.floorperson, inp.preinspected, t.now + DECK_LIFETIME))


@handles(I.Tick)
def _tick(t: Table, inp: I.Tick, step: Step) -> None:
    for batch in t.state.batches.batches.values():
        if batch.opened_at is None or batch.back in t.state.batches.expiry_warned:
            continue
        left = batch.opened_at + DECK_LIFETIME - t.now
        if left <= EXPIRY_WARNING:
            t.emit(step, DeckExpiryWarning(back=batch.back, seconds_left=max(0.0, left)))


@handles(I.BatchToShuffler)
def _to_shuffler(t: Table, inp: I.BatchToShuffler, step: Step) -> None:
    batch = t.batch(inp.back)
    _refuse_out_of_order(t)
    if batch.location not in (Place.DISCARD, Place.NEW):
        raise t.refuse(t.sec("3(b)"), f"the {inp.back} batch is not off the table to be shuffled")
    other = [
        b for b in t.state.batches.batches.values() if b.back != inp.back and b.location is Place.SHUFFLER
    ]
    if other:
        raise t.refuse(t.sec("3(b)(3)"), f"the shuffler already stores the {other[0].back} batch")
    t.emit(step, BatchToShuffler(back=inp.back))


@handles(I.ShuffleStarted)
def _shuffle_started(t: Table, inp: I.ShuffleStarted, step: Step) -> None:
    batch = t.batch(inp.back)
    _refuse_out_of_order(t)
    if batch.location is not Place.SHUFFLER:
        raise t.refuse(t.sec("3(b)(3)"), f"the {inp.back} batch is not in the shuffler")
    t.emit(step, ShuffleStarted(back=inp.back))


@handles(I.ShuffleCompleted)
def _shuffle_completed(t: Table, inp: I.ShuffleCompleted, step: Step) -> None:
    batch = t.batch(inp.back)
    if batch.shuffler is not ShufflerState.SHUFFLING:
        raise t.refuse(t.sec("shuffle_failed"), f"the {inp.back} batch was not being shuffled")
    t.emit(step, ShuffleCompleted(back=inp.back, cards_counted=inp.cards_counted))
    if inp.cards_counted is not None and inp.cards_counted != batch.size:
        raise_alarm(
            t,
            step,
            t.sec("shuffle_failed"),
            f"the shuffler counted {inp.cards_counted} of the {batch.size} cards of the {inp.back} batch",
            "count the batch and reshuffle it before it is dealt",
            halts=False,
        )


@handles(I.ShuffleFailed)
def _shuffle_failed(t: Table, inp: I.ShuffleFailed, step: Step) -> None:
    batch = t.batch(inp.back)
    if batch.location is not Place.SHUFFLER:
        raise t.refuse(t.sec("shuffle_failed"), f"the {inp.back} batch is not in the shuffler")
    t.emit(step, ShuffleFailed(back=inp.back, reason=inp.reason))
    raise_alarm(
        t,
        step,
        t.sec("shuffle_failed"),
        f"the shuffler stopped ({inp.reason}) with the {inp.back} batch",
        "clear the shuffler; the batch is reshuffled",
        halts=False,
    )
    step.commands.append(Command("shuffler", "clear_fault"))


@handles(I.ShufflerOutOfOrder)
def shuffler_out_of_order(t: Table, inp: I.ShufflerOutOfOrder, step: Step) -> None:
    if t.state.batches.shuffler_out_of_order:
        raise t.refuse(t.sec("shuffler_out_of_order"), "the shuffler is already marked out of order")
    t.emit(step, ShufflerOutOfOrder(by=inp.by))
    step.commands.append(Command("shuffler", "mark_out_of_order"))


@handles(I.ShufflerRestored)
def shuffler_restored(t: Table, inp: I.ShufflerRestored, step: Step) -> None:
    if not t.state.batches.shuffler_out_of_order:
        raise t.refuse(t.sec("shuffler_out_of_order"), "the shuffler is not marked out of order")
    t.emit(step, ShufflerRestored(by=inp.by))


# -- transitions ------------------------------------------------------------------------------
@applies(DecksOpened)
def _opened(t: Table, e: DecksOpened) -> None:
    batch = t.state.batches.batches[e.back]
    batch.opened_at = t.now
    batch.inspected = True
    batch.gather(Place.NEW)  # new decks arrive on the table, to be loaded and shuffled
    batch.shuffler = ShufflerState.UNSHUFFLED
    t.state.batches.expiry_warned.discard(batch.back)


@applies(DeckExpiryWarning)
def _warned(t: Table, e: DeckExpiryWarning) -> None:
    t.state.batches.expiry_warned.add(e.back)


@applies(BatchToShuffler)
def _loaded(t: Table, e: BatchToShuffler) -> None:
    batch = t.state.batches.batches[e.back]
    batch.gather(Place.SHUFFLER)
    batch.shuffler = ShufflerState.UNSHUFFLED
    batch.counted_53 = False


@applies(ShuffleStarted)
def _started(t: Table, e: ShuffleStarted) -> None:
    t.state.batches.batches[e.back].shuffler = ShufflerState.SHUFFLING


@applies(ShuffleCompleted)
def _completed(t: Table, e: ShuffleCompleted) -> None:
    batch = t.state.batches.batches[e.back]
    good = e.cards_counted is None or e.cards_counted == batch.size
    batch.shuffler = ShufflerState.READY if good else ShufflerState.JAMMED
    batch.counted_53 = e.cards_counted == batch.size and batch.size == 53


@applies(ShuffleFailed)
def _failed(t: Table, e: ShuffleFailed) -> None:
    t.state.batches.batches[e.back].shuffler = ShufflerState.JAMMED


@applies(ShufflerOutOfOrder)
def _out_of_order(t: Table, e: ShufflerOutOfOrder) -> None:
    t.state.batches.shuffler_out_of_order = True
    for batch in t.state.batches.batches.values():
        if batch.location is Place.SHUFFLER:  # the stored batch comes out to be shuffled by hand
            batch.gather(Place.NEW)
            batch.shuffler = ShufflerState.UNSHUFFLED


@applies(ShufflerRestored)
def _restored(t: Table, e: ShufflerRestored) -> None:
    t.state.batches.shuffler_out_of_order = False
