"""The one task that turns device events into table inputs, in the order the drivers emitted them.

For each event: its health (held back while the device is still within its connect grace), then,
under the supervisor's lock, the core's inputs it translates to (each journalled before its
effects), what its health means for the table, and reconciliation. One bad event is logged and
skipped, never the end of the task.
"""

from __future__ import annotations

import asyncio

import structlog
from structlog.typing import FilteringBoundLogger

from controller.supervisor.device_policy import DevicePolicy
from controller.supervisor.health import DeviceHealth, health_after
from controller.supervisor.mapping import Translator, seen_of, stub_count_asked
from controller.supervisor.progress import Progress
from controller.supervisor.reconcile import Reconciler
from controller.supervisor.settle import Settled, SettleWindow, rack_in_doubt
from controller.supervisor.startup import ConnectGrace
from controller.supervisor.step import Stepper
from controller.table import inputs as I
from controller.table.recorder import Seen
from devices import events as dev
from devices.drivers.base import Driver, stop_if_cancelling
from devices.profiles import DeviceKind


class DeviceEvents:
    def __init__(
        self,
        *,
        events: asyncio.Queue[dev.DeviceEvent],
        lock: asyncio.Lock,
        drivers: dict[str, Driver],
        translator: Translator,
        stepper: Stepper,
        policy: DevicePolicy,
        reconciler: Reconciler,
        progress: Progress,
        log: FilteringBoundLogger,
    ) -> None:
        self.events, self.lock, self.drivers, self.translator = events, lock, drivers, translator
        self.stepper, self.policy, self.reconciler = stepper, policy, reconciler
        self.progress, self.log = progress, log
        self.grace: ConnectGrace | None = None  # set at start, from the devices' connect_grace_s
        self.settle: SettleWindow | None = None  # set at start on a table with a shuffler
        self._waiting_said: set[str] = set()
        self.unasked = UnaskedCounts()
        self.observations = 0  # device events handled by this process (the log's ``observation``)

    async def consume(self) -> None:
        while True:
            event = await self.events.get()
            self.progress.busy = True
            try:
                for ready in self._in_order(event):
                    await self._handle(ready)
            finally:
                held = self.settle is not None and self.settle.holding
                self.progress.busy = self.events.qsize() > 0 or held  # held: not handled yet
                await self.progress.notify()
            stop_if_cancelling()  # an event's device command can lose a cancel like a poll can

    def _in_order(self, event: dev.DeviceEvent) -> list[dev.DeviceEvent]:
        """The events to handle now: a draw or key read before the shuffler at a shoe change
        waits for the shuffler's next read (controller/supervisor/settle.py)."""
        if self.settle is None:
            return [event]
        stepper = self.stepper
        try:
            return self.settle.sort(event, lambda: stepper.jt is not None and rack_in_doubt(stepper.table))
        except Exception as e:  # a bug here must not stop the table: the event goes on unordered
            self.log.error("settle_failed", device=event.device, error=f"{type(e).__name__}: {e}")
            return [] if isinstance(event, Settled) else [event]

    async def _handle(self, event: dev.DeviceEvent) -> None:
        # Every line logged while the event is handled carries its number (``observation``, one
        # more per event this process handles): its outcome is found by it (docs/design.md).
        self.observations += 1
        with structlog.contextvars.bound_contextvars(observation=self.observations):
            try:
                await self.on_event(event)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # never crash on one bad event; say which kind it was
                self.log.error(
                    "event_failed", device=event.device, event_kind=type(event).__name__,
                    error=f"{type(e).__name__}: {e}",
                )  # fmt: skip

    async def on_event(self, event: dev.DeviceEvent) -> None:
        name = event.device
        policy = self.policy
        old = policy.health.get(name, DeviceHealth.CONNECTING)
        new = health_after(old, event)
        answered = name in policy.answered
        unheard = not answered and name not in self._waiting_said and not policy.ready.is_set()
        if unheard and isinstance(event, dev.DeviceOffline | dev.DeviceDegraded):
            # Not ready, and why: the device that has not answered, where it is, what failed.
            self._waiting_said.add(name)
            where = self.drivers[name].config.endpoint.describe() if name in self.drivers else None
            self.log.warning("waiting_for_device", device=name, where=where, error=event.reason)
        if self.grace is not None and self.grace.holds(event, answered=answered):
            # Not up yet: still connecting (controller/supervisor/startup.py); the last one held
            # is handed on when the grace runs out.
            self._observed(event, "held in the connect grace")
            return
        if new is not old:
            await policy.set_health(name, new)
        if isinstance(event, dev.FrameError):
            # One line per event, and a burst is one or two events (the driver coalesces): the
            # reason is the decoder's own text, never the bytes.
            self.log.warning("frame_errors", device=name, count=event.count, reason=event.reason)
            return  # nothing for the table, so not under the table's lock
        async with self.lock:
            seen = seen_of(event)
            if not stub_count_asked(self.stepper.table):
                if isinstance(event, dev.StubCounted):
                    await self.unasked.counted(event, seen, self.stepper)
                    return
            else:  # before this event's own counters, which come after the unasked ones
                await self.unasked.asked(self.stepper, self.log)
            inputs = self.translator.inputs(event, self.stepper.table)
            if not inputs:  # its outcome, since no step will say it (docs/design.md, "Nothing silent")
                self._observed(event, self.translator.why)
            # A Start Game the keypad's driver locked the sensors for: journalled with the first
            # input's decision, and undone if that is refused (controller/table/sensors.py).
            locked_at = event.sequence if isinstance(event, dev.ButtonPressed) and event.locked else None
            for i, inp in enumerate(inputs):
                last = i == len(inputs) - 1
                lock, upto = (locked_at if i == 0 else None), (seen if last else None)
                if await self.stepper.feed(inp, origin=name, seen=upto, locked_at=lock) is None:
                    break  # the rest of this event's inputs depend on the refused one
                if last:
                    seen = None  # journalled with the step
            if seen is not None:  # acted on though nothing came of it: not to be read again
                await self.stepper.mark(seen)
            if stub_count_asked(self.stepper.table):  # this event made the table ask for a count
                await self.unasked.asked(self.stepper, self.log)
            await policy.after_event(event, old, new)
            if isinstance(event, dev.DeviceOnline) and policy.kinds.get(name) is DeviceKind.SHUFFLER:
                self.reconciler.shuffler_back()
            await self.reconciler.reconcile()
            if isinstance(event, dev.BetSensed):
                policy.changed()  # chips on the layout are not journalled between rounds, but shown

    def _observed(self, event: dev.DeviceEvent, why: str) -> None:
        """One line for an observation that is no input of the table: which, and why. Never the
        event itself (a card, a reader result): its kind only."""
        self.log.info("observed", device=event.device, event_kind=type(event).__name__, why=why)


