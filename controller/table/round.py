"""A blackjack round at the table: opened with its wagers, each card from the shoe to where the
rules ask, the dealer's keys and the wagers on offers, settled or voided.

The rules engine (controller.rules) decides what the round asks next; this machine feeds it what
happens at the table and answers on its own what needs no one (a held card dealt next, a player
who refused an exposed card standing). 673a.6, 673a.7 and the same sections of 665a and 685a.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller.cards import Card
from controller.games import GameId
from controller.rules.requests import (
    DEALER,
    Action,
    CardFor,
    Decision,
    DoubleAttackOffer,
    EvenMoneyOffer,
    InsuranceOffer,
    ReaderUse,
    Request,
    SecondChanceOffer,
    SurrenderOffer,
)
from controller.rules.round import Round, check_wagers
from controller.rules.settlement_order import PLAYER_BY_PLAYER, dealer_order
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.alarms import AlarmAcknowledged, not_halted
from controller.table.batches import Place
from controller.table.events import OMIT, Event, event
from controller.table.machine import Step, applies, handles, public
from controller.table.shoe import (
    check_remaining,
    drawn,
    end_shoe,
    outside_round,
    refuse_other_in_rack,
    take_from_shoe,
)
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
    held: bool | None = field(
        default=None, metadata=OMIT
    )  # the card drawn in error, dealt as the next card (673a.13(b))


@event("hole_card_dealt")
@dataclass(slots=True)
class HoleCardDealt(CardDealt):
    pass


@event("hole_card_turned")
@dataclass(slots=True)
class HoleCardTurned(Event):
    round: int
    hole: str


@event("decision")
@dataclass(slots=True)
class DecisionMade(Event):
    round: int
    seat: int
    hand: int
    action: str


@event("offer_answered")
@dataclass(slots=True)
class OfferAnswered(Event):
    round: int
    offer: str
    seat: int
    value: int | bool


@event("exposed_card_discarded")
@dataclass(slots=True)
class ExposedCardDiscarded(Event):
    round: int
    card: str
    back: str


@event("round_settled")
@dataclass(slots=True)
class RoundSettled(Event):
    """A blackjack round's outcome (the hands, settlements, the dealer's order of settling), or
    a DJ Wild round's end (``wild``: its hands are settled at the table, not here)."""

    round: int
    outcome: dict[str, Any] = field(default_factory=dict)
    wild: bool = False

    def payload(self) -> dict[str, Any]:
        return {"round": self.round, "wild": True} if self.wild else {"round": self.round, **self.outcome}

    @classmethod
    def decode(cls, **payload: Any) -> RoundSettled:
        number = payload.pop("round")
        wild = bool(payload.pop("wild", False))
        return cls(number, payload, wild)


@event("round_voided")
@dataclass(slots=True)
class RoundVoided(Event):
    round: int
    section: str
    by: str


# -- opening ----------------------------------------------------------------------------------
def ready_for_round(t: Table) -> str:
    """Refuse a new round the table is not ready for; the batch in the shoe."""
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
    return back


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
        {"seat": w.seat, "bet": w.bet, "bust_it": w.bust_it, "match_the_dealer": w.match_the_dealer}
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
        _finish(t, rnd, step)


def _finish(t: Table, rnd: Round, step: Step) -> None:
    rs = t.state.round
    held = t.state.shoe.held_card
    if held is not None and rs.held_exposed:
        # 673a.13(c): refused by the players and not used by the dealer: to the discard rack.
        assert held.back is not None
        t.emit(step, ExposedCardDiscarded(rs.number, str(held), held.back))
    state = rnd.state
    if state.dealer and not (state.hole_exposed or rs.hole_shown):
        t.emit(step, HoleCardTurned(rs.number, str(state.dealer[1])))
    t.emit(step, RoundSettled(rs.number, _settlement(t, rnd)))
    if t.state.shoe.reshuffle_due:
        end_shoe(t, step)


def _settlement(t: Table, rnd: Round) -> dict[str, Any]:
    state = rnd.state
    settlements = [
        {"seat": s.seat, "hand": s.hand, "wager": s.wager.value, "stake": s.stake, "halves": s.halves,
         "section": s.section}
        for s in state.settlements
    ]  # fmt: skip
    return {
        **rnd.outcome(),
        "settlements": settlements,
        # 673a.7(t), 685a.7(r): the Rules Submission's procedure; 665a.7(p) has one.
        "dealer_order": dealer_order(
            state.settlements,
            len(state.settlements) if state.final_from is None else state.final_from,
            PLAYER_BY_PLAYER
            if t.options.game is GameId.DOUBLE_ATTACK
            else t.options.rulings.settlement_procedure,
        ),
        "reader": None if state.reader_report is None else {"agrees": state.reader_agrees},
        "dealer_played": state.dealer_played,
    }


# -- the dealer's keys and the wagers on offers ----------------------------------------------------
def round_or_refuse(t: Table) -> Round:
    rnd = t.state.round.round
    if rnd is None or rnd.request is None:
        raise t.refuse(t.sec("7"), "no round is in progress")
    return rnd


