"""The bet sensors at Start Game (687a.9(b)): locked by the keypad's driver at the press, before
the table decides, and unlocked again when the Start Game is refused.

Locking the sensors can only stop wagers, never take or pay one, so the keypad's driver locks them
the moment it reads a Start Game (a reflex, as a latching keypad does in its own hardware) rather
than after the journal's commit: the past-posting window is then the driver's, not the disk's.
The journal still says what happened, in order: ``sensors_locked`` rides in the transaction of the
decision it came before (``round_started``, or the refusal's ``sensors_unlocked``), so a kill
between the lock and the commit leaves no record of either, and the restart reads the press again
from the keypad (which holds it, and holds the sensors locked meanwhile: nothing is wagered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.table import inputs as I
from controller.table.events import DomainEvent, Event, event
from controller.table.machine import Step, applies, handles

if TYPE_CHECKING:
    from controller.table.core import Table


@event("sensors_locked")
@dataclass(slots=True)
class SensorsLocked(Event):
    """The keypad's driver locked the bet sensors at the Start Game press ``key_seq``, before the
    table decided on it."""

    device: str
    key_seq: int


@event("sensors_unlocked")
@dataclass(slots=True)
class SensorsUnlocked(Event):
    """The Start Game ``key_seq`` was refused (``section``, ``reason``): its lock is undone."""

    device: str
    key_seq: int
    section: str
    reason: str


def sensors_held(t: Table) -> bool:
    """Whether the journal has the sensors locked: a blackjack round in play, or a DJ Wild round
    after its Start Game (687a.9(b)); between rounds they are open for wagers."""
    if t.blackjack:
        return t.in_round
    wild = t.wild
    return wild is not None and wild.locked


def locked_at_start(device: str, key_seq: int, now: float) -> DomainEvent:
    """The record of a lock the driver made at a Start Game, to lead its decision's records."""
    e = SensorsLocked(device=device, key_seq=key_seq)
    return DomainEvent(e.kind, e.payload(), now)


@handles(I.StartRefused)
def _refused(t: Table, inp: I.StartRefused, step: Step) -> None:
    if sensors_held(t):
        return  # a round in play keeps them locked (a Start Game pressed in error)
    t.emit(step, SensorsUnlocked(inp.device, inp.key_seq, inp.section, inp.reason))


# -- transitions ------------------------------------------------------------------------------
# The table's state does not keep the sensors: whether they are locked follows from the round
# (sensors_held). The records are the audit of when wagers closed and opened again.
@applies(SensorsLocked)
def _locked(t: Table, e: SensorsLocked) -> None:
    pass


@applies(SensorsUnlocked)
def _unlocked(t: Table, e: SensorsUnlocked) -> None:
    pass
