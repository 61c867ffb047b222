"""Reconciliation: what the devices imply but do not send as events, turned into inputs and
commands after every event and command (and so at start, when each driver's first poll is diffed
against what the journal says the controller last acted on).

A batch sitting in a shuffler slot is in the shuffler; an unshuffled one is started (one the
journal has shuffled but the slot reads idle, its shuffle lost with a restarted shuffler, is a
failed shuffle, started again); a shuffled batch goes into an empty shoe (the core ejects it),
or, where the stack is cut (673a.5(b)-(e)), is taken out for the cut; an eject the journal has
but the shuffler has not carried out (the controller died between the two) is sent again, and so
is one the shuffler refused, after a short backoff of its own (``eject_settled``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from controller.backoff import Backoff, BackoffPolicy
from controller.clock import REAL_CLOCK, Clock
from controller.supervisor.mapping import Translator
from controller.supervisor.outbox import Outbox
from controller.supervisor.step import Stepper
from controller.table import inputs as I
from controller.table.batches import Place, ShufflerState
from devices import commands as dc
from devices import events as dev
from devices.profiles import DeviceKind

DEFAULT_MAX_CYCLE_S = 120.0  # the shuffler driver's default for its max_cycle_s option
# An eject the shuffler refused (busy, or a reply lost on a loaded line) is sent again after the
# one backoff, 0.5 s doubling to 5 s: the dealer is not kept waiting for the next reconciliation
# (with nothing else happening, the shuffle-overdue check every max_cycle_s / 4, 30 s at the
# shipped tables), and a shuffler that keeps refusing is not hammered. No jitter: it is the
# table's own shuffler, there is no herd to spread.
EJECT_RETRY = BackoffPolicy(initial_s=0.5, max_s=5.0, jitter=0.0)

Spawn = Callable[[Coroutine[Any, Any, None], str], None]


class Reconciler:
    def __init__(
        self,
        translator: Translator,
        stepper: Stepper,
        outbox: Outbox,
        *,
        clock: Clock = REAL_CLOCK,
        max_cycle_s: float = DEFAULT_MAX_CYCLE_S,
    ) -> None:
        self.translator, self.stepper, self.outbox = translator, stepper, outbox
        self.clock, self.max_cycle_s = clock, max_cycle_s
        self.start_sent: set[dev.Slot] = set()  # shuffles started, not to be started twice
        self.auto_refused: dict[I.Input, int] = {}  # inferred inputs refused, at which step
        # Batches the journal has shuffling while the shuffler shows no cycle for them, since when.
        self.unseen_cycle: dict[str, float] = {}
        self.eject_backoff: dict[dev.Slot, Backoff] = {}  # refusals in a row, and when to retry
        self._retrying: set[dev.Slot] = set()  # a retry is waiting out its backoff
        # Ejects the shuffler has refused (or never got) since when, till one is carried out: a
        # batch the table has out of the shuffler that does not come (controller/supervisor/stalls.py).
        self.eject_refused_since: dict[dev.Slot, float] = {}
        self._lock: asyncio.Lock | None = None
        self._spawn: Spawn | None = None

    def shuffler_back(self) -> None:
        """The shuffler answers again after it was lost: a start sent before (to a shuffler that
        went down, or was restarted, before it began) may never have arrived; each batch the
        journal has to shuffle and its slot reads idle is started again."""
        self.start_sent.clear()

    def retry_ejects(self, lock: asyncio.Lock, spawn: Spawn) -> None:
        """Send a refused eject again after a backoff, reconciling under ``lock`` (the table's: one
        step at a time) in a task ``spawn`` starts (and the supervisor's stop cancels)."""
        self._lock, self._spawn = lock, spawn
        self.stepper.eject_settled = self.eject_settled

    def eject_settled(self, slot: dev.Slot, carried_out: bool) -> None:
        """An eject was carried out (the backoff starts again from the beginning) or refused: then
        reconcile, which sends it again while the shuffler still shows the batch ready, once the
        backoff is over."""
        backoff = self.eject_backoff.setdefault(slot, Backoff(EJECT_RETRY, clock=self.clock))
        if carried_out:
            backoff.succeeded()
            self.eject_refused_since.pop(slot, None)
            return
        self.eject_refused_since.setdefault(slot, self.clock.now())
        backoff.failed()  # due from now, not from when the task first runs (a later turn of the loop)
        if self._spawn is None or slot in self._retrying:
            return
        self._retrying.add(slot)
        self._spawn(self._retry(slot, backoff), f"eject-retry-{slot.value}")

    async def _retry(self, slot: dev.Slot, backoff: Backoff) -> None:
        try:
            await self.clock.sleep(backoff.wait_left())
        finally:
            self._retrying.discard(slot)
        assert self._lock is not None
        async with self._lock:
            await self.reconcile()

    async def overdue(self) -> None:
        """A batch the journal has shuffling, with no cycle under way in the shuffler for longer
        than a cycle may take (673a.13(k): "fails to complete a shuffle cycle"): the shuffle is
        failed, with its alarm, and the batch is shuffled again, rather than waited on for ever.
        (A cycle the shuffler shows under way is timed by its driver.)"""
        t = self.stepper.table
        now = self.clock.now()
        for batch in list(t.batches.values()):
            back = batch.back
            if batch.location is not Place.SHUFFLER or batch.shuffler is not ShufflerState.SHUFFLING:
                self.unseen_cycle.pop(back, None)
                continue
            slots = self.translator.slots.items()
            view = next((v for s, v in slots if self.translator.back_of(s) == back), None)
            if view is not None and view.state is dev.ShufflerState.SHUFFLING:
                self.unseen_cycle.pop(back, None)
                continue
            since = self.unseen_cycle.setdefault(back, now)
            if now - since > self.max_cycle_s:
                del self.unseen_cycle[back]
                why = f"no cycle under way for the batch after {self.max_cycle_s:g}s"
                await self._feed_auto(I.ShuffleFailed(back=back, reason=why))

    async def reconcile(self) -> None:
        """Observations the devices imply but do not send as events: a batch sitting in a shuffler
        slot is in the shuffler; a shuffled batch goes into an empty shoe (the core ejects it)."""
        await self._shoe_load()
        t = self.stepper.table
        if t.manual:
            return
        await self.overdue()
        eject_sent = self.stepper.eject_sent
        slots = self.translator.slots
        for slot, view in slots.items():
            if view.state is not dev.ShufflerState.IDLE:
                self.start_sent.discard(slot)
                continue
            batch = t.batches.get(view.back or "")
            if batch is None or batch.opened_at is None:
                continue  # 673a.4: not until the floor has verified the inspection
            if batch.location is Place.SHUFFLER and batch.shuffler is ShufflerState.READY:
                # The journal has the batch shuffled and ready, the slot reads it idle: the shuffle
                # is lost (the shuffler was restarted or swapped). A failed shuffle (673a.13(k),
                # 687a.9(a)(1)), with its alarm; the batch is shuffled again (below).
                why = "the slot reads the shuffled batch idle: the shuffle is lost (shuffler restarted?)"
                await self._feed_auto(I.ShuffleFailed(back=batch.back, reason=why))
            stored = [b for b in t.batches.values() if b.location is Place.SHUFFLER and b is not batch]
            if batch.location in (Place.NEW, Place.DISCARD) and not stored:
                await self._feed_auto(I.BatchToShuffler(back=batch.back))
            if (
                batch.location is Place.SHUFFLER
                and batch.shuffler in (ShufflerState.UNSHUFFLED, ShufflerState.JAMMED)
                and slot not in self.start_sent
            ):
                self.start_sent.add(slot)
                self.outbox.send(DeviceKind.SHUFFLER, dc.StartShuffle(slot))
        cutting = t.cut.back if t.cut is not None and t.cuts_at_shuffler else None
        ejected = t.shoe_back if t.shoe_back is not None and not t.cuts_at_shuffler else cutting
        if ejected is not None and t.batches[ejected].location in (Place.SHOE, Place.SHUFFLER):
            # The journal has the batch in the shoe (or its stack out for the cut) but the
            # shuffler still holds it ready: the controller died between journalling that and the
            # eject. Carry it out now.
            for in_slot, shown in slots.items():
                if shown.back != ejected:
                    continue
                if shown.state is not dev.ShufflerState.READY:
                    eject_sent.discard(in_slot)
                elif in_slot not in eject_sent:
                    self.stepper.eject_pending(
                        in_slot, self.outbox.send(DeviceKind.SHUFFLER, dc.EjectToShoe(in_slot))
                    )
        if t.two_batches and t.shoe_back is None and not t.in_round and t.cut is None:
            for batch in t.batches.values():
                held = batch.back in self._backs()
                ready = slots.get(self.translator.slot_of(batch.back)) if held else None
                if (
                    batch.location is Place.SHUFFLER and batch.shuffler is ShufflerState.READY
                    and ready is not None and ready.state is dev.ShufflerState.READY
                ):  # fmt: skip
                    out = I.StackFromShuffler if t.cuts_at_shuffler else I.BatchToShoe
                    await self._feed_auto(out(back=batch.back))
                    break

    async def _shoe_load(self) -> None:
        """A batch the shoe showed loaded that the table did not take then (Translator._loaded):
        taken once the table can take it (the stack's cut and cover card recorded, 673a.5(d); the
        batch shuffled and ready, 673a.3(b)(3)), let go once the table has it in the shoe."""
        load = self.translator.shoe_load
        if load is None:
            return
        t = self.stepper.table
        if t.shoe_back is not None:
            if load.back in (None, t.shoe_back):
                self.translator.shoe_load = None
            return  # another batch than the table's: an alarm (controller/supervisor/stalls.py)
        cut = t.cut
        back = load.back if load.back is not None else (cut.back if cut is not None else None)
        if back is None or t.in_round:
            return
        if cut is not None and (cut.back != back or cut.cover_from_bottom is None):
            return  # the cut or the cover card not recorded yet: the table asks for it
        await self._feed_auto(I.BatchToShoe(back=back, in_shoe=True))
        if self.stepper.table.shoe_back == back:
            self.translator.shoe_load = None

    def _backs(self) -> set[str]:
        return {self.translator.back_of(s) for s in dev.Slot}

    async def _feed_auto(self, inp: I.Input) -> None:
        """An input the supervisor infers: tried again only once the journal has moved on."""
        if self.auto_refused.get(inp) == self.stepper.steps:
            return
        if await self.stepper.feed(inp, origin=None) is None:
            self.auto_refused[inp] = self.stepper.steps
        else:
            self.auto_refused.pop(inp, None)
