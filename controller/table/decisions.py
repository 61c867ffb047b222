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
    CardLaterOffer,
    Decision,
    DoubleAttackOffer,
    EvenMoneyOffer,
    InsuranceOffer,
    Offer,
    ReaderUse,
    Request,
    SecondChanceOffer,
    SurrenderOffer,
)
from controller.table import inputs as I
from controller.table.events import Event, event
from controller.table.machine import Step, applies, handles
from controller.table.round import DecisionMade, advance, round_or_refuse

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
    elif isinstance(req, CardLaterOffer):
        # 673a.13(g),(h): `hit` the card after the others, `next` the hand dead.
        if key not in ("hit", "next"):
            raise t.refuse(
                req.section,
                f"box {req.seat}: the card after the others (hit) or a dead hand (next), not {key!r}",
            )
        answer_offer(t, step, req, key == "hit")
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
    offer: Offer,
    value: int | bool,
) -> None:
    """Record the answer to the offer in front of the dealer (an amount, or yes/no)."""
    name = OFFER_NAMES[type(offer)]
    t.emit(step, OfferAnswered(t.state.round.number, name, offer.seat, value, bool(value)))


# -- transitions ------------------------------------------------------------------------------
@applies(OfferAnswered)
def _answered(t: Table, e: OfferAnswered) -> None:
    assert t.state.round.round is not None
    t.state.round.round.answer(e.value)
