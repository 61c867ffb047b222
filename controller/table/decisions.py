"""The dealer's answers to what a blackjack round asks: a decision by key (673a.7(i) and the same
provisions of 665a and 685a), an offer answered by key or by a wager placed (insurance and Double
Attack up to their maximum, 673a.8(b), 665a.6(e); even money, surrender, Second Chance).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from controller.rules.requests import (
    OFFER_NAMES,
    Action,
    Decision,
    Offer,
    ReaderUse,
    Request,
    WagerOffer,
    offer_kind,
)
from controller.table import inputs as I
from controller.table.events import Event, event
from controller.table.machine import Step, applies, handles
from controller.table.round import DecisionMade, advance, round_or_refuse
from controller.table.sections import cited

if TYPE_CHECKING:
    from controller.table.core import Table


@event("offer_answered")
@dataclass(slots=True)
class OfferAnswered(Event):
    """``offer`` is the offer's public name (``insurance``, ``double_attack``, ``even_money``,
    ``surrender``, ``second_chance``, ``card_later``); ``value`` the wager placed (an amount, 0
    when declined) for insurance and Double Attack, else true or false; ``taken`` says which,
    the same for every offer."""

    round: int
    offer: str
    seat: int
    value: int | bool
    taken: bool = False

    @classmethod
    def decode(cls, **payload: Any) -> Self:
        # Journals written before the public names carried the rules' class names and no taken.
        offer = _OLD_NAMES.get(payload["offer"], payload["offer"])
        taken = payload.get("taken", bool(payload["value"]))
        return cls(payload["round"], offer, payload["seat"], payload["value"], taken)


_OLD_NAMES = {cls.__name__: name for cls, name in OFFER_NAMES.items()}


def key_pressed(t: Table, inp: I.KeyPressed, step: Step) -> None:
    """A key of the dealer's keypad in a blackjack round: a decision or an answer to an offer."""
    rnd = round_or_refuse(t)
    req = rnd.request
    key = inp.key
    if inp.amount is not None and not (isinstance(req, Decision) and key == Action.DOUBLE):
        raise t.refuse(t.sec("decisions"), f"only a double is keyed with an amount, not {key!r}")
    if isinstance(req, Decision):
        try:
            action = Action(key)
        except ValueError:
            raise t.refuse(t.sec("decisions"), f"the dealer's decision is awaited, not {key!r}") from None
        if action not in req.legal:
            box = next(b for b in rnd.state.boxes if b.seat == req.seat)
            why = rnd.procedure.refusal(action, box.hands[req.hand], box)
            raise why or t.refuse(t.sec("decisions"), f"{key} is not allowed now")
        box = next(b for b in rnd.state.boxes if b.seat == req.seat)
        if inp.amount is not None:
            rnd.procedure.double_amount(inp.amount, box)  # refused here, before it is journalled
        t.emit(step, DecisionMade(t.state.round.number, req.seat, req.hand, action.value, inp.amount))
    elif isinstance(req, Offer):
        # Any registered offer, answered by one of the keys it registered (673a.13(g),(h): `hit`
        # the card after the others; a wager offer is taken by placing the wager, _wager).
        kind = offer_kind(req)
        if key not in kind.keys:
            raise t.refuse(req.cites() or cited(t.spec, kind.section), req.refusal(key))
        if not kind.wager:
            answer_offer(t, step, req, key != "next")
        else:
            # "insurance closed" declines every remaining wager offer; "next" declines this one.
            offer: Request | None = req
            while isinstance(offer, WagerOffer):
                answer_offer(t, step, offer, 0)
                offer = rnd.request if key != "next" else None
    else:
        raise t.refuse(t.sec("7"), f"no decision is awaited ({key!r})")
    advance(t, step)


@handles(I.WagerPlaced)
def _wager(t: Table, inp: I.WagerPlaced, step: Step) -> None:
    rnd = round_or_refuse(t)
    req = rnd.request
    if not isinstance(req, WagerOffer) or req.seat != inp.seat:
        section = t.sec("8(b)") if isinstance(req, ReaderUse) else t.sec("wager_timing")
        raise t.refuse(section, f"no wager is being taken from seat {inp.seat} now")
    if not 0 <= inp.amount <= req.maximum:
        raise t.refuse(
            cited(t.spec, offer_kind(req).limit),
            f"seat {inp.seat}: {inp.amount} is more than the {req.maximum} allowed",
        )
    answer_offer(t, step, req, inp.amount)
    advance(t, step)


def answer_offer(
    t: Table,
    step: Step,
    offer: Offer,
    value: int | bool,
) -> None:
    """Record the answer to the offer in front of the dealer (an amount, or yes/no)."""
    name = offer_kind(offer).name
    t.emit(step, OfferAnswered(t.state.round.number, name, offer.seat, value, bool(value)))


def offer_input(req: Offer, taken: bool | int) -> I.Input:
    """The input that answers ``req`` as the dealer gives it: a wager offer by the wager placed
    (``taken`` its amount, 0 declines), another by the key it registered to take or decline."""
    kind = offer_kind(req)
    if isinstance(req, WagerOffer):
        return I.WagerPlaced(seat=req.seat, amount=int(taken))
    return I.KeyPressed(key=kind.key_for("take" if taken else "decline"))


# -- transitions ------------------------------------------------------------------------------
@applies(OfferAnswered)
def _answered(t: Table, e: OfferAnswered) -> None:
    assert t.state.round.round is not None
    t.state.round.round.answer(e.value)
