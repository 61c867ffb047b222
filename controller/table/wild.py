"""A DJ Wild round dealt from the hand (687a.9): opened with the boxes that wager, dealt, the stub
counted (at least every 5 rounds without a counting shuffler, 687a.9(f)), ended or ruled a misdeal
(687a.9(h)). The stub's contents are never known to the core: only its count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.table import inputs as I
from controller.table.alarms import AlarmAcknowledged, not_halted, raise_alarm
from controller.table.batches import Place
from controller.table.decisions import key_pressed
from controller.table.events import Event, event
from controller.table.machine import Step, applies, handles
from controller.table.round import RoundStarted
from controller.table.round_end import RoundSettled, void
from controller.table.shoe import end_shoe

if TYPE_CHECKING:
    from controller.table.core import Table

STUB_COUNT_EVERY = 5  # 687a.9(f)
WILD_CARDS_PER_HAND = 5


@dataclass(slots=True)
class WildRound:
    boxes: tuple[int, ...]
    sensed: set[int] = field(default_factory=set)  # Progressive wagers (progressive.py)
    locked: bool = False  # Start Game pressed: the Progressive wagers are locked (687a.9(b))
    dealt: bool = False
    stub_expected: int = 0


@dataclass(slots=True)
class WildState:
    round: WildRound | None = None
    rounds_since_stub_count: int = 0

    def open(self, boxes: tuple[int, ...]) -> None:
        self.round = WildRound(boxes=boxes)


@event("wild_round_dealt")
@dataclass(slots=True)
class WildRoundDealt(Event):
    round: int
    cards: int


@event("stub_counted")
@dataclass(slots=True)
class StubCounted(Event):
    round: int
    count: int
    expected: int
    ok: bool


@event("deck_removed")
@dataclass(slots=True)
class DeckRemoved(Event):
    back: str
    by: str


@handles(I.WildRoundOpened)
def _opened(t: Table, inp: I.WildRoundOpened, step: Step) -> None:
    if t.blackjack:
        raise t.refuse(t.sec("7"), "blackjack rounds open with RoundOpened")
    if t.in_round:
        raise t.refuse("687a.9", f"round {t.state.round.number} is not finished")
    not_halted(t, "a new round")
    if t.state.shoe.back is None:
        raise t.refuse("687a.9(a)(2)", "the shuffled deck is not in the dealer's hand")
    if not inp.boxes or any(not 1 <= b <= t.options.boxes for b in inp.boxes):
        raise t.refuse("687a.9(c)", f"boxes with Ante and Blind wagers are 1 to {t.options.boxes}")
    number = t.state.round.number + 1
    t.emit(step, RoundStarted(round=number, wild_boxes=list(inp.boxes), dealer=t.state.round.dealer_name))


@handles(I.KeyPressed)
def _key(t: Table, inp: I.KeyPressed, step: Step) -> None:
    """The dealer's keypad: Next ends a DJ Wild round; in a blackjack round a key is a decision
    or an answer to an offer (controller/table/round.py)."""
    wild = t.state.wild.round
    if wild is None:
        key_pressed(t, inp, step)
        return
    if inp.key != "next" or not wild.dealt or inp.amount is not None:
        raise t.refuse("687a.9", f"{inp.key!r} has no meaning in this DJ Wild round now")
    not_halted(t, "the end of the round")  # e.g. a wrong stub count, 687a.9(h)
    if stub_count_due(t):
        raise t.refuse("687a.9(f)", "the stub is counted at least once every 5 rounds; count it now")
    _finish(t, step)


@handles(I.WildHandsDealt)
def _dealt(t: Table, inp: I.WildHandsDealt, step: Step) -> None:
    wild = t.state.wild.round
    if wild is None or wild.dealt:
        raise t.refuse("687a.9(c)", "no round is waiting to be dealt")
    if t.options.progressive and not wild.locked:
        raise t.refuse("687a.9(b)", "Start Game locks the Progressive wagers before the cards are dealt")
    dealt = WILD_CARDS_PER_HAND * (len(wild.boxes) + 1) + 1  # boxes, the dealer, the layout card
    t.emit(step, WildRoundDealt(t.state.round.number, dealt))


def stub_count_due(t: Table) -> bool:
    """687a.9(f): without a shuffler that counted 53 cards, the stub is counted at least once
    every 5 rounds."""
    back = t.state.shoe.back
    batch = t.state.batches.batches[back] if back else None
    return not (batch and batch.counted_53) and t.state.wild.rounds_since_stub_count >= STUB_COUNT_EVERY


@handles(I.StubCounted)
def _stub_counted(t: Table, inp: I.StubCounted, step: Step) -> None:
    wild = t.state.wild.round
    if wild is None or not wild.dealt:
        raise t.refuse("687a.9(f)", "the stub is counted after the cards are dealt")
    if any(x.section == "687a.9(h)" for x in t.state.alarms.halted):
        raise t.refuse("687a.9(h)", "the count was wrong: the dealer now determines whether it was a misdeal")
    ok = inp.count == wild.stub_expected
    t.emit(step, StubCounted(t.state.round.number, inp.count, wild.stub_expected, ok))
    if ok:
        _finish(t, step)  # 687a.9(g)
    else:
        raise_alarm(
            t,
            step,
            "687a.9(h)",
            f"the stub holds {inp.count} cards, not {wild.stub_expected}",
            "determine whether the cards were misdealt; all hands are void and wagers returned",
            halts=True,
            action="misdeal_determined",
        )


@handles(I.MisdealDetermined)
def _misdeal(t: Table, inp: I.MisdealDetermined, step: Step) -> None:
    alarm = next((a for a in t.state.alarms.halted if a.section == "687a.9(h)"), None)
    if t.state.wild.round is None or alarm is None:
        raise t.refuse("687a.9(h)", "no wrong stub count is waiting for a ruling")
    back = t.state.shoe.back
    void(t, step, "687a.9(h)", inp.by, end_the_shoe=inp.misdealt)
    if not inp.misdealt:
        assert back is not None
        t.emit(step, DeckRemoved(back=back, by=inp.by))  # 687a.9(h): off the table
    t.emit(step, AlarmAcknowledged(id=alarm.id, by=inp.by))


def _finish(t: Table, step: Step) -> None:
    t.emit(step, RoundSettled(t.state.round.number, wild=True))
    end_shoe(t, step)


# -- transitions ------------------------------------------------------------------------------
@applies(WildRoundDealt)
def _hands_dealt(t: Table, e: WildRoundDealt) -> None:
    wild = t.state.wild.round
    back = t.state.shoe.back
    assert wild is not None and back is not None
    batch = t.state.batches.batches[back]
    batch.move(e.cards, Place.SHOE, Place.LAYOUT)
    wild.dealt = True
    wild.stub_expected = batch.places[Place.SHOE]
    t.state.wild.rounds_since_stub_count += 1


@applies(StubCounted)
def _counted(t: Table, e: StubCounted) -> None:
    t.state.wild.rounds_since_stub_count = 0


@applies(DeckRemoved)
def _removed(t: Table, e: DeckRemoved) -> None:
    batch = t.state.batches.batches[e.back]
    batch.move(batch.places[Place.DISCARD], Place.DISCARD, Place.REMOVED)
    batch.move(batch.places[Place.SHOE], Place.SHOE, Place.REMOVED)
    batch.location = Place.REMOVED
    batch.opened_at = None
    if t.state.shoe.back == batch.back:
        t.state.shoe.back = None
