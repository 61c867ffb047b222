"""Automated shuffler with two batch slots (673a.5, 665a.5, 685a.5; jams 673a.13(k),(l))."""

from __future__ import annotations

from devices.commands import (
    AbortShuffle,
    ClearFault,
    Command,
    EjectToShoe,
    MarkOutOfOrder,
    StartShuffle,
)
from devices.drivers.registers import RegisterDriver, Snapshot
from devices.events import (
    BatchSlotChanged,
    CountersRead,
    DeviceEvent,
    EjectedToShoe,
    ShuffleDone,
    ShuffleIncomplete,
    ShufflerCleared,
    ShufflerFault,
    ShufflerJammed,
    ShufflerOutOfOrder,
    ShufflerState,
    ShuffleStarted,
    Slot,
)
from devices.profiles import DeviceKind

_SLOT_CODE = {Slot.A: 1, Slot.B: 2}
_TROUBLE = (ShufflerState.JAMMED, ShufflerState.FAULT, ShufflerState.OUT_OF_ORDER)


class ShufflerDriver(RegisterDriver):
    kind = DeviceKind.SHUFFLER
    commands = (StartShuffle, AbortShuffle, EjectToShoe, ClearFault, MarkOutOfOrder)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.max_cycle_s = float(self.config.options.get("max_cycle_s", 120.0))
        # A shuffler that does not count its cards (687a.9(f)): its cards_counted register, if
        # the map has one, says nothing, and the table has the stub counted every 5 rounds.
        self.counts_cards = bool(self.config.options.get("counts_cards", True))
        self._shuffle_began: dict[Slot, float] = {}
        self._overran: set[Slot] = set()

    def _state(self, snap: Snapshot, reg: str) -> ShufflerState:
        return ShufflerState(self.profile.enum_name("shuffler_state", snap[reg][0]))

    def _back(self, snap: Snapshot, reg: str) -> str | None:
        code = snap[reg][0]
        return None if code == 0 else self.profile.enum_name("back", code)

    def _counted(self, snap: Snapshot) -> int | None:
        return snap["cards_counted"][0] if self.counts_cards else None

    def counters(self, snap: Snapshot) -> dict[str, int]:
        return {"cycle": snap["cycle"][0]}

    def settled(self) -> bool:
        # A cycle under way is timed against max_cycle_s at every poll, changed or not.
        return not (self._shuffle_began.keys() - self._overran)

    def diff(self, prev: Snapshot | None, cur: Snapshot) -> list[DeviceEvent]:
        out: list[DeviceEvent] = []
        now = self.clock.now()
        for slot in Slot:
            p = f"slot_{slot.value.lower()}_"
            state = self._state(cur, p + "state")
            view = (state, self._back(cur, p + "back"), cur[p + "decks"][0])
            old_state = self._state(prev, p + "state") if prev else None
            old_view = (old_state, self._back(prev, p + "back"), prev[p + "decks"][0]) if prev else None
            if view != old_view:
                out.append(BatchSlotChanged(self.name, slot, *view))
            if state is not old_state:
                out += self._slot_transition(slot, old_state, state, prev, cur, now)
            if (
                state is ShufflerState.SHUFFLING
                and slot not in self._overran
                and now - self._shuffle_began.get(slot, now) > self.max_cycle_s
            ):
                # 673a.13(k): "fails to complete a shuffle cycle": the cards must be reshuffled.
                self._overran.add(slot)
                out.append(ShuffleIncomplete(self.name, slot, f"cycle ran over {self.max_cycle_s:g}s"))
        if prev is None and "cycle" in self.baseline and cur["cycle"][0] != self.baseline["cycle"]:
            # A cycle finished while the controller was down: the batch it left ready is news
            # (routed as if seen live; a batch the journal has ready already is left as it is).
            cycle = cur["cycle"][0]
            ready = ShufflerState.READY
            done = [s for s in Slot if self._state(cur, f"slot_{s.value.lower()}_state") is ready]
            out += [ShuffleDone(self.name, slot, self._counted(cur), cycle) for slot in done]
            if not done:  # reset meanwhile, nothing ready: the new count is the baseline, once
                out.append(CountersRead(self.name, (("cycle", cycle),)))
        dev, old_dev = self._state(cur, "state"), self._state(prev, "state") if prev else None
        if dev is not old_dev:
            if dev is ShufflerState.FAULT:
                out.append(ShufflerFault(self.name, cur["fault_code"][0]))
            elif dev is ShufflerState.OUT_OF_ORDER:
                out.append(ShufflerOutOfOrder(self.name))
            elif old_dev in _TROUBLE and dev not in _TROUBLE:
                out.append(ShufflerCleared(self.name))
        return out

    def _slot_transition(
        self,
        slot: Slot,
        old: ShufflerState | None,
        new: ShufflerState,
        prev: Snapshot | None,
        cur: Snapshot,
        now: float,
    ) -> list[DeviceEvent]:
        out: list[DeviceEvent] = []
        if new is ShufflerState.SHUFFLING:
            self._shuffle_began[slot] = now
            self._overran.discard(slot)
            out.append(ShuffleStarted(self.name, slot))
        elif old is ShufflerState.SHUFFLING:
            self._shuffle_began.pop(slot, None)
            if new is ShufflerState.READY:
                out.append(ShuffleDone(self.name, slot, self._counted(cur), cur["cycle"][0]))
            elif new is ShufflerState.JAMMED:
                out.append(ShufflerJammed(self.name, slot, cur["fault_code"][0]))
            elif new is ShufflerState.EMPTY and prev is not None and cur["cycle"][0] != prev["cycle"][0]:
                # Done and ejected between two polls (a direct-insert shuffler loading the shoe
                # as soon as its cycle ends): the cycle counter moved, so the shuffle completed.
                out.append(ShuffleDone(self.name, slot, self._counted(cur), cur["cycle"][0]))
                out.append(EjectedToShoe(self.name, slot))
            else:
                out.append(ShuffleIncomplete(self.name, slot, f"cycle stopped ({new.value})"))
        elif new is ShufflerState.JAMMED:
            out.append(ShufflerJammed(self.name, slot, cur["fault_code"][0]))
        elif new is ShufflerState.READY and prev is not None and cur["cycle"][0] != prev["cycle"][0]:
            # Started and done between two polls (the cycle counter moved): as if seen live.
            self._shuffle_began.pop(slot, None)
            out.append(ShuffleDone(self.name, slot, self._counted(cur), cur["cycle"][0]))
        if new is ShufflerState.EMPTY and old is ShufflerState.READY and prev is not None:
            out.append(EjectedToShoe(self.name, slot))
        return out

    async def _send(self, command: Command) -> None:
        match command:
            case StartShuffle(slot=slot):
                await self._command("start_shuffle", _SLOT_CODE[slot])
                # A restart between two polls would hide the new cycle: time it from here.
                self._shuffle_began[slot] = self.clock.now()
                self._overran.discard(slot)
            case AbortShuffle(slot=slot):
                await self._command("abort_shuffle", _SLOT_CODE[slot])
            case EjectToShoe(slot=slot):
                await self._command("eject_to_shoe", _SLOT_CODE[slot])
            case ClearFault():
                await self._command("clear_fault")
            case MarkOutOfOrder():
                await self._command("mark_out_of_order")
