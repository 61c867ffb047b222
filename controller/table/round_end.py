"""The end of a blackjack round (and of a DJ Wild round): the hole card turned when the players
are done (673a.7(n), 665a.7(l), 685a.7(l)), the round settled in the Rules Submission's order
(673a.7(t), 685a.7(r), 665a.7(p)) or voided, the cards on the layout to the discard rack in order
(673a.7(u)); the shoe ended when a reshuffle is due.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller.rules.requests import DEALER
from controller.rules.round import Round
from controller.rules.settlement_order import PLAYER_BY_PLAYER, dealer_order
from controller.table import inputs as I
from controller.table.batches import Place
from controller.table.events import Event, event
from controller.table.machine import Step, applies, handles
from controller.table.shoe import end_shoe

if TYPE_CHECKING:
    from controller.table.core import Table


@event("hole_card_turned")
@dataclass(slots=True)
class HoleCardTurned(Event):
    round: int
    hole: str


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


def finish(t: Table, rnd: Round, step: Step) -> None:
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
        {
            "seat": s.seat,
            "hand": s.hand,
            "wager": s.wager.value,
            "stake": s.stake,
            "halves": s.halves,
            "section": s.section,
        }
        for s in state.settlements
    ]
    return {
        **rnd.outcome(),
        "settlements": settlements,
        # 673a.7(t), 685a.7(r): the Rules Submission's procedure; 665a.7(p) has one.
        "dealer_order": dealer_order(
            state.settlements,
            len(state.settlements) if state.final_from is None else state.final_from,
            t.options.rulings.settlement_procedure
            if "settlement_procedure" in t.spec.rulings
            else PLAYER_BY_PLAYER,
        ),
        "reader": None if state.reader_report is None else {"agrees": state.reader_agrees},
        "dealer_played": state.dealer_played,
    }


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
@applies(HoleCardTurned)
def _turned(t: Table, e: HoleCardTurned) -> None:
    t.state.round.hole_shown = True


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
