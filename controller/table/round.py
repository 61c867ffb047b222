"""A blackjack round at the table: opened with its wagers, each card from the shoe to where the
rules ask, on until the rules ask no more (the end of the round is in round_end.py; the dealer's
decisions and offers in decisions.py).

The rules engine (controller.rules) decides what the round asks next; this machine feeds it what
happens at the table and answers on its own what needs no one (a held card dealt next, a player
who refused an exposed card standing). 673a.6, 673a.7 and the same sections of 665a and 685a.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller.cards import Card
from controller.rules.requests import Action, CardFor, Decision, DoubleFor
from controller.rules.round import Round, check_wagers
from controller.rules.state import SeatWagers
from controller.rules.wagers import Wager
from controller.table import inputs as I
from controller.table.alarms import AlarmAcknowledged, not_halted
from controller.table.draw import check_remaining, drawn, outside_round, take_from_shoe
from controller.table.events import OMIT, Event, event
from controller.table.machine import Step, applies, handles, public
from controller.table.round_end import HoleCardTurned, finish
from controller.table.shoe import refuse_other_in_rack
from controller.table.shuffler import expired

if TYPE_CHECKING:
    from controller.table.core import Table


@dataclass(slots=True)
class RoundsState:
    number: int = field(default=0, metadata=public("round"))  # the last round opened
    round: Round | None = None  # the blackjack round in play
    cards: list[Card] = field(default_factory=list)  # cards on the layout this round (for the discard)
    cover_target: tuple[int, int] | None = None  # box (or DEALER) where the cover card appeared
    dealer_stood: bool = False  # the last round ended with the dealer on 17 or more (673a.13(d))
    dealer_name: str | None = None
    held_exposed: bool = False  # 673a.13(c): the held card was exposed to the players
    hole_shown: bool = False  # this round's hole_card_turned is out
    refused_seats: set[int] = field(default_factory=set)  # 673a.13(c): took no more cards this round
    wagering_seats: frozenset[int] | None = None  # 673a.6(b): seats still allowed this shoe


@event("round_started")
@dataclass(slots=True)
class RoundStarted(Event):
    round: int
    wagers: list[dict[str, Any]] | None = field(default=None, metadata=OMIT)  # a blackjack round
    wild_boxes: list[int] | None = field(default=None, metadata=OMIT)  # a DJ Wild round (687a.9)
    dealer: str | None = None


@event("card_dealt")
@dataclass(slots=True)
class CardDealt(Event):
    round: int
    seat: int
    hand: int
    card: str
    back: str
    purpose: str
    # True for the card drawn in error and dealt as the next card (673a.13(b)); absent otherwise.
    held: bool | None = field(default=None, metadata=OMIT)


@event("hole_card_dealt")
@dataclass(slots=True)
class HoleCardDealt(CardDealt):
    pass


@event("decision")
@dataclass(slots=True)
class DecisionMade(Event):
    round: int
    seat: int
    hand: int
    action: str
    amount: int | None = field(default=None, metadata=OMIT)  # a double for less than its limit


# -- opening ----------------------------------------------------------------------------------
def ready_for_round(t: Table) -> None:
    """Refuse a new round the table is not ready for."""
    refuse_other_in_rack(t)
    if t.in_round:
        raise t.refuse(t.sec("7"), f"round {t.state.round.number} is not finished")
    not_halted(t, "a new round")
    if "shoe" in t.state.devices.out_of_order:
        raise t.refuse(t.sec("7(a)"), "the dealing shoe is marked out of order")
    back = t.state.shoe.back
    if back is None:
        raise t.refuse(t.sec("7(a)"), "no batch is in the shoe")
    if t.options.reader_inspection_required and t.state.reader.inspected_day != t.gaming_day():
        raise t.refuse(t.sec("2(d)"), "the floorperson has not inspected the card reader this gaming day")
    if expired(t, t.state.batches.batches[back]):
        # 673a.3(c) (ruling G6): cards past their 24 hours are no longer "opened for use"; a
        # round that started before the hour is finished, no new one starts.
        raise t.refuse(
            t.sec("3(c)"), f"the {back} decks were opened over 24 hours ago; end the shoe and change them"
        )
    if t.state.shoe.reshuffle_due and not t.state.shoe.cover_reached:
        raise t.refuse(t.sec("5(f)"), "a reshuffle was ordered: the batch is reshuffled first")
    # A cover card that came out between rounds: that round is played, then the batch is
    # reshuffled (673a.7(d) "appears as the first card ... at the beginning of a round").


# RoundStarted's wagers: the shipped games' two side wagers are written on every line, 0 when not
# placed (as journals always have); any other side wager only when placed. SeatWagers(**line)
# reads either back.
_ALWAYS_WRITTEN = (Wager.BUST_IT, Wager.MATCH_THE_DEALER)


@handles(I.RoundOpened)
def _opened(t: Table, inp: I.RoundOpened, step: Step) -> None:
    if not t.blackjack:
        raise t.refuse("687a.9", "DJ Wild rounds open with WildRoundOpened")
    ready_for_round(t)
    check_wagers(t.options, list(inp.wagers))
    allowed = t.state.round.wagering_seats
    if t.options.bar_non_wagering and allowed is not None:
        barred = sorted(w.seat for w in inp.wagers if w.seat not in allowed)
        if barred:
            raise t.refuse(
                t.sec("6(b)"),
                f"box {', '.join(map(str, barred))} sat out a round of this shoe: no wager until "
                "the reshuffle or until the house permits it",
            )
    wagers = [
        {"seat": w.seat, "bet": w.bet}
        | dict.fromkeys(_ALWAYS_WRITTEN, 0)
        | dict(w.side)
        | ({"player": w.player} if w.player else {})
        for w in inp.wagers
    ]
    t.emit(
        step, RoundStarted(round=t.state.round.number + 1, wagers=wagers, dealer=t.state.round.dealer_name)
    )
    advance(t, step)


# -- cards -------------------------------------------------------------------------------------
@handles(I.CardDrawn)
def _card_drawn(t: Table, inp: I.CardDrawn, step: Step) -> None:
    card = drawn(t, inp, step)
    if card is not None:
        rnd = t.state.round.round
        req = rnd.request if rnd is not None else None
        if isinstance(req, CardFor):
            deal(t, card, req, step)
            advance(t, step)
        else:
            outside_round(t, card, step)
    check_remaining(t, inp, step)


def deal(t: Table, card: Card, req: CardFor, step: Step, *, held: bool = False) -> None:
    """Record ``card`` going where the round asked: face up, or the hole card face down."""
    kind = CardDealt if req.face_up else HoleCardDealt
    assert card.back is not None  # a card out of the shoe is always of a batch
    t.emit(
        step,
        kind(
            t.state.round.number,
            req.seat,
            req.hand,
            str(card),
            card.back,
            req.purpose,
            True if held else None,
        ),
    )


def advance(t: Table, step: Step) -> None:
    """Answer what the round asks that needs no one at the table; stop at what does."""
    rs = t.state.round
    rnd = rs.round
    if rnd is None:
        return
    while True:
        req = rnd.request
        held = t.state.shoe.held_card
        if isinstance(req, CardFor) and held is not None:
            deal(t, held, req, step, held=True)  # 673a.13(b),(c): used as though the next card
        elif isinstance(req, Decision) and req.seat in rs.refused_seats:
            # 673a.13(c): a player who refused the exposed card gets no more cards: he stands.
            t.emit(step, DecisionMade(rs.number, req.seat, req.hand, "stand"))
        else:
            break
    if rnd.state.hole_turned and not (rnd.state.hole_exposed or rs.hole_shown):
        # 673a.7(n), 665a.7(l), 685a.7(l): the hole card is turned when the players are done,
        # before the dealer draws (unless 685a.7(h) already showed it).
        t.emit(step, HoleCardTurned(rs.number, str(rnd.state.dealer[1])))
    if rnd.request is None:
        finish(t, rnd, step)


# -- the dealer's keys and the wagers on offers ----------------------------------------------------
def round_or_refuse(t: Table) -> Round:
    rnd = t.state.round.round
    if rnd is None or rnd.request is None:
        raise t.refuse(t.sec("7"), "no round is in progress")
    return rnd


# -- the floor ---------------------------------------------------------------------------------
@handles(I.AlarmAcknowledged)
def _acknowledged(t: Table, inp: I.AlarmAcknowledged, step: Step) -> None:
    alarm = t.state.alarms.alarms.get(inp.alarm)
    if alarm is None or alarm.acknowledged_by is not None:
        raise t.refuse("alarm", f"no active alarm {inp.alarm}")
    if alarm.section == t.sec("reader_failed") and t.state.reader.failed:
        raise t.refuse(alarm.section, "the reader is replaced before dealing resumes")
    t.emit(step, AlarmAcknowledged(id=inp.alarm, by=inp.by))
    advance(t, step)


# -- transitions ------------------------------------------------------------------------------
@applies(RoundStarted)
def _started(t: Table, e: RoundStarted) -> None:
    rs = t.state.round
    rs.number = e.round
    rs.dealer_stood = False
    if e.wild_boxes is not None:
        t.state.wild.open(tuple(e.wild_boxes))
        return
    assert e.wagers is not None
    wagers = [SeatWagers(**w) for w in e.wagers]
    rs.round = Round(t.options, wagers, checked=True)
    rs.cards = []
    rs.cover_target = None
    t.state.cut.last_seats = tuple(w.seat for w in wagers)
    rs.refused_seats = set()
    rs.hole_shown = False
    if t.options.bar_non_wagering:
        # 673a.6(b): who sat this round out may not wager on the next ones of this shoe.
        rs.wagering_seats = frozenset(t.state.cut.last_seats)


@applies(CardDealt)
def _dealt(t: Table, e: CardDealt) -> None:
    rs = t.state.round
    shoe = t.state.shoe
    if e.held:
        assert shoe.held_card is not None
        card, shoe.held_card = shoe.held_card, None  # already out of the shoe (card_held)
        rs.held_exposed = False
    else:
        card = take_from_shoe(t, e.card, e.back)
    assert rs.round is not None
    if shoe.cover_reached and rs.cover_target is None:
        rs.cover_target = (e.seat, e.hand)  # 673a.5(c)(2),(3): where the cover card appeared
    rs.cards.append(card)
    rs.round.answer(card)


applies(HoleCardDealt)(_dealt)


@applies(DecisionMade)
def _decided(t: Table, e: DecisionMade) -> None:
    assert t.state.round.round is not None
    action = Action(e.action)
    t.state.round.round.answer(action if e.amount is None else DoubleFor(e.amount))
