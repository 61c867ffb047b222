"""The devices themselves: the counters the controller acted on, gaps in what a device reported,
devices the floor marks out of order, devices that failed and came back.

Counters are journalled by the shell (controller/table/recorder.py) as ``device_seen`` in the
same transaction as what they caused; the core only keeps them, so a restart knows where each
device's history was read up to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.table import inputs as I
from controller.table.alarms import AlarmAcknowledged, count_of, raise_alarm
from controller.table.asking import dealer_cards
from controller.table.batches import Place
from controller.table.events import Event, event
from controller.table.machine import Step, applies, handles, public
from controller.table.reader import reader_failed, reader_replaced
from controller.table.shuffler import shuffler_out_of_order, shuffler_restored

if TYPE_CHECKING:
    from controller.table.core import Table


@dataclass(slots=True)
class DevicesState:
    seen: dict[str, dict[str, int]] = field(default_factory=dict)  # device -> counter -> last value
    out_of_order: dict[str, str] = field(  # device kind -> who marked it
        default_factory=dict, metadata=public("out_of_order", sorted)
    )
    failed: dict[str, int] = field(default_factory=dict)  # device kind -> the alarm raised for it


@event("device_seen")
@dataclass(slots=True)
class DeviceSeen(Event):
    device: str
    counters: dict[str, int]


@event("cards_unaccounted")
@dataclass(slots=True)
class CardsUnaccounted(Event):
    back: str
    count: int
    device: str


@event("device_out_of_order")
@dataclass(slots=True)
class DeviceOutOfOrder(Event):
    device: str
    by: str


@event("device_restored")
@dataclass(slots=True)
class DeviceRestored(Event):
    device: str
    by: str


@event("device_failed")
@dataclass(slots=True)
class DeviceFailed(Event):
    device: str
    reason: str
    alarm: int


@event("device_back")
@dataclass(slots=True)
class DeviceBack(Event):
    device: str


def _gap_section(t: Table, what: str) -> str:
    if what == "stub counts":
        return "687a.9(f)"
    return {"cards": t.sec("3(b)"), "keys": t.sec("decisions")}.get(what, t.sec("peek"))


@handles(I.DeviceGap)
def _gap(t: Table, inp: I.DeviceGap, step: Step) -> None:
    """One alarm for what a device did that cannot be known; never a card invented."""
    unaccounted = max(0, inp.unaccounted)
    back = t.state.shoe.back
    batch = t.state.batches.batches[back] if back else None
    if inp.what == "cards" and inp.remaining is not None and batch is not None:
        # The shoe's own count says how many left it unseen (none when a counter only glitched).
        unaccounted = max(0, batch.places[Place.SHOE] - inp.remaining)
    if unaccounted and inp.what == "cards" and batch is not None:
        unaccounted = min(unaccounted, batch.places[Place.SHOE])
        t.emit(step, CardsUnaccounted(back=batch.back, count=unaccounted, device=inp.device))
    if inp.halts:
        _conflict(t, inp, step, unaccounted)
        return
    way_out = None  # an acknowledgement, but where the round is to be voided if they differ
    if inp.what == "cards":
        way_out = "void_round" if unaccounted else None
        action = (
            "count the shoe and the discard rack; compare the round in play with the layout and "
            "void it if they differ"
            if unaccounted
            else "no card is unaccounted for; check the shoe if it happens again"
        )
    elif inp.what == "keys":
        action = "the dealer presses again any decision the table view does not show"
    elif inp.what == "stub counts":
        action = (
            "nothing is read from counts nobody asked for (the rest are not journalled); "
            "check the stub counter: it counts only after the cards are dealt"
        )
    else:
        action = "insert the hole card again if the round still asks for the reader"
    raise_alarm(
        t,
        step,
        _gap_section(t, inp.what),
        f"{inp.device}: {inp.reason}"
        + ("" if inp.what == "stub counts" else f"; {count_of(unaccounted, inp.what)} unaccounted for"),
        action,
        halts=False,
        action=way_out,
    )


def _public_cards(t: Table) -> set[str]:
    """The cards face up on the layout now: only these may be named in an alarm (public)."""
    rnd = t.round
    if rnd is None:
        return set()
    shown = {str(c) for box in rnd.state.boxes for hand in box.hands for c in hand.cards}
    return shown | set(dealer_cards(rnd.state))


def _conflict(t: Table, inp: I.DeviceGap, step: Step, unaccounted: int) -> None:
    """The device says something else than what was journalled: one halting alarm for the floor,
    naming the draws to check (and the card, when it is face up on the layout; a burn or a hole
    card stays unnamed in a public alarm), never a silent choice of which side is right."""
    public = _public_cards(t)
    named = [f"draw {seq} ({c})" if c and c in public else f"draw {seq}" for seq, c in inp.check]
    what = f"; check {', '.join(named)}" if named else ""
    raise_alarm(
        t,
        step,
        _gap_section(t, inp.what),
        f"{inp.device}: {inp.reason}{what}; {count_of(unaccounted, inp.what)} unaccounted for",
        f"compare the {inp.what} named with the layout, the shoe and the discard rack and the journal's "
        "record of each; void the round in play if they differ",
        halts=True,
        action="void_round",
    )


@handles(I.DeviceCondition)
def _condition(t: Table, inp: I.DeviceCondition, step: Step) -> None:
    """A device's condition (a shoe door open, a tilt): one alarm with the floor's action, not
    raised again while the same one stands unacknowledged (a restart reads the bit again)."""
    message = f"{inp.device}: {inp.message}"
    if any(a.acknowledged_by is None and a.message == message for a in t.state.alarms.alarms.values()):
        return
    section = t.sec(inp.section) if inp.section else ""
    raise_alarm(t, step, section, message, inp.action, halts=inp.halts)


@handles(I.DeviceOutOfOrder)
def _out_of_order(t: Table, inp: I.DeviceOutOfOrder, step: Step) -> None:
    if inp.device == "shuffler":
        shuffler_out_of_order(t, I.ShufflerOutOfOrder(by=inp.by), step)
        return
    if inp.device in t.state.devices.out_of_order:
        raise t.refuse("device", f"the {inp.device} is already marked out of order")
    t.emit(step, DeviceOutOfOrder(device=inp.device, by=inp.by))
    if inp.device == "reader":
        reader_failed(t, I.ReaderFailed(code=0), step)


@handles(I.DeviceRestored)
def _restored(t: Table, inp: I.DeviceRestored, step: Step) -> None:
    if inp.device == "shuffler":
        shuffler_restored(t, I.ShufflerRestored(by=inp.by), step)
        return
    if inp.device not in t.state.devices.out_of_order:
        raise t.refuse("device", f"the {inp.device} is not marked out of order")
    t.emit(step, DeviceRestored(device=inp.device, by=inp.by))
    if inp.device == "reader" and t.state.reader.failed:
        reader_replaced(t, I.ReaderReplaced(by=inp.by), step)


@handles(I.DeviceFailed)
def _failed(t: Table, inp: I.DeviceFailed, step: Step) -> None:
    if inp.device in t.state.devices.failed:
        return
    t.emit(step, DeviceFailed(device=inp.device, reason=inp.reason, alarm=t.state.alarms.next_id))
    if inp.device == "keypad":
        # The main game goes on without the keypad, but a feature closes with it: the floor must
        # know (not only a device health) and the dealer keys the table's keys on the display.
        wild = not t.blackjack
        raise_alarm(
            t,
            step,
            "687a.9(b)" if wild else t.sec("decisions"),
            f"the keypad has failed ({inp.reason}): "
            + ("the Progressive is closed" if wild else "the bet sensors and decision keys are out"),
            ("no Progressive wagers till the keypad is repaired; " if wild else "")
            + "the dealer keys Start Game and the decisions on the dealer display; "
            + "repair or replace the keypad",
            halts=False,
        )
        return
    raise_alarm(
        t,
        step,
        t.sec("7(a)"),
        f"the dealing {inp.device} has failed ({inp.reason})",
        f"no round till the {inp.device} is back; repair or replace it",
        halts=True,
    )


@handles(I.DeviceBack)
def _back(t: Table, inp: I.DeviceBack, step: Step) -> None:
    alarm = t.state.devices.failed.get(inp.device)
    if alarm is None:
        return
    t.emit(step, DeviceBack(device=inp.device))
    if t.state.alarms.alarms[alarm].acknowledged_by is None:
        t.emit(step, AlarmAcknowledged(id=alarm, by=f"{inp.device} back"))


# -- transitions ------------------------------------------------------------------------------
@applies(DeviceSeen)
def _seen(t: Table, e: DeviceSeen) -> None:
    t.state.devices.seen.setdefault(e.device, {}).update(e.counters)


@applies(CardsUnaccounted)
def _unaccounted(t: Table, e: CardsUnaccounted) -> None:
    # Which cards is not known: they count as out of the shoe, in the discard rack.
    t.state.batches.batches[e.back].move(e.count, Place.SHOE, Place.DISCARD)


@applies(DeviceOutOfOrder)
def _marked(t: Table, e: DeviceOutOfOrder) -> None:
    t.state.devices.out_of_order[e.device] = e.by


@applies(DeviceRestored)
def _unmarked(t: Table, e: DeviceRestored) -> None:
    t.state.devices.out_of_order.pop(e.device, None)


@applies(DeviceFailed)
def _down(t: Table, e: DeviceFailed) -> None:
    t.state.devices.failed[e.device] = e.alarm


@applies(DeviceBack)
def _up(t: Table, e: DeviceBack) -> None:
    t.state.devices.failed.pop(e.device, None)