class UnaskedCounts:
    """Stub counts nobody asked for (a chatty or faulty counter, counts outside a dealt round):
    one alarm for the first of a run, then nothing per count (no journal record, no log line),
    only the last one's counter kept. When the table next asks for a count, that counter is
    journalled (one record) before anything else, so a restart does not take the last count the
    counter repeats for a new one, and one line says how many there were. A counter that sent
    10,000 of them made 4,464 journal records and as many log lines (issue 21)."""

    def __init__(self) -> None:
        self.alarmed = False
        self.since = 0  # counts after the one alarmed, not journalled
        self.last: Seen | None = None

    async def counted(self, event: dev.StubCounted, seen: Seen | None, stepper: Stepper) -> None:
        if self.alarmed:
            self.since += 1
            self.last = seen
            return
        self.alarmed = True  # the step's alarm line says it: no line of its own
        gap = I.DeviceGap(event.device, "stub counts", "the stub was counted with no round dealt", 0)
        if await stepper.feed(gap, origin=event.device, seen=seen) is None and seen is not None:
            await stepper.mark(seen)

    async def asked(self, stepper: Stepper, log: FilteringBoundLogger) -> None:
        """The table asks for a count again: the run of unasked ones is over."""
        if not self.alarmed:
            return
        last, since = self.last, self.since
        self.alarmed, self.since, self.last = False, 0, None
        if last is not None:
            await stepper.mark(last)
        if since:
            log.warning("stub_counts_unasked", device=last.device if last else None, more=since)
