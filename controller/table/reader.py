"""The card reader: the hole card read for Blackjack (a peek device, 673a.7(h), 665a.7(g)) or
for its range (the Masque reader, 685a.7(h)); inspected every gaming day (673a.2(d)); failed or
used out of turn (673a.13(i),(j) and the same provisions of 665a and 685a).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.gaming_day import GamingDay
from controller.rules.requests import InsuranceOffer, MasqueRange, Offer, ReaderUse, offer_kind
from controller.table import inputs as I
from controller.table.alarms import AlarmAcknowledged, raise_alarm
from controller.table.decisions import answer_offer
from controller.table.events import Event, event
from controller.table.machine import Step, applies, handles, public
from controller.table.round import advance
from controller.table.round_end import void

if TYPE_CHECKING:
    from controller.table.core import Table


# 673a.2(d): the reader is inspected "at the beginning of each gaming day": the table's gaming
# day (its table file's time zone and start; Pennsylvania time from 6 a.m. unless it says otherwise).
def gaming_day(now: float, calendar: GamingDay) -> str:
    return calendar.day_of(now).isoformat()


@dataclass(slots=True)
class ReaderState:
    failed: bool = field(default=False, metadata=public("reader_failed"))
    inspected_day: str | None = field(default=None, metadata=public("reader_inspected_for"))


@event("reader_used")
@dataclass(slots=True)
class ReaderUsed(Event):
    round: int


@event("reader_result")
@dataclass(slots=True)
class ReaderResult(Event):
    round: int
    result: bool | str  # Blackjack or not (a peek device), or the Masque light


@event("hole_card_exposed")
@dataclass(slots=True)
class HoleCardExposed(Event):
    round: int
    hole: str


@event("reader_failed")
@dataclass(slots=True)
class ReaderFailed(Event):
    code: int


@event("reader_replaced")
@dataclass(slots=True)
class ReaderReplaced(Event):
    by: str


@event("reader_inspected")
@dataclass(slots=True)
class ReaderInspected(Event):
    floorperson: str
    gaming_day: str


@handles(I.ReaderReport)
def _report(t: Table, inp: I.ReaderReport, step: Step) -> None:
    rnd = t.state.round.round
    number = t.state.round.number
    if t.state.reader.failed:
        raise t.refuse(t.sec("reader_failed"), "the reader is out of order until replaced")
    if rnd is not None and isinstance(rnd.request, InsuranceOffer):
        # 673a.8(b): insurance is placed before the hole card goes into the reader.
        raise_alarm(
            t,
            step,
            t.sec("8(b)"),
            "the reader was used before insurance closed",
            "notify the floor; insurance offers still open are declined",
            halts=False,
        )
    # Using the reader closes the window before it: the offers registered as made before it
    # (insurance, early surrender, ruling D5) still open are declined.
    while rnd is not None and isinstance(rnd.request, Offer) and offer_kind(rnd.request).before_reader:
        pending = rnd.request
        answer_offer(t, step, pending, offer_kind(pending).declined())
    req = rnd.request if rnd is not None else None
    if rnd is None or not isinstance(req, ReaderUse):
        _misuse(t, step)
        return
    answer: bool | str
    if req.masque:
        if inp.light is None:
            raise t.refuse("685a.7(h)", "the Masque reader reports a light")
        answer = inp.light.value
    else:
        if inp.blackjack is None:
            raise t.refuse(t.sec("peek"), "the reader reports whether the dealer has Blackjack")
        answer = inp.blackjack
        if answer != rnd.procedure.dealer_blackjack():
            _malfunctioned(t, step)
            return
    t.emit(step, ReaderUsed(number))
    t.emit(step, ReaderResult(number, answer))
    state = rnd.state
    if state.hole_exposed:
        t.emit(step, HoleCardExposed(number, str(state.dealer[1])))
    if not state.reader_agrees:
        # 685a.12(h): a wrong light is the one reader error with a remedy other than stopping:
        # each player continues with the decisions made, or the hand is called dead.
        raise_alarm(
            t,
            step,
            "685a.12(h)",
            "the reader's light does not match the hole card",
            "for each hand: continue with the decisions made, or call the hand dead",
            halts=False,
            action="hand_called_dead",
        )
    advance(t, step)


def _malfunctioned(t: Table, step: Step) -> None:
    """673a.13(j), 665a.13(i): a peek reader whose answer is wrong has malfunctioned; the dealer
    may not continue dealing until it is repaired or replaced. The answer is not used: the round
    waits at the reader, and the hole card is read again by the replacement. Nothing said
    publicly tells which way the reader was wrong."""
    t.emit(step, ReaderUsed(t.state.round.number))
    t.emit(step, ReaderFailed(code=0))
    raise_alarm(
        t,
        step,
        t.sec("reader_failed"),
        "the card reader malfunctioned",
        "stop dealing until the reader is repaired or replaced; then read the hole card again",
        halts=True,
        action="reader_replaced",
    )


def _misuse(t: Table, step: Step) -> None:
    """673a.13(i), 665a.13(h), 685a.12(h): the hole card went into the reader out of turn."""
    rnd = t.state.round.round
    up = rnd.state.dealer[0] if rnd is not None and rnd.state.dealer else None
    if "reader_reveals_hole_card" in t.spec.rulings and t.options.rulings.reader_reveals_hole_card and rnd:
        raise_alarm(
            t,
            step,
            "665a.13(h)(1)",
            "the hole card went into a reader that shows it, out of turn",
            "all hands are dead; wagers returned",
            halts=False,
        )
        void(t, step, "665a.13(h)(1)", "floor")
        return
    raise_alarm(
        t,
        step,
        t.sec("reader_misuse"),
        f"the hole card went into the reader out of turn (up card {up})",
        "notify the floorperson; play continues",
        halts=False,
    )


@handles(I.ReaderFailed)
def reader_failed(t: Table, inp: I.ReaderFailed, step: Step) -> None:
    if t.state.reader.failed:
        return
    t.emit(step, ReaderFailed(code=inp.code))
    raise_alarm(
        t,
        step,
        t.sec("reader_failed"),
        "the card reader malfunctioned",
        "stop dealing until the reader is repaired or replaced",
        halts=True,
        action="reader_replaced",
    )


@handles(I.ReaderReplaced)
def reader_replaced(t: Table, inp: I.ReaderReplaced, step: Step) -> None:
    if not t.state.reader.failed:
        raise t.refuse(t.sec("reader_failed"), "the reader has not failed")
    t.emit(step, ReaderReplaced(by=inp.by))
    for alarm in t.state.alarms.halted:
        if alarm.section == t.sec("reader_failed"):
            t.emit(step, AlarmAcknowledged(id=alarm.id, by=inp.by))
    advance(t, step)


@handles(I.ReaderInspected)
def _inspected(t: Table, inp: I.ReaderInspected, step: Step) -> None:
    if not t.blackjack:
        raise t.refuse("687a.9", "DJ Wild dealt from the hand has no card reader")
    if not inp.floorperson.strip():
        raise t.refuse(t.sec("2(d)"), "the floorperson assigned to the table inspects the reader")
    t.emit(step, ReaderInspected(floorperson=inp.floorperson, gaming_day=t.gaming_day()))


# -- transitions ------------------------------------------------------------------------------
@applies(ReaderUsed)
def _used(t: Table, e: ReaderUsed) -> None:
    pass  # the result follows (or the reader failed); the round moves on that


@applies(ReaderResult)
def _result(t: Table, e: ReaderResult) -> None:
    assert t.state.round.round is not None
    t.state.round.round.answer(MasqueRange(e.result) if isinstance(e.result, str) else bool(e.result))


@applies(HoleCardExposed)
def _exposed(t: Table, e: HoleCardExposed) -> None:
    pass  # the rules engine exposed it (685a.7(h)); the event makes it public


@applies(ReaderFailed)
def _failed(t: Table, e: ReaderFailed) -> None:
    t.state.reader.failed = True


@applies(ReaderReplaced)
def _replaced(t: Table, e: ReaderReplaced) -> None:
    t.state.reader.failed = False


@applies(ReaderInspected)
def _inspected_for(t: Table, e: ReaderInspected) -> None:
    t.state.reader.inspected_day = e.gaming_day
