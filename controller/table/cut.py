"""The cut of a shuffled stack: 673a.5(a)-(e) (and the same letters of 665a and 685a), one
procedure for a batch shuffled by hand and for a batch the dealer takes out of the shuffler (every
shuffle but a direct-insert shuffler's, ruling G13, or a self-shuffling shoe's, 5(h)).

Who is offered the cut (673a.5(c)): the first player seated, the player whose box the cover card
came out on, otherwise the seats from the dealer's far right (the cover card on the dealer's hand,
a reshuffle the floor ordered, no gaming activity); the dealer cuts when all refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.shoe import MIN_CUT_FROM_END, min_cover_from_bottom
from controller.table import inputs as I
from controller.table.batches import Place, ShufflerState
from controller.table.events import Event, event
from controller.table.machine import Command, Step, applies, handles
from controller.table.shuffler import ShuffleCompleted, ShuffleStarted

if TYPE_CHECKING:
    from controller.table.core import Table


@dataclass(slots=True)
class CutProcedure:
    """673a.5(b)-(e) for a batch shuffled by hand."""

    back: str
    offer_order: list[int]  # seats to offer the cut to, in order; the dealer cuts if all refuse
    cutter: int | None = None  # seat that cut (0 = dealer)
    cut_at: int | None = None
    cover_from_bottom: int | None = None


@dataclass(slots=True)
class CutState:
    reason: tuple[str, int] = ("first", 0)  # 673a.5(c): why the next cut is offered, and to whom
    procedure: CutProcedure | None = None
    last_seats: tuple[int, ...] = field(default=())  # the boxes of the last round


@event("cut_offered")
@dataclass(slots=True)
class CutOffered(Event):
    back: str
    seats: list[int]
    reason: str


@event("cut_refused")
@dataclass(slots=True)
class CutRefused(Event):
    seat: int


@event("cut_made")
@dataclass(slots=True)
class CutMade(Event):
    at: int
    by: int


@event("cover_card_placed")
@dataclass(slots=True)
class CoverCardPlaced(Event):
    from_bottom: int


@event("recut_ordered")
@dataclass(slots=True)
class RecutOrdered(Event):
    by: str
    seat: int  # the last cutter (0 = the dealer)


@event("first_player_seated")
@dataclass(slots=True)
class FirstPlayerSeated(Event):
    seat: int


def _offer_order(t: Table) -> list[int]:
    """673a.5(c): who is offered the cut, in order; the dealer cuts when all refuse (b)."""
    reason, seat = t.state.cut.reason
    if reason == "first":  # (1): the game is (again, 5(g)) just beginning: the first player seated
        return [seat] if seat else []
    if reason == "cover_on_seat" and seat:  # (2)
        return [seat]
    return sorted(t.state.cut.last_seats, reverse=True)  # (3), (4): farthest to the dealer's right first


def _procedure(t: Table) -> CutProcedure:
    if t.state.cut.procedure is None:
        raise t.refuse(t.sec("5(b)"), "no cut is being offered")
    return t.state.cut.procedure


@handles(I.HandShuffled)
def _hand_shuffled(t: Table, inp: I.HandShuffled, step: Step) -> None:
    if not t.blackjack:
        raise t.refuse("687a.9(a)(1)", "cards dealt from the hand are shuffled by an automated shuffler")
    batch = t.batch(inp.back)
    if t.options.shuffling_device and not t.state.batches.shuffler_out_of_order:
        raise t.refuse(
            t.sec("shuffler_out_of_order"),
            "cards are shuffled by another method only after the shuffler is marked out of order",
        )
    if batch.location not in (Place.DISCARD, Place.NEW):
        raise t.refuse(t.sec("5(a)"), f"the {inp.back} batch is not off the table to be shuffled")
    if t.state.shoe.back is not None:
        raise t.refuse(t.sec("3(b)(5)"), "the shoe still holds a batch")
    t.emit(step, ShuffleStarted(back=inp.back, by_hand=inp.dealer))
    t.emit(step, ShuffleCompleted(back=inp.back, cards_counted=None))
    t.emit(step, CutOffered(back=inp.back, seats=_offer_order(t), reason=t.state.cut.reason[0]))


@handles(I.StackFromShuffler)
def _stack_out(t: Table, inp: I.StackFromShuffler, step: Step) -> None:
    """673a.5(a),(b): the shuffler has finished; the dealer takes the stack out and offers the cut."""
    if not t.cuts_at_shuffler:
        raise t.refuse(t.sec("5(a)"), "at this table the stack is not taken out of a shuffler to be cut")
    batch = t.batch(inp.back)
    if t.in_round or t.state.shoe.back is not None:
        raise t.refuse(t.sec("3(b)(5)"), "the shoe still holds a batch")
    if t.state.cut.procedure is not None:
        raise t.refuse(t.sec("5(b)"), f"the {t.state.cut.procedure.back} stack is being cut")
    if batch.back == t.state.shoe.last_back:
        raise t.refuse(t.sec("3(b)(4)"), f"the {batch.back} batch was dealt last shoe; the batches alternate")
    if batch.location is not Place.SHUFFLER or batch.shuffler is not ShufflerState.READY:
        raise t.refuse(t.sec("3(b)(3)"), f"the {batch.back} batch is not shuffled and ready in the shuffler")
    t.emit(step, CutOffered(back=inp.back, seats=_offer_order(t), reason=t.state.cut.reason[0]))
    step.commands.append(Command("shuffler", "eject_to_shoe", (inp.back,)))  # the stack comes out


@handles(I.CutRefused)
def _cut_refused(t: Table, inp: I.CutRefused, step: Step) -> None:
    cut = _procedure(t)
    if not cut.offer_order or cut.offer_order[0] != inp.seat:
        raise t.refuse(t.sec("5(c)"), f"the cut was not offered to seat {inp.seat}")
    t.emit(step, CutRefused(seat=inp.seat))


@handles(I.CutMade)
def _cut_made(t: Table, inp: I.CutMade, step: Step) -> None:
    cut = _procedure(t)
    expected = cut.offer_order[0] if cut.offer_order else 0
    if inp.by != expected and not (cut.cutter is not None and inp.by == cut.cutter):
        who = f"seat {expected}" if expected else "the dealer"
        raise t.refuse(t.sec("5(c)"), f"the cut is offered to {who}, not to {inp.by or 'the dealer'}")
    n = t.state.batches.batches[cut.back].size
    if not MIN_CUT_FROM_END <= inp.at <= n - MIN_CUT_FROM_END:
        raise t.refuse(t.sec("5(d)"), f"the cover card goes at least ten cards from either end of {n}")
    t.emit(step, CutMade(at=inp.at, by=inp.by))


@handles(I.CoverCardPlaced)
def _cover_placed(t: Table, inp: I.CoverCardPlaced, step: Step) -> None:
    cut = _procedure(t)
    if cut.cut_at is None:
        raise t.refuse(t.sec("5(d)"), "the stack is cut before the cover card is placed")
    n = t.state.batches.batches[cut.back].size
    if not min_cover_from_bottom(n) <= inp.from_bottom <= n:
        raise t.refuse(
            t.sec("5(d)"),
            "the cover card goes at least 1/4 of the way in from the bottom "
            f"({min_cover_from_bottom(n)} of {n})",
        )
    t.emit(step, CoverCardPlaced(from_bottom=inp.from_bottom))


@handles(I.RecutOrdered)
def _recut(t: Table, inp: I.RecutOrdered, step: Step) -> None:
    cut = t.state.cut.procedure
    if cut is None:
        raise t.refuse(t.sec("5(e)"), "a recut is ordered after the cut and before the cards go in the shoe")
    if cut.cut_at is None:
        raise t.refuse(t.sec("5(e)"), "a recut is ordered after the cut")
    assert cut.cutter is not None  # set with cut_at
    t.emit(step, RecutOrdered(by=inp.by, seat=cut.cutter))


@handles(I.FirstPlayerSeated)
def _first_player(t: Table, inp: I.FirstPlayerSeated, step: Step) -> None:
    if t.state.cut.reason[0] != "first":
        raise t.refuse(t.sec("5(c)(1)"), "the game is not just beginning")
    if not 1 <= inp.seat <= t.options.boxes:
        raise t.refuse(t.sec("2(a)"), f"seat {inp.seat} does not exist at this table")
    t.emit(step, FirstPlayerSeated(seat=inp.seat))


# -- transitions ------------------------------------------------------------------------------
@applies(CutOffered)
def _offered(t: Table, e: CutOffered) -> None:
    t.state.cut.procedure = CutProcedure(back=e.back, offer_order=list(e.seats))


@applies(CutRefused)
def _refused(t: Table, e: CutRefused) -> None:
    assert t.state.cut.procedure is not None
    t.state.cut.procedure.offer_order.pop(0)


@applies(CutMade)
def _made(t: Table, e: CutMade) -> None:
    cut = t.state.cut.procedure
    assert cut is not None
    cut.cutter = e.by
    cut.cut_at = e.at
    cut.cover_from_bottom = None


@applies(CoverCardPlaced)
def _placed(t: Table, e: CoverCardPlaced) -> None:
    assert t.state.cut.procedure is not None
    t.state.cut.procedure.cover_from_bottom = e.from_bottom


@applies(RecutOrdered)
def _recut_ordered(t: Table, e: RecutOrdered) -> None:
    cut = t.state.cut.procedure
    assert cut is not None
    # 673a.5(e): the last cutter or the next person entitled to cut.
    cut.offer_order = [e.seat] + [s for s in cut.offer_order if s != e.seat]
    cut.cut_at = None
    cut.cover_from_bottom = None


@applies(FirstPlayerSeated)
def _seated(t: Table, e: FirstPlayerSeated) -> None:
    t.state.cut.reason = ("first", e.seat)  # 673a.5(c)(1): offered the first cut