def key_pressed(t: Table, inp: I.KeyPressed, step: Step) -> None:
    """A key of the dealer's keypad in a blackjack round: a decision or an answer to an offer."""
    rnd = round_or_refuse(t)
    req = rnd.request
    key = inp.key
    if isinstance(req, Decision):
        try:
            action = Action(key)
        except ValueError:
            raise t.refuse(t.sec("decisions"), f"the dealer's decision is awaited, not {key!r}") from None
        if action not in req.legal:
            box = next(b for b in rnd.state.boxes if b.seat == req.seat)
            why = rnd.procedure.refusal(action, box.hands[req.hand], box)
            raise why or t.refuse(t.sec("decisions"), f"{key} is not allowed now")
        t.emit(step, DecisionMade(t.state.round.number, req.seat, req.hand, action.value))
    elif isinstance(req, SecondChanceOffer | SurrenderOffer | EvenMoneyOffer):
        if key not in ("next", "second_chance", "surrender", "even_money"):
            raise t.refuse(t.sec("7"), f"an answer to the {type(req).__name__} is awaited, not {key!r}")
        answer_offer(t, step, req, key != "next")
    elif isinstance(req, InsuranceOffer | DoubleAttackOffer):
        if key not in ("next", "insurance_closed"):
            raise t.refuse(t.sec("8(b)"), f"the {type(req).__name__} is open, not {key!r}")
        # "insurance closed" declines every remaining offer; "next" declines this one.
        offer: Request | None = req
        while isinstance(offer, InsuranceOffer | DoubleAttackOffer):
            answer_offer(t, step, offer, 0)
            offer = rnd.request if key != "next" else None
    else:
        raise t.refuse(t.sec("7"), f"no decision is awaited ({key!r})")
    advance(t, step)


@handles(I.WagerPlaced)
def _wager(t: Table, inp: I.WagerPlaced, step: Step) -> None:
    rnd = round_or_refuse(t)
    req = rnd.request
    if not isinstance(req, InsuranceOffer | DoubleAttackOffer) or req.seat != inp.seat:
        section = t.sec("8(b)") if isinstance(req, ReaderUse) else t.sec("wager_timing")
        raise t.refuse(section, f"no wager is being taken from seat {inp.seat} now")
    if not 0 <= inp.amount <= req.maximum:
        section = "665a.6(e)" if isinstance(req, DoubleAttackOffer) else t.sec("8(b)")
        raise t.refuse(section, f"seat {inp.seat}: {inp.amount} is more than the {req.maximum} allowed")
    answer_offer(t, step, req, inp.amount)
    advance(t, step)


def answer_offer(
    t: Table,
    step: Step,
    offer: InsuranceOffer | DoubleAttackOffer | SecondChanceOffer | SurrenderOffer | EvenMoneyOffer,
    value: int | bool,
) -> None:
    """Record the answer to the offer in front of the dealer (an amount, or yes/no)."""
    t.emit(step, OfferAnswered(t.state.round.number, type(offer).__name__, offer.seat, value))


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


# -- voids --------------------------------------------------------------------------------------
@handles(I.VoidRound)
def _void_round(t: Table, inp: I.VoidRound, step: Step) -> None:
    if not t.in_round:
        raise t.refuse(inp.section, "no round to void")
    void(t, step, inp.section, inp.by)


def void(t: Table, step: Step, section: str, by: str, *, end_the_shoe: bool = True) -> None:
    t.emit(step, RoundVoided(t.state.round.number, section, by))
    shoe = t.state.shoe
    if end_the_shoe and shoe.back is not None and (shoe.reshuffle_due or not t.blackjack):
        end_shoe(t, step)  # a DJ Wild deck is reshuffled after a void, never dealt from again


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


@applies(HoleCardTurned)
def _turned(t: Table, e: HoleCardTurned) -> None:
    t.state.round.hole_shown = True


@applies(DecisionMade)
def _decided(t: Table, e: DecisionMade) -> None:
    assert t.state.round.round is not None
    t.state.round.round.answer(Action(e.action))


@applies(OfferAnswered)
def _answered(t: Table, e: OfferAnswered) -> None:
    assert t.state.round.round is not None
    t.state.round.round.answer(e.value)


@applies(ExposedCardDiscarded)
def _exposed_discarded(t: Table, e: ExposedCardDiscarded) -> None:
    t.state.batches.batches[e.back].move(1, Place.LAYOUT, Place.DISCARD)
    t.state.shoe.held_card = None
    t.state.round.held_exposed = False


@applies(RoundSettled)
def _settled(t: Table, e: RoundSettled) -> None:
    rs = t.state.round
    if t.state.wild.round is None:
        dealer = e.outcome["dealer"]
        rs.dealer_stood = dealer["total"] >= 17 and len(dealer["cards"]) >= 2
        if rs.cover_target is not None:
            seat, _ = rs.cover_target
            t.state.cut.reason = ("cover_on_dealer", 0) if seat == DEALER else ("cover_on_seat", seat)
    _clear_layout(t)


@applies(RoundVoided)
def _voided(t: Table, e: RoundVoided) -> None:
    _clear_layout(t)


def _clear_layout(t: Table) -> None:
    """Cards on the layout go to the discard rack in order (673a.7(u)); the round is over."""
    rs = t.state.round
    back = t.state.shoe.back
    if back is not None:
        batch = t.state.batches.batches[back]
        if rs.round is not None:
            batch.move(len(rs.cards), Place.LAYOUT, Place.DISCARD)
        if t.state.wild.round is not None:
            batch.move(batch.places[Place.LAYOUT], Place.LAYOUT, Place.DISCARD)
    rs.round = None
    rs.cards = []
    t.state.wild.round = None
