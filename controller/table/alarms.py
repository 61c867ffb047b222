"""Alarms: what the floor is told, and whether dealing stops until it is acknowledged.

Every machine raises alarms through ``raise_alarm``; an alarm that ``halts`` stops new rounds
and new cards until the floor acknowledges it (or the device it names is back).

An alarm whose way out is another action than an acknowledgement names it in ``action`` (one of
``ACTIONS``: the name of the floor action in controller/actions.py), so a console
offers it without reading the words; absent (None), acknowledging it is the way out. Alarms
journalled before ``action`` existed have none and replay unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.table import inputs as I
from controller.table.events import OMIT, Event, event
from controller.table.machine import Step, applies, handles

if TYPE_CHECKING:
    from controller.table.core import Table


# The floor actions an alarm may name as its way out (controller/actions.py's names).
ACTIONS = frozenset({"reader_replaced", "void_round", "misdeal_determined", "hand_called_dead"})


@dataclass(slots=True)
class Alarm:
    id: int
    section: str
    message: str
    floor_action: str
    halts: bool
    acknowledged_by: str | None = None
    action: str | None = None


@dataclass(slots=True)
class AlarmsState:
    alarms: dict[int, Alarm] = field(default_factory=dict)
    next_id: int = 1

    @property
    def halted(self) -> list[Alarm]:
        return [a for a in self.alarms.values() if a.halts and a.acknowledged_by is None]


@event("alarm_raised")
@dataclass(slots=True)
class AlarmRaised(Event):
    id: int
    section: str
    message: str
    floor_action: str
    halts: bool
    action: str | None = field(default=None, metadata=OMIT)


@event("alarm_acknowledged")
@dataclass(slots=True)
class AlarmAcknowledged(Event):
    id: int
    by: str


def raise_alarm(
    t: Table,
    step: Step,
    section: str,
    message: str,
    floor_action: str,
    halts: bool,
    action: str | None = None,
) -> None:
    """``action``: the floor action that is the way out, when it is not an acknowledgement."""
    assert action is None or action in ACTIONS, action
    t.emit(step, AlarmRaised(t.state.alarms.next_id, section, message, floor_action, halts, action))


def count_of(n: int, plural: str) -> str:
    """``n`` things in the floor's words: "1 card", "0 cards", "1 reader result" (the noun is
    given in the plural, each ending in a plain s)."""
    return f"{n} {plural if n != 1 else plural.removesuffix('s')}"


def not_halted(t: Table, what: str) -> None:
    halted = t.state.alarms.halted
    if halted:
        a = halted[0]
        raise t.refuse(a.section, f"dealing is stopped ({a.message}); {what} must wait")


@handles(I.Stalled)
def _stalled(t: Table, inp: I.Stalled, step: Step) -> None:
    """A wait that cannot end: one alarm saying what the floor must do, not raised again while
    the same one stands unacknowledged (a restart finds it in the journal). It does not halt:
    what ends the wait (the cover card recorded, the shuffler restored) must still be taken."""
    standing = t.state.alarms.alarms.values()
    if any(a.acknowledged_by is None and a.message == inp.message for a in standing):
        return
    raise_alarm(t, step, inp.section, inp.message, inp.floor_action, halts=False)


@applies(AlarmRaised)
def _raised(t: Table, e: AlarmRaised) -> None:
    s = t.state.alarms
    s.alarms[e.id] = Alarm(e.id, e.section, e.message, e.floor_action, e.halts, action=e.action)
    s.next_id = e.id + 1


@applies(AlarmAcknowledged)
def _acknowledged(t: Table, e: AlarmAcknowledged) -> None:
    t.state.alarms.alarms[e.id].acknowledged_by = e.by
