"""The DJ Wild Progressive wager (687a.9(b)): sensed on each box while wagers are open, locked
and collected at Start Game; a wager that appears after it is refused as past-posting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.table import inputs as I
from controller.table.alarms import raise_alarm
from controller.table.events import Event, event
from controller.table.machine import Command, Step, applies, handles

if TYPE_CHECKING:
    from controller.table.core import Table


@event("bet_sensed")
@dataclass(slots=True)
class BetSensed(Event):
    round: int
    box: int
    present: bool


@event("progressive_locked")
@dataclass(slots=True)
class ProgressiveLocked(Event):
    round: int
    boxes: list[int]


@event("progressive_collected")
@dataclass(slots=True)
class ProgressiveCollected(Event):
    round: int
    boxes: list[int]


@handles(I.BetSensed)
def _sensed(t: Table, inp: I.BetSensed, step: Step) -> None:
    wild = t.state.wild.round
    if wild is None:
        return  # sensors between rounds are not wagers yet
    if wild.locked:
        if inp.present and inp.box not in wild.sensed:
            raise_alarm(
                t,
                step,
                "687a.9(b)",
                f"a Progressive wager appeared on box {inp.box} after Start Game",
                "refused as past-posting: remove the wager; review the surveillance",
                halts=False,
            )
        return
    if (inp.box in wild.sensed) != inp.present:
        t.emit(step, BetSensed(t.state.round.number, inp.box, inp.present))


@handles(I.StartGame)
def _start(t: Table, inp: I.StartGame, step: Step) -> None:
    wild = t.state.wild.round
    if wild is None:
        raise t.refuse("687a.9(b)", "no round is open")
    if wild.locked:
        raise t.refuse("687a.9(b)", "Start Game was already pressed")
    lit = sorted(wild.sensed)
    t.emit(step, ProgressiveLocked(t.state.round.number, lit))
    t.emit(step, ProgressiveCollected(t.state.round.number, lit))
    step.commands.append(Command("keypad", "lock_sensors"))
    for box in lit:
        step.commands.append(Command("keypad", "set_light", (box, True)))


# -- transitions ------------------------------------------------------------------------------
@applies(BetSensed)
def _bet(t: Table, e: BetSensed) -> None:
    wild = t.state.wild.round
    assert wild is not None
    if e.present:
        wild.sensed.add(e.box)
    else:
        wild.sensed.discard(e.box)


@applies(ProgressiveLocked)
def _locked(t: Table, e: ProgressiveLocked) -> None:
    assert t.state.wild.round is not None
    t.state.wild.round.locked = True


@applies(ProgressiveCollected)
def _collected(t: Table, e: ProgressiveCollected) -> None:
    pass  # a record for the progressive system; the wagers were locked by the event before
