"""Each card out of the shoe: checked against its batch (673a.3(b)) and the shoe's own count, then
burned (673a.7(c)), discarded face up (673a.13(a)), held aside when drawn in error or while
dealing is stopped (673a.13(b)), discarded as the dealer's extra card (673a.13(d)), or let
through to the round (``drawn``) to be dealt where it asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.cards import Card, parse_card
from controller.table import inputs as I
from controller.table.alarms import count_of, raise_alarm
from controller.table.batches import Place
from controller.table.events import Event, event
from controller.table.machine import Step, applies
from controller.table.shoe import other_batch_in_rack

if TYPE_CHECKING:
    from controller.table.core import Table


@dataclass(slots=True)
class _CardOut(Event):
    """A card out of the shoe, named with its batch: secret unless the kind says it is face up."""

    card: str
    back: str


@event("card_burned")
@dataclass(slots=True)
class CardBurned(_CardOut):
    pass


@event("card_discarded_face_up")
@dataclass(slots=True)
class CardDiscardedFaceUp(_CardOut):
    pass


@event("card_discarded_extra")
@dataclass(slots=True)
class CardDiscardedExtra(_CardOut):
    pass


@event("card_held")
@dataclass(slots=True)
class CardHeld(_CardOut):
    pass


def take_from_shoe(t: Table, card: str, back: str, to: Place = Place.LAYOUT) -> Card:
    batch = t.state.batches.batches[back]
    batch.drawn[card] += 1
    batch.move(1, Place.SHOE, to)
    return parse_card(card, back)


# -- a card out of the shoe --------------------------------------------------------------------
def drawn(t: Table, inp: I.CardDrawn, step: Step) -> Card | None:
    """The card to deal, or None when the shoe's rules dealt with it (a wrong batch, a card past
    the count, face up in the shoe, a burn, held while dealing is stopped)."""
    shoe = t.state.shoe
    if shoe.back is None:
        raise t.refuse(t.sec("7(a)"), "a card was drawn with no batch in the shoe")
    batch = t.state.batches.batches[shoe.back]
    card = inp.card
    text = str(card)
    if card.back != batch.back:
        # 673a.3(b)(2): a card of the other batch's colour in the shoe.
        raise_alarm(
            t,
            step,
            t.sec("3(b)(2)"),
            f"a card with {card.back} backs came out of the shoe holding the {batch.back} batch",
            "stop dealing; find how the batches mixed, account for both batches",
            halts=True,
        )
        return None
    if not batch.can_draw(text) or batch.places[Place.SHOE] <= 0:
        raise_alarm(
            t,
            step,
            t.sec("3(b)"),
            "a card came out of the shoe more often than the batch holds it, or past the count",
            "stop dealing; count the batch",
            halts=True,
        )
        return None
    if inp.face_up_in_shoe:
        t.emit(step, CardDiscardedFaceUp(card=text, back=batch.back))  # 673a.13(a): not used; discarded
        return None
    if shoe.burns_due:
        t.emit(step, CardBurned(card=text, back=batch.back))
        _check_rack(t, step)
        return None
    halted = t.state.alarms.halted
    if halted and shoe.held_card is None:
        # Dealing is stopped: the card is kept aside, not dealt, and used as the next card once
        # the floor has resolved the alarm (673a.13(b) by analogy).
        raise_alarm(
            t,
            step,
            halted[0].section,
            "a card was drawn while dealing is stopped; it is held aside",
            "resolve the alarm; the held card is dealt next",
            halts=False,
        )
        t.emit(step, CardHeld(card=text, back=batch.back))
        return None
    return card


def outside_round(t: Table, card: Card, step: Step) -> None:
    """A card drawn when the round asks for none (``card`` came through ``drawn``: its batch is
    the one in the shoe)."""
    back = t.state.shoe.back
    assert back is not None
    if t.state.round.dealer_stood:
        # 673a.13(d), 665a.13(d), 685a.12(d): the dealer had 17 or more and drew by mistake.
        t.emit(step, CardDiscardedExtra(card=str(card), back=back))
        return
    if t.state.shoe.held_card is not None:
        raise_alarm(
            t,
            step,
            t.sec("drawn_in_error"),
            "a second card was drawn out of turn",
            "stop dealing; rule on the cards drawn in error",
            halts=True,
        )
        return
    t.emit(step, CardHeld(card=str(card), back=back))  # 673a.13(b): used as the next card


def check_remaining(t: Table, inp: I.CardDrawn, step: Step) -> None:
    """Card conservation against the shoe's own count."""
    if inp.remaining is None or t.state.shoe.back is None:
        return
    in_shoe = t.state.batches.batches[t.state.shoe.back].places[Place.SHOE]
    if inp.remaining != in_shoe:
        raise_alarm(
            t,
            step,
            t.sec("3(b)"),
            f"the shoe reports {count_of(inp.remaining, 'cards')} left; the table accounts for {in_shoe}",
            "stop dealing; count the cards in the shoe and the discard rack",
            halts=True,
        )


def _check_rack(t: Table, step: Step) -> None:
    """673a.3(b)(5): only one batch in the discard rack at a time."""
    other = other_batch_in_rack(t)
    if other is not None:
        raise_alarm(
            t,
            step,
            t.sec("3(b)(5)"),
            f"{t.state.shoe.back} cards went into the discard rack holding the {other} batch",
            f"separate the batches; load the {other} batch into the shuffler",
            halts=False,
        )


# -- transitions ------------------------------------------------------------------------------
@applies(CardHeld)
def _held(t: Table, e: CardHeld) -> None:
    t.state.shoe.held_card = take_from_shoe(t, e.card, e.back)


@applies(CardBurned)
def _burned(t: Table, e: CardBurned) -> None:
    take_from_shoe(t, e.card, e.back, Place.DISCARD)
    t.state.shoe.burns_due -= 1


@applies(CardDiscardedFaceUp)
def _face_up(t: Table, e: CardDiscardedFaceUp) -> None:
    take_from_shoe(t, e.card, e.back, Place.DISCARD)


@applies(CardDiscardedExtra)
def _extra(t: Table, e: CardDiscardedExtra) -> None:
    take_from_shoe(t, e.card, e.back, Place.DISCARD)
    t.state.round.dealer_stood = False
