"""Irregularities of one player's hand and the floor's remedies: a held card exposed and refused
(673a.13(c)), the dealer's missed card (673a.13(e)), a player's card the dealer missed, with the
player's option of it after the others or a dead hand (673a.13(g),(h), 665a.13(f),(g),
685a.12(f),(g)), a hand called dead (673a.13(g),(h), 665a.13(f),(g), 685a.12(f)-(h)) and a patron
permitted to wager again (673a.6(b)(1)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.games import GameId
from controller.rules.requests import DEALER, CardFor, Decision
from controller.rules.requests import CardMissed as CardMissedAnswer
from controller.table import inputs as I
from controller.table.events import Event, event
from controller.table.machine import Step, applies, handles
from controller.table.round import advance, round_or_refuse

if TYPE_CHECKING:
    from controller.table.core import Table


@event("held_card_exposed")
@dataclass(slots=True)
class HeldCardExposed(Event):
    round: int
    card: str
    back: str
    by: str


@event("exposed_card_refused")
@dataclass(slots=True)
class ExposedCardRefused(Event):
    round: int
    seat: int


@event("dealer_card_missed")
@dataclass(slots=True)
class DealerCardMissed(Event):
    round: int
    card: str  # "first" or "second"
    by: str


@event("hand_called_dead")
@dataclass(slots=True)
class HandCalledDead(Event):
    round: int
    seat: int
    section: str
    by: str


@event("card_missed")
@dataclass(slots=True)
class CardMissed(Event):
    round: int
    seat: int
    hand: int
    section: str
    by: str


@event("patron_permitted")
@dataclass(slots=True)
class PatronPermitted(Event):
    seat: int
    by: str


@handles(I.HeldCardExposed)
def _held_exposed(t: Table, inp: I.HeldCardExposed, step: Step) -> None:
    section = t.sec("exposed_in_error")
    held = t.state.shoe.held_card
    if held is None or t.state.round.held_exposed:
        raise t.refuse(section, "no card drawn in error is held face down")
    rnd = t.state.round.round
    if rnd is None or len(rnd.state.dealer) < 2:
        raise t.refuse(
            section, "an exposed card is offered on only after the initial two cards to each player"
        )
    assert held.back is not None
    t.emit(step, HeldCardExposed(t.state.round.number, str(held), held.back, inp.by))


@handles(I.ExposedCardRefused)
def _refused(t: Table, inp: I.ExposedCardRefused, step: Step) -> None:
    section = t.sec("exposed_in_error")
    rnd = t.state.round.round
    req = rnd.request if rnd is not None else None
    if not t.state.round.held_exposed:
        raise t.refuse(section, "no exposed card is being offered")
    if not isinstance(req, Decision) or req.seat != inp.seat:
        raise t.refuse(section, f"the exposed card is offered to the player deciding, not to box {inp.seat}")
    t.emit(step, ExposedCardRefused(t.state.round.number, inp.seat))
    advance(t, step)


@handles(I.DealerCardMissed)
def _dealer_missed(t: Table, inp: I.DealerCardMissed, step: Step) -> None:
    if t.options.game != GameId.DOUBLE_BACK_JACK:
        raise t.refuse(t.sec("deal"), "this chapter has no remedy for a dealer's missed card")
    rnd = t.state.round.round
    req = rnd.request if rnd is not None else None
    if rnd is None or not isinstance(req, CardFor) or req.seat != DEALER or len(rnd.state.dealer) >= 2:
        raise t.refuse("673a.13(e)", "the dealer's first or second card is not due now")
    first = not rnd.state.dealer and all(len(b.first.cards) <= 1 for b in rnd.state.boxes)
    if not rnd.state.dealer and not first:
        raise t.refuse("673a.13(e)", "the players have their cards; the dealer deals his own now")
    t.emit(step, DealerCardMissed(t.state.round.number, "first" if first else "second", inp.by))


@handles(I.HandCalledDead)
def _called_dead(t: Table, inp: I.HandCalledDead, step: Step) -> None:
    rnd = round_or_refuse(t)
    state = rnd.state
    req = rnd.request
    box = next((b for b in state.boxes if b.seat == inp.seat), None)
    if box is None or box.dead or all(h.settled for h in box.hands):
        raise t.refuse(t.sec("card_not_dealt"), f"box {inp.seat} has no hand in play")
    asked = getattr(req, "seat", None) == inp.seat
    if not box.first.cards:
        section = t.sec("no_cards_dead")
        if not isinstance(req, CardFor) or not asked:
            raise t.refuse(section, f"box {inp.seat} is dead only when the deal passes it by")
    elif t.chapter == "685a" and not state.reader_agrees:
        section = "685a.12(h)"  # any hand, while the round is on, after a wrong light
        if asked and not isinstance(req, CardFor | Decision):
            raise t.refuse(section, f"box {inp.seat} is answering an offer")
    else:
        section = t.sec("card_not_dealt")
        if not (isinstance(req, CardFor) and asked and len(state.dealer) >= 2 and not state.hole_turned):
            raise t.refuse(
                section, f"box {inp.seat} is called dead when the card it asked for was not dealt to it"
            )
    t.emit(step, HandCalledDead(t.state.round.number, inp.seat, section, inp.by))
    advance(t, step)


# The cards a player may take after the others when the dealer missed them: the second card of
# the deal ("") and the cards he requested (a hit, a double's card, a split hand's card). A card
# already put off, a Second Chance card or the dealer's own are not.
_LATER_PURPOSES = ("", "double", "split")


@handles(I.PlayerCardMissed)
def _card_missed(t: Table, inp: I.PlayerCardMissed, step: Step) -> None:
    rnd = round_or_refuse(t)
    state, req = rnd.state, rnd.request
    section = t.sec("card_not_dealt")
    if not isinstance(req, CardFor) or req.seat != inp.seat or req.seat == DEALER:
        raise t.refuse(section, f"box {inp.seat} is not being dealt a card now")
    box = next(b for b in state.boxes if b.seat == inp.seat)
    hand = box.hands[req.hand]
    if not box.first.cards:
        raise t.refuse(
            t.sec("no_cards_dead"), f"box {inp.seat} got no card: its hand is dead (hand_called_dead)"
        )
    if req.purpose not in _LATER_PURPOSES:
        raise t.refuse(section, f"this card cannot be put off; box {inp.seat}'s hand may be called dead")
    if len(state.dealer) < 2 and req.purpose == "" and len(hand.cards) == 1:
        section = t.sec("no_cards_dead")  # (g): only one card of the deal was dealt
    elif len(state.dealer) < 2 or state.hole_turned:
        raise t.refuse(
            section, f"box {inp.seat}'s card is dealt after the first two, before the hole card is turned"
        )
    elif state.hole_exposed:  # 685a.12(g): not after the hole card was exposed under 685a.7(h)
        raise t.refuse(section, "the hole card is exposed (685a.7(h)): the player's option is a dead hand")
    t.emit(step, CardMissed(t.state.round.number, inp.seat, req.hand, section, inp.by))


@handles(I.PatronPermitted)
def _permitted(t: Table, inp: I.PatronPermitted, step: Step) -> None:
    allowed = t.state.round.wagering_seats
    if not t.options.bar_non_wagering or allowed is None or inp.seat in allowed:
        raise t.refuse(t.sec("6(b)(1)"), f"box {inp.seat} is not barred from wagering")
    t.emit(step, PatronPermitted(seat=inp.seat, by=inp.by))


# -- transitions ------------------------------------------------------------------------------
@applies(HeldCardExposed)
def _exposed(t: Table, e: HeldCardExposed) -> None:
    t.state.round.held_exposed = True


@applies(ExposedCardRefused)
def _refusal(t: Table, e: ExposedCardRefused) -> None:
    t.state.round.refused_seats.add(e.seat)


@applies(DealerCardMissed)
def _missed(t: Table, e: DealerCardMissed) -> None:
    if e.card == "first":  # the second card comes after the players' anyway
        assert t.state.round.round is not None
        t.state.round.round.answer(None)


@applies(HandCalledDead)
def _dead(t: Table, e: HandCalledDead) -> None:
    assert t.state.round.round is not None
    t.state.round.round.call_dead(e.seat, e.section)


@applies(CardMissed)
def _card_missed_applied(t: Table, e: CardMissed) -> None:
    assert t.state.round.round is not None
    t.state.round.round.answer(CardMissedAnswer(e.section))  # the procedure offers the option


@applies(PatronPermitted)
def _permit(t: Table, e: PatronPermitted) -> None:
    assert t.state.round.wagering_seats is not None
    t.state.round.wagering_seats = t.state.round.wagering_seats | {e.seat}
