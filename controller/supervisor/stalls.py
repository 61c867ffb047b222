"""No wait without an alarm: the table has asked for something that cannot come.

Two ways a wait cannot end: the devices show a state that cannot lead to what the table asks (a
batch in the shoe the table has not taken while it asks for the cut, the cover card or another
batch; a batch the table has out of the shuffler that a restarted shuffler reads in its slot), or
no device that could answer is there (the shoe for a card, the reader for the hole card, the
shuffler for the next batch: not configured, or not answering). The check runs every
``STALL_CHECK_S`` of the table's clock; a stall that has held ``STALL_AFTER_S`` becomes one
non-halting alarm saying what the floor must do (``I.Stalled``; not raised again while it
stands). A wait people end (a decision, the cut, Start Game) is asked for on the dealer display
and is no stall; a device that fails outright raises its own alarm at once (device_policy.py).
docs/design.md ("No wait without an alarm") states the bound.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum

from controller.clock import Clock
from controller.supervisor.health import DeviceHealth
from controller.supervisor.mapping import ShoeLoad
from controller.supervisor.step import Stepper
from controller.table import inputs as I
from controller.table.asking import asking
from controller.table.core import Table
from controller.table.wild import stub_count_due
from devices import events as dev
from devices.drivers.base import Driver
from devices.profiles import DeviceKind

STALL_CHECK_S = 1.0  # how often the table's waits are looked at
STALL_AFTER_S = 10.0  # how long a wait that cannot end holds before its alarm
NAMES = {
    DeviceKind.SHOE: "dealing shoe", DeviceKind.READER: "card reader",
    DeviceKind.SHUFFLER: "shuffler", DeviceKind.STUB_COUNTER: "stub counter",
}  # fmt: skip


class Presence(StrEnum):
    UP = "up"  # answering, or still within its connect grace
    GONE = "gone"  # configured, and not answering (never seen after its grace, or lost)
    MISSING = "missing"  # no device of the kind is configured
    MARKED = "marked"  # the floor marked it out of order (673a.13(l)): the floor knows


@dataclass(frozen=True, slots=True)
class Stall:
    section: str
    message: str
    floor_action: str


def presence(
    kinds: Mapping[str, DeviceKind], health: Mapping[str, DeviceHealth], drivers: Mapping[str, Driver]
) -> dict[DeviceKind, Presence]:
    """Each kind of device as the stall check sees it (the best of the devices of a kind)."""
    out = dict.fromkeys(DeviceKind, Presence.MISSING)
    rank = [Presence.MISSING, Presence.GONE, Presence.MARKED, Presence.UP]
    for name, kind in kinds.items():
        h = health.get(name, DeviceHealth.CONNECTING)
        driver = drivers.get(name)
        silent = driver is None or driver.health is dev.Health.OFFLINE
        if h is DeviceHealth.OUT_OF_ORDER:
            now = Presence.MARKED
        elif h is DeviceHealth.FAULT and silent:
            now = Presence.GONE  # a jammed shuffler or a failed reader answers: its own alarm says it
        else:
            now = Presence.UP
        out[kind] = max(out[kind], now, key=rank.index)
    return out


def _device(table: Table, what: str) -> DeviceKind | None:
    """The device that answers an ask, where only a device can."""
    if what in ("card", "burn"):
        return DeviceKind.SHOE
    if what == "reader":
        return DeviceKind.READER
    if what == "batch":
        return DeviceKind.SHUFFLER
    if what == "stub" and stub_count_due(table):  # 687a.9(f): Next is refused till it is counted
        return DeviceKind.STUB_COUNTER
    return None


def stalled(
    table: Table,
    load: ShoeLoad | None,
    devices: Mapping[DeviceKind, Presence],
    not_out: Collection[str] = (),
    held: Collection[str] = (),
) -> Stall | None:
    """Why the table's wait cannot end, or None while it can (or the floor is already asked).
    ``not_out``: the batches the shuffler still shows ready after refusing to eject them;
    ``held``: the batches a shuffler slot reads unshuffled (idle, shuffling, jammed)."""
    ask = asking(table)
    what = str(ask["what"])
    if what == "floor":
        return None  # dealing is stopped on an alarm: the floor is asked already
    if load is not None:
        return _loaded(table, load, ask)
    out = table.shoe_back or (table.cut.back if table.cut is not None and table.cuts_at_shuffler else None)
    if out is not None and out in not_out:
        where = "out for the cut" if table.cut is not None else "in the shoe"
        if not table.blackjack:
            where = "in the dealer's hand"
        return Stall(
            table.sec("3(b)(3)") if table.blackjack else "687a.9(a)(2)",
            f"the {out} batch is still in the shuffler, which does not put it out, though the "
            f"table has it {where}",
            "check the shuffler's eject and tray; take the batch out by hand, or mark the "
            "shuffler out of order",
        )
    if out is not None and out in held and not table.manual:  # by hand: the slots are not read
        return _held(table, out)
    kind = _device(table, what)
    if kind is None or (kind is DeviceKind.SHUFFLER and table.manual):
        return None  # people answer it (the display asks them); by hand when shuffled by hand
    state = devices.get(kind, Presence.MISSING)
    if state in (Presence.UP, Presence.MARKED):
        return None
    name = NAMES[kind]
    why = "no " + name + " is configured" if state is Presence.MISSING else f"the {name} does not answer"
    if kind is DeviceKind.SHOE:
        return Stall(
            table.sec("7(a)"),
            f"the table waits for a card from the dealing shoe and {why}",
            "bring the dealing shoe back (its cable, power, address) or void the round in play",
        )
    if kind is DeviceKind.READER:
        return Stall(
            table.sec("2(d)"),
            f"the round waits for the hole card in the card reader and {why}",
            "bring the card reader back or replace it; void the round if it cannot be finished",
        )
    if kind is DeviceKind.STUB_COUNTER:
        return Stall(
            "687a.9(f)",
            f"the stub is due to be counted (at least once every 5 rounds) and {why}",
            "bring the stub counter back; the round is not ended till the stub is counted",
        )
    if not table.blackjack:
        return Stall(
            table.sec("shuffler_out_of_order"),
            f"the table waits for the next shuffled deck and {why}; DJ Wild is dealt only from "
            "an automated shuffler",
            "bring the shuffler back (its cable, power, address); the game waits until it is",
        )
    return Stall(
        table.sec("shuffler_out_of_order"),
        f"the table waits for the next shuffled batch and {why}",
        "bring the shuffler back, or mark it out of order to shuffle by hand",
    )


def _held(table: Table, back: str) -> Stall:
    """The table has the batch out of the shuffler, the shuffler reads it in its slot unshuffled:
    the devices were restarted or swapped (the cards the table deals from went back, or are gone).
    Nothing dealt from it can be trusted; the floor ends it with the table's own rulings."""
    if not table.blackjack:
        return Stall(
            "687a.9(a)(2)",
            f"the table has the {back} deck in the dealer's hand, but the shuffler reads it in its "
            "slot unshuffled (the shuffler restarted or swapped?)",
            "order the deck reshuffled (reshuffle_ordered) between rounds, or void the round under "
            "way (void_round); the next deck then comes from the shuffler",
        )
    where = "out for the cut" if table.cut is not None and table.shoe_back is None else "in the shoe"
    return Stall(
        table.sec("5(f)"),
        f"the table has the {back} batch {where}, but the shuffler reads it in its slot "
        "unshuffled (the shuffler restarted or swapped?)",
        "order the batch reshuffled (reshuffle_ordered); void the round under way if it cannot "
        "be finished (void_round)",
    )


