"""The dealing shoe: a batch into it, each card out of it, burns, the cover card, the end of the shoe.

673a.7(a)-(d), 673a.5(f)-(h), 673a.13(a),(b),(d),(f) (and the same provisions of 665a and 685a).
Every card out of the shoe is checked against its batch (673a.3(b)) before it is dealt: the
round only sees cards this machine lets through (``drawn``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.cards import Card
from controller.rules.requests import CardFor
from controller.shoe import MIN_CUT_FROM_END, min_cover_from_bottom
from controller.table import inputs as I
from controller.table.alarms import raise_alarm
from controller.table.batches import Batch, Place, ShufflerState
from controller.table.events import OMIT, Event, event
from controller.table.machine import Command, Step, applies, handles, public
from controller.table.shuffler import expired

if TYPE_CHECKING:
    from controller.table.core import Table


@dataclass(slots=True)
class ShoeState:
    back: str | None = field(default=None, metadata=public("batch_in_shoe"))  # the batch in the shoe
    last_back: str | None = None  # the batch of the previous shoe (673a.3(b)(4))
    burns_due: int = 0  # 673a.7(c)
    cover_reached: bool = field(default=False, metadata=public("cover_card_reached"))
    cover_from_bottom: int | None = None  # where the cut placed the cover card (673a.5(d))
    reshuffle_due: bool = False  # after this round the shoe is ended (673a.7(d), 673a.5(f))
    held_card: Card | None = None  # 673a.13(b): drawn in error face down, dealt next


@event("batch_to_shoe")
@dataclass(slots=True)
class BatchToShoe(Event):
    back: str


@event("shoe_ended")
@dataclass(slots=True)
class ShoeEnded(Event):
    back: str
    left: int


@event("discards_reshuffled")
@dataclass(slots=True)
class DiscardsReshuffled(Event):
    back: str
    cards: int
    cut_at: int
    by: str


@event("reshuffle_ordered")
@dataclass(slots=True)
class ReshuffleOrdered(Event):
    by: str
    reason: str  # "cover" (673a.7(d)) or "floor" (673a.5(f))
    seat: int | None = field(default=None, metadata=OMIT)  # the cover card's box, 0 the dealer


@event("no_gaming_activity")
@dataclass(slots=True)
class NoGamingActivity(Event):
    by: str


@event("new_dealer")
@dataclass(slots=True)
class NewDealer(Event):
    name: str


# -- checks other machines share ----------------------------------------------------------------
def other_batch_in_rack(t: Table) -> str | None:
    """673a.3(b)(5): the batch not in the shoe, when it sits in the discard rack of a table that
    keeps two batches (the rack holds one batch at a time there)."""
    if not t.two_batches:
        return None
    return next((back for back in t.state.batches.batch_in(Place.DISCARD) if back != t.state.shoe.back), None)


def refuse_other_in_rack(t: Table) -> None:
    other = other_batch_in_rack(t)
    if other is not None:
        raise t.refuse(
            t.sec("3(b)(5)"),
            f"the {other} batch is still in the discard rack; load it into the shuffler first",
        )


def end_shoe(t: Table, step: Step) -> None:
    """673a.7(d)(1): the cards left in the shoe go to the discard rack; the batch is reshuffled."""
    back = t.state.shoe.back
    assert back is not None
    t.emit(step, ShoeEnded(back=back, left=t.state.batches.batches[back].places[Place.SHOE]))


# -- inputs ------------------------------------------------------------------------------------
@handles(I.BatchToShoe)
def _to_shoe(t: Table, inp: I.BatchToShoe, step: Step) -> None:
    batch = t.batch(inp.back)
    if t.state.shoe.back is not None:
        raise t.refuse(t.sec("7(d)"), f"the shoe still holds the {t.state.shoe.back} batch")
    if expired(t, batch):
        raise t.refuse(t.sec("3(c)"), f"the {inp.back} decks were opened over 24 hours ago; change them")
    _check_shuffled(t, batch)
    t.emit(step, BatchToShoe(back=inp.back))
    if t.two_batches and not t.cuts_at_shuffler and not inp.in_shoe:  # a direct-insert shuffler loads it
        step.commands.append(Command("shuffler", "eject_to_shoe", (inp.back,)))


def _check_shuffled(t: Table, batch: Batch) -> None:
    """The batch was shuffled the way this table shuffles, ready to go into the shoe, and cut
    where the table cuts (by hand, or out of a batch shuffler: 673a.5(b)-(d))."""
    if t.options.self_shuffling_shoe and not t.state.batches.shuffler_out_of_order:
        return  # 673a.5(h): the approved device shuffles and counts; 5(b)-(g) do not apply
    if not t.manual:
        if batch.back == t.state.shoe.last_back:
            raise t.refuse(
                t.sec("3(b)(4)"), f"the {batch.back} batch was dealt last shoe; the batches alternate"
            )
        if batch.location is not Place.SHUFFLER or batch.shuffler is not ShufflerState.READY:
            jammed = batch.shuffler is ShufflerState.JAMMED
            section = t.sec("shuffle_failed") if jammed else t.sec("3(b)(3)")
            raise t.refuse(section, f"the {batch.back} batch is not shuffled and ready in the shuffler")
    if t.manual or t.cuts_at_shuffler:
        cut = t.state.cut.procedure
        if cut is None or cut.back != batch.back or cut.cover_from_bottom is None:
            raise t.refuse(
                t.sec("5(d)"), "the stack is cut and the cover card placed before it goes in the shoe"
            )


@handles(I.CoverCardReached)
def _cover_reached(t: Table, inp: I.CoverCardReached, step: Step) -> None:
    if t.options.self_shuffling_shoe:
        raise t.refuse(t.sec("5(h)"), "a self-shuffling shoe has no cover card")
    shoe = t.state.shoe
    if shoe.back is None:
        raise t.refuse(t.sec("7(d)"), "no batch is in the shoe")
    if shoe.cover_reached:
        return
    t.emit(step, ReshuffleOrdered(by="cover card", reason="cover", seat=_cover_seat(t)))
    _check_cover_depth(t, step, inp.remaining)


def _cover_seat(t: Table) -> int:
    """673a.5(c)(2),(3): the box the cover card appeared on, the card the round waits for; 0 for
    the dealer's hand or between rounds (then the cut goes to the dealer's far right)."""
    rnd = t.state.round.round
    req = rnd.request if rnd is not None else None
    return req.seat if isinstance(req, CardFor) else 0


def _check_cover_depth(t: Table, step: Step, remaining: int | None) -> None:
    """673a.5(d): the cover card at least 1/4 of the way in from the bottom; the counting shoe's
    count when it comes out is the number of cards that were behind it."""
    shoe = t.state.shoe
    assert shoe.back is not None
    n = t.state.batches.batches[shoe.back].size
    if remaining is None:
        return
    placed = shoe.cover_from_bottom
    # More cards behind it than recorded: it came out before its place (early); fewer: after it
    # (too deep), and fewer than a quarter breaks 5(d) whatever was recorded.
    if remaining < min_cover_from_bottom(n):
        how, why = (
            "too deep",
            f"only {remaining} of {n} cards were behind it (at least {min_cover_from_bottom(n)})",
        )
    elif placed is not None and remaining != placed:
        how = "early" if remaining > placed else "too deep"
        why = f"{remaining} cards were behind it, but it was recorded {placed} from the bottom"
    else:
        return
    raise_alarm(
        t,
        step,
        t.sec("5(d)"),
        f"the cover card came out {how} in the {shoe.back} batch: {why}",
        "check how the cover card is placed; the batch is reshuffled now as usual",
        halts=False,
    )


@handles(I.ReshuffleOrdered)
def _reshuffle(t: Table, inp: I.ReshuffleOrdered, step: Step) -> None:
    if t.state.shoe.back is None:
        raise t.refuse(t.sec("5(f)"), "no batch is in the shoe")
    if not t.in_round:
        refuse_other_in_rack(t)
    t.emit(step, ReshuffleOrdered(by=inp.by, reason="floor"))
    if not t.in_round:
        end_shoe(t, step)


@handles(I.NoGamingActivity)
def _no_activity(t: Table, inp: I.NoGamingActivity, step: Step) -> None:
    if t.in_round:
        raise t.refuse(t.sec("5(g)"), "a round is in progress")
    t.emit(step, NoGamingActivity(by=inp.by))
    if t.state.shoe.back is not None:
        end_shoe(t, step)


@handles(I.DiscardsReshuffled)
def _discards_reshuffled(t: Table, inp: I.DiscardsReshuffled, step: Step) -> None:
    section = t.sec("insufficient_cards")
    batch = t.batch(inp.back)
    rnd = t.state.round.round
    if rnd is None or not isinstance(rnd.request, CardFor) or t.state.shoe.back != inp.back:
        raise t.refuse(section, "the discards are reshuffled only when a round cannot be finished")
    if batch.places[Place.SHOE] > 0:
        raise t.refuse(section, f"the shoe still holds {batch.places[Place.SHOE]} cards")
    n = batch.places[Place.DISCARD]
    if not MIN_CUT_FROM_END <= inp.cut_at <= n - MIN_CUT_FROM_END:
        raise t.refuse(t.sec("5(d)"), f"the cut goes at least ten cards from either end of {n}")
    t.emit(step, DiscardsReshuffled(back=inp.back, cards=n, cut_at=inp.cut_at, by=inp.by))


@handles(I.NewDealer)
def _new_dealer(t: Table, inp: I.NewDealer, step: Step) -> None:
    if t.in_round:
        raise t.refuse(t.sec("7(c)"), "a new dealer comes in between rounds")
    t.emit(step, NewDealer(name=inp.name))


# -- transitions ------------------------------------------------------------------------------
@applies(BatchToShoe)
def _loaded(t: Table, e: BatchToShoe) -> None:
    batch = t.state.batches.batches[e.back]
    batch.gather(Place.SHOE)
    batch.shuffler = ShufflerState.UNSHUFFLED
    shoe = t.state.shoe
    shoe.back = shoe.last_back = batch.back
    t.state.round.wagering_seats = None  # 673a.6(b)(2): a reshuffle lets every patron wager again
    shoe.burns_due = 0 if t.spec.dealt_from_hand else 1  # 673a.7(c); none from the hand
    shoe.cover_reached = False
    shoe.reshuffle_due = False
    cut = t.state.cut.procedure
    shoe.cover_from_bottom = cut.cover_from_bottom if cut is not None and cut.back == e.back else None
    t.state.cut.procedure = None


@applies(ShoeEnded)
def _ended(t: Table, e: ShoeEnded) -> None:
    shoe = t.state.shoe
    batch = t.state.batches.batches[e.back]
    batch.move(batch.places[Place.SHOE], Place.SHOE, Place.DISCARD)
    if shoe.held_card is not None and shoe.held_card.back == batch.back:
        # 673a.7(d)(1): the batch is collected so that no card is missing, a held card too.
        batch.move(1, Place.LAYOUT, Place.DISCARD)
        shoe.held_card = None
    batch.location = Place.DISCARD
    shoe.back = None
    t.state.round.wagering_seats = None
    shoe.reshuffle_due = False
    shoe.cover_reached = False
    shoe.burns_due = 0


@applies(DiscardsReshuffled)
def _reshuffled(t: Table, e: DiscardsReshuffled) -> None:
    batch = t.state.batches.batches[e.back]
    batch.move(e.cards, Place.DISCARD, Place.SHOE)
    # Out of the shoe now: only the cards on the layout (and a held card).
    batch.drawn = Counter(str(c) for c in t.state.round.cards)
    if t.state.shoe.held_card is not None:
        batch.drawn[str(t.state.shoe.held_card)] += 1
    t.state.shoe.burns_due = 1  # 673a.13(f): the first card is drawn face down into the discard rack
    t.state.shoe.reshuffle_due = True  # the whole batch is reshuffled after this round


@applies(ReshuffleOrdered)
def _ordered(t: Table, e: ReshuffleOrdered) -> None:
    t.state.shoe.reshuffle_due = True
    if e.reason == "cover":
        t.state.shoe.cover_reached = True
        if e.seat is not None:  # 673a.5(c)(2) its box; (3) the dealer's hand: the far right
            t.state.cut.reason = ("cover_on_seat", e.seat) if e.seat else ("cover_on_dealer", 0)
    else:
        t.state.cut.reason = ("floor", 0)  # 673a.5(c)(4)


@applies(NoGamingActivity)
def _idle(t: Table, e: NoGamingActivity) -> None:
    t.state.cut.reason = ("first", 0)  # 673a.5(g): the first player to arrive


@applies(NewDealer)
def _dealer(t: Table, e: NewDealer) -> None:
    t.state.round.dealer_name = e.name
    if t.state.shoe.back is not None and t.blackjack:
        t.state.shoe.burns_due += 1  # 673a.7(c): each new dealer burns one card