def _loaded(table: Table, load: ShoeLoad, ask: dict[str, object]) -> Stall:
    """A batch in the shoe the table has not taken: nothing drawn from it can be dealt."""
    what = ask["what"]
    batch = f"the {load.back} batch" if load.back else "a batch"
    cut = table.cut
    if what in ("cut", "cover_card") and cut is not None and load.back in (None, cut.back):
        return Stall(
            table.sec("5(d)"),
            f"{batch} is in the shoe and its cut and cover card are not recorded",
            "record the cut and the cover card as they were made (the table then takes the batch "
            "as loaded), or take the stack out and cut it again",
        )
    held = table.shoe_back
    has = f"the table has the {held} batch in the shoe" if held else "the table has no batch in the shoe"
    return Stall(
        table.sec("5(d)") if table.cuts_at_shuffler or table.manual else table.sec("3(b)(3)"),
        f"the shoe shows {batch} loaded ({load.cards} cards) that the table did not take; {has} "
        f"and asks for {what}",
        "take the cards out of the shoe and follow what the dealer display asks",
    )


class StallWatch:
    """The check, run under the table's lock: a stall that holds ``STALL_AFTER_S`` is fed to the
    core once (again only after it has cleared)."""

    def __init__(
        self, clock: Clock, stepper: Stepper, load: Callable[[], ShoeLoad | None],
        devices: Callable[[], Mapping[DeviceKind, Presence]], not_out: Callable[[], Collection[str]],
        held: Callable[[], Collection[str]] = lambda: (),
    ) -> None:  # fmt: skip
        self.clock, self.stepper, self.load, self.devices = clock, stepper, load, devices
        self.not_out, self.held = not_out, held
        self.current: Stall | None = None
        self.since = 0.0
        self.told = False

    async def check(self) -> None:
        stall = stalled(self.stepper.table, self.load(), self.devices(), self.not_out(), self.held())
        now = self.clock.now()
        if stall != self.current:
            self.current, self.since, self.told = stall, now, False
            return
        if stall is None or self.told or now - self.since < STALL_AFTER_S:
            return
        self.told = True
        await self.stepper.feed(I.Stalled(stall.section, stall.message, stall.floor_action), origin=None)
