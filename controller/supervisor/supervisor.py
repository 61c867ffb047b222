"""The supervisor: one asyncio task per device driver (each with its own restart loop), one task
that turns device events into table-core inputs, the journal before every effect, telemetry told.

Why not a TaskGroup: a TaskGroup cancels every sibling when one task fails; a table must keep
dealing with the keypad when the reader's driver dies, so each device restarts on its own, with
exponential backoff and jitter, and its health says what the floor needs to know.

Order of work for every input (device event or authorised command), under one lock so steps never
interleave: core decides -> journal commits (fsync) -> device commands queued -> telemetry told ->
the supervisor's own follow-ups (reader up card, sensors locked/unlocked, the next batch in).

No device I/O happens under the lock: each device has an outbox and a sender task of its own that
writes its commands in order. A command is queued only after its step is on disk, so the journal
still comes before every effect, but a device stuck in its timeout (up to 30 s) holds up its own
commands only, never another device's events or the keypad's lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from controller.backoff import Backoff
from controller.clock import REAL_CLOCK, Clock
from controller.errors import RuleViolation, TablectlError
from controller.journal import JournalError
from controller.rules.requests import DEALER
from controller.supervisor import actions
from controller.supervisor.config import TableConfig
from controller.supervisor.health import DeviceHealth, health_after
from controller.supervisor.mapping import Translator, Untranslatable, seen_of
from controller.supervisor.startup import ConnectGrace
from controller.supervisor.telemetry import NullTelemetry, Telemetry
from controller.table import inputs as I
from controller.table.batches import Place, ShufflerState
from controller.table.core import Command as CoreCommand
from controller.table.core import Step, Table
from controller.table.recorder import JournaledTable, Seen
from devices import commands as dc
from devices import events as dev
from devices.config import DeviceConfig
from devices.drivers.base import EVENT_QUEUE_MAX, Driver, PollHooks, Wake, stop_if_cancelling
from devices.drivers.factory import build_drivers
from devices.drivers.stub import StubCounterDriver
from devices.errors import CommandRejected
from devices.profiles import DeviceKind
from devices.transport.modbus import BusRegistry

SAFE_STOP_S = 2.0  # how long shutdown waits for the keypad to lock its sensors
RESTART_OK_AFTER_S = 30.0
TICK_S = 60.0  # a driver that ran this long starts its backoff from the beginning again


class Supervisor:
    def __init__(
        self,
        config: TableConfig,
        journal_path: str | Path,
        *,
        clock: Clock = REAL_CLOCK,
        wall: Callable[[], float] = time.time,
        telemetry: Telemetry | None = None,
        devices: list[DeviceConfig] | None = None,
        rng: random.Random | None = None,
        poll_on_demand: bool = False,
    ) -> None:
        self.config = config
        self.table_id = config.table_id
        self.journal_path = Path(journal_path)
        self.clock = clock
        self.wall = wall  # the table's time (journalled); the clock paces polls and backoff
        self.telemetry: Telemetry = telemetry or NullTelemetry()
        self.device_configs = devices if devices is not None else config.devices
        self.rng = rng or random.Random()
        # With a virtual clock the dealer says when to poll (settle); time passing wakes nothing.
        self.poll_on_demand = poll_on_demand
        self.log = structlog.get_logger("tablectl.supervisor").bind(table=self.table_id, device=None)
        backs = next(
            (tuple(d.options.get("backs", ("red", "blue"))) for d in self.device_configs
             if d.kind is DeviceKind.SHUFFLER),
            ("red", "blue"),
        )  # fmt: skip
        self.translator = Translator((str(backs[0]), str(backs[1])))
        self.events: asyncio.Queue[dev.DeviceEvent] = asyncio.Queue(EVENT_QUEUE_MAX)  # see Driver.emit
        self.health: dict[str, DeviceHealth] = {}
        self.kinds: dict[str, DeviceKind] = {d.name: d.kind for d in self.device_configs}
        self.drivers: dict[str, Driver] = {}
        self.jt: JournaledTable | None = None
        self.ready = asyncio.Event()  # journal replayed and every device answered once
        self._buses: BusRegistry | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._lock = asyncio.Lock()
        self._progress = asyncio.Condition()
        self._busy = False
        self._polls_started: dict[str, int] = {}
        self._polls_done: dict[str, int] = {}
        self._poke: dict[str, Wake] = {}  # each driver's: a poll out of turn (settle)
        self._start_sent: set[dev.Slot] = set()
        self._eject_sent: set[dev.Slot] = set()
        self._crashed: set[str] = set()
        self._answered: set[str] = set()  # devices heard from since start (ready needs them all)
        self._grace: ConnectGrace | None = None
        self._waiting_said: set[str] = set()
        self._auto_refused: dict[I.Input, int] = {}
        self._steps = 0
        self._stopped = False
        self._listeners: list[Callable[[], None]] = []
        self._outbox: dict[str, asyncio.Queue[tuple[dc.Command, asyncio.Future[bool]]]] = {}
        self._unsent = 0  # commands queued or being written; idle() waits for them
        self._queued: list[asyncio.Future[bool]] | None = None  # what command() waits for
        # The journal's commits (and their fsync) run here, one at a time, off the event loop: a
        # slow flush holds up the step that waits for it (commit before effect), not the polls.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")

    # ================================================================== lifecycle
    @property
    def table(self) -> Table:
        assert self.jt is not None, "the supervisor is not started"
        return self.jt.table

    async def start(self) -> None:
        from controller.logs import bind_table

        bind_table(self.table_id)
        self.journal_path.parent.mkdir(parents=True, exist_ok=True)
        self.jt = JournaledTable.open(self.journal_path, self.config.options, self.table_id)
        t = self.jt.table
        self.log.info(
            "journal_open", path=str(self.journal_path), seq=self.jt.journal.last_seq, round=t.round_no,
            in_round=t.in_round, halted=len(t.halted),
        )  # fmt: skip
        await self.telemetry.start()
        drivers, self._buses = build_drivers(self.device_configs, clock=self.clock, events=self.events)
        for d in drivers:
            self.drivers[d.name] = d
            # Reconciliation: each driver's first poll is diffed against what the journal says the
            # controller last acted on, so what the device did meanwhile is handled as if live.
            d.baseline = dict(t.device_seen.get(d.name, {}))
            self.health[d.name] = DeviceHealth.CONNECTING
            if self.kinds[d.name].value in t.out_of_order:  # marked by the floor before a restart
                self.health[d.name] = DeviceHealth.OUT_OF_ORDER
                if self.kinds[d.name] is DeviceKind.KEYPAD:
                    self.translator.progressive_closed = True
            self._polls_started[d.name] = self._polls_done[d.name] = 0
            self._poke[d.name] = d.wake
            self._outbox[d.name] = asyncio.Queue()
            self.telemetry.device_health(d.name, self.health[d.name].value)
        self._tasks.append(asyncio.create_task(self._consume(), name="supervisor-events"))
        self._tasks.append(asyncio.create_task(self._tick(), name="supervisor-tick"))
        grace = self._grace = ConnectGrace(self.clock, [d.config for d in drivers])
        self._tasks.append(
            asyncio.create_task(grace.run(self.events, self._answered.__contains__), name="connect-grace")
        )
        for d in drivers:
            self._tasks.append(asyncio.create_task(self._supervise(d), name=f"device-{d.name}"))
            self._tasks.append(asyncio.create_task(self._sender(d), name=f"outbox-{d.name}"))
        self.telemetry.state_changed(self.snapshot())

    async def stop(self) -> None:
        """Devices left safe (sensors locked), tasks ended, journal closed, telemetry told."""
        if self._stopped:
            return
        self._stopped = True
        keypad = self._driver_of(DeviceKind.KEYPAD)
        if keypad is not None:
            try:
                async with asyncio.timeout(SAFE_STOP_S):
                    await keypad.send(dc.LockSensors())
                self.log.info("sensors_locked", device=keypad.name, why="shutdown")
            except (CommandRejected, TimeoutError) as e:
                self.log.warning("sensors_not_locked", device=keypad.name, error=str(e) or "timeout")
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            # Bounded: a task that ignores its cancellation must not keep the journal open and
            # the broker untold; it is named in the log and left behind.
            done, stuck = await asyncio.wait(self._tasks, timeout=SAFE_STOP_S)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    self.log.error("task_failed", task=task.get_name(), error=str(task.exception()))
            for task in stuck:
                self.log.error("task_did_not_stop", task=task.get_name())
        self._tasks = []
        for outbox in self._outbox.values():  # never written: nobody waits on them for ever
            while not outbox.empty():
                outbox.get_nowait()[1].cancel()
        for d in self.drivers.values():
            with contextlib.suppress(Exception):
                await d.close()
        if self._buses is not None:
            self._buses.close()
        self._writer.shutdown(wait=True)  # a commit under way finishes before the journal closes
        if self.jt is not None:
            seq = self.jt.journal.last_seq
            self.jt.close()
            self.log.info("journal_closed", seq=seq)
        await self.telemetry.stop()
        self.log.info("stopped")

    async def run(self, stop: asyncio.Event) -> None:
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    # ================================================================== one task per device
    async def _supervise(self, driver: Driver) -> None:
        """Run the driver's poll loop; when it dies of a bug, restart it after a backoff delay."""
        backoff = Backoff(driver.config.backoff, clock=self.clock, rng=self.rng)
        log = self.log.bind(device=driver.name)
        while True:
            began = self.clock.now()
            try:
                await self._poll_loop(driver)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a driver bug: the device restarts, the table goes on
                if self.clock.now() - began > RESTART_OK_AFTER_S:
                    backoff.succeeded()
                delay = backoff.failed()
                log.error("driver_crashed", error=f"{type(e).__name__}: {e}", restart_in_s=round(delay, 3))
                await self._set_health(driver.name, DeviceHealth.FAULT)
                self._crashed.add(driver.name)
                with contextlib.suppress(Exception):
                    await driver.close()
                await self.clock.sleep(delay)

    async def _poll_loop(self, driver: Driver) -> None:
        """The driver's own poll loop (Driver.run, the only one), followed by the supervisor."""
        await driver.run(_Followed(self, driver.name), on_demand=self.poll_on_demand)

    async def _tick(self) -> None:
        """Time passing with nothing else happening: the core warns of decks about to expire."""
        while True:
            await self.clock.sleep(TICK_S)
            async with self._lock:
                await self._feed(I.Tick(), origin=None)

    # ================================================================== device events
    async def _consume(self) -> None:
        while True:
            event = await self.events.get()
            self._busy = True
            try:
                await self._on_event(event)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # never crash on one bad event; say which kind it was
                self.log.error(
                    "event_failed", device=event.device, event_kind=type(event).__name__,
                    error=f"{type(e).__name__}: {e}",
                )  # fmt: skip
            finally:
                self._busy = self.events.qsize() > 0
                async with self._progress:
                    self._progress.notify_all()
            stop_if_cancelling()  # an event's device command can lose a cancel like a poll can

    async def _on_event(self, event: dev.DeviceEvent) -> None:
        name = event.device
        old = self.health.get(name, DeviceHealth.CONNECTING)
        new = health_after(old, event)
        unheard = name not in self._answered and name not in self._waiting_said and not self.ready.is_set()
        if unheard and isinstance(event, dev.DeviceOffline | dev.DeviceDegraded):
            # Not ready, and why: the device that has not answered, where it is, what failed.
            self._waiting_said.add(name)
            where = self.drivers[name].config.endpoint.describe() if name in self.drivers else None
            self.log.warning("waiting_for_device", device=name, where=where, error=event.reason)
        if self._grace is not None and self._grace.holds(event, answered=name in self._answered):
            return  # not up yet: still connecting (controller/supervisor/startup.py)
        if new is not old:
            await self._set_health(name, new)
        if isinstance(event, dev.FrameError):
            # One line per event, and a burst is one or two events (the driver coalesces): the
            # reason is the decoder's own text, never the bytes.
            self.log.warning("frame_errors", device=name, count=event.count, reason=event.reason)
            return  # nothing for the table, so not under the table's lock
        async with self._lock:
            seen = seen_of(event)
            inputs = self.translator.inputs(event, self.table)
            for i, inp in enumerate(inputs):
                last = i == len(inputs) - 1
                if await self._feed(inp, origin=name, seen=seen if last else None) is None:
                    break  # the rest of this event's inputs depend on the refused one
                if last:
                    seen = None  # journalled with the step
            if seen is not None:  # acted on though nothing came of it: not to be read again
                await self._mark(seen)
            await self._device_policy(event, old, new)
            await self._reconcile()

    async def _device_policy(self, event: dev.DeviceEvent, old: DeviceHealth, new: DeviceHealth) -> None:
        """What a device's health means for the table (673a.13(j)-(l); a failed shoe; the keypad)."""
        kind = self.kinds.get(event.device)
        marked = new is DeviceHealth.OUT_OF_ORDER  # only the floor's device_restored clears it
        if isinstance(event, dev.DeviceOnline) and kind is DeviceKind.KEYPAD and not marked:
            self.translator.progressive_closed = False
            if not self.table.in_round:
                self._send_device(DeviceKind.KEYPAD, dc.UnlockSensors())
        wild = self.table.wild
        if isinstance(event, dev.DeviceOnline) and kind is DeviceKind.STUB_COUNTER and wild and wild.dealt:
            # Back after a restart or an outage while the stub is due: its count may have gone by
            # unheard; the last one again (the driver knows which counts the journal has).
            self._send_device(DeviceKind.STUB_COUNTER, dc.RequestStubCount())
        rnd = self.table.round
        if isinstance(event, dev.DeviceOnline) and kind is DeviceKind.READER and rnd and rnd.state.dealer:
            # Back after a restart or an outage mid-round: the peek device needs the up card again.
            self._send_device(DeviceKind.READER, dc.SetUpCard(rnd.state.dealer[0].rank))
        if new is old:
            return
        failed = new in (DeviceHealth.FAULT, DeviceHealth.OUT_OF_ORDER)
        if kind is DeviceKind.READER and failed and not self.table.reader_failed:
            await self._feed(I.ReaderFailed(code=getattr(event, "code", 0)), origin=event.device)
        elif kind is DeviceKind.SHOE and isinstance(event, dev.DeviceOffline | dev.DeviceOnline):
            if failed:
                self.log.error(
                    "dealing_halted", device=event.device,
                    error=f"{self.table.chapter}.7(a): the dealing shoe has failed; no round till it is back",
                )  # fmt: skip
                reason = getattr(event, "reason", "") or "no answer"
                await self._feed(I.DeviceFailed(device="shoe", reason=reason), origin=event.device)
            else:
                self.log.info("dealing_may_resume", device=event.device)
                await self._feed(I.DeviceBack(device="shoe"), origin=event.device)
        elif kind is DeviceKind.KEYPAD and failed:
            self.translator.progressive_closed = True
            self.log.warning("progressive_closed", device=event.device, why="the keypad has failed")

    async def _set_health(self, name: str, health: DeviceHealth) -> None:
        old = self.health.get(name)
        if old is health:
            return
        self.health[name] = health
        self.log.info("device_health", device=name, health=health.value, was=old.value if old else None)
        self.telemetry.device_health(name, health.value)
        self.telemetry.state_changed(self.snapshot())
        self._changed()
        if health is DeviceHealth.ONLINE:
            self._answered.add(name)  # degraded is no answer: a failed connect says so
        # Out of order (also as restored from the journal at start): the floor's mark stands
        # whether the device answers or not.
        heard = all(n in self._answered or h is DeviceHealth.OUT_OF_ORDER for n, h in self.health.items())
        if not self.ready.is_set() and heard:
            self.ready.set()
            t = self.table
            seq = self.jt.journal.last_seq if self.jt else 0
            self.log.info("ready", round=t.round_no, in_round=t.in_round, seq=seq)

    @property
    def shoe_failed(self) -> bool:
        """A failed shoe stops dealing (no round opens till it is back or restored). Read from the
        table's journalled state, not from the driver's health: a shoe that went offline is a
        journalled ``device_failed`` with its alarm, one marked out of order a journalled mark with
        who, and a driver that crashed on a bug of ours is neither (the shoe's counters, read on
        from the journal once the driver restarts, lose no card meanwhile)."""
        if self.jt is None:
            return False
        t = self.table
        return "shoe" in t.failed_devices or "shoe" in t.out_of_order

    # ================================================================== the core, journal first
    async def _mark(self, seen: Seen) -> None:
        assert self.jt is not None
        try:
            await self.jt.mark_async(seen, self.wall(), self._writer)
        except JournalError as e:
            self.log.error("journal_failed", device=seen.device, input="device_seen", error=str(e))
            return
        self.telemetry.journal_appended()

    async def _feed(
        self, inp: I.Input, origin: str | None, who: str | None = None, seen: Seen | None = None
    ) -> Step | None:
        """Handle one input through the journal; None when it was refused (logged, one line)."""
        try:
            return await self._step(inp, origin, who, seen)
        except RuleViolation as e:
            self.log.warning("refused", device=origin, input=type(inp).__name__, who=who, error=str(e))
        except JournalError as e:
            # Not journalled, so it did not happen (JournaledTable rebuilt the table from the file).
            self.log.error("journal_failed", device=origin, input=type(inp).__name__, error=str(e))
        return None

    async def _step(
        self,
        inp: I.Input,
        origin: str | None,
        who: str | None,
        seen: Seen | None = None,
        taken_by: dict[str, str] | None = None,
    ) -> Step:
        """Core decides, journal commits, then the effects. Raises what the core or journal raise."""
        assert self.jt is not None
        if self.shoe_failed and isinstance(inp, I.RoundOpened | I.WildRoundOpened):
            # The core has no input for a failed shoe; the shell refuses the round itself.
            section = f"{self.table.chapter}.7(a)"
            raise RuleViolation(section, "the dealing shoe has failed; dealing is stopped")
        before = self.table.in_round
        last = self.jt.journal.last_seq
        # Journalled (committed, in the journal's thread) before any effect.
        step = await self.jt.handle_async(inp, self.wall(), self._writer, seen, taken_by)
        # Effects first, then the bookkeeping: the lock after Start Game is the past-posting window
        # (687a.9(b)), so nothing that is not an effect (log lines, telemetry) goes before it.
        for cmd in step.commands:
            await self._carry_out(cmd)
        await self._follow_ups(step, was_in_round=before)
        if self._unsent:
            # Let the senders put what was just queued on the wire before the bookkeeping below
            # (one turn of the loop): the lock's write is not kept waiting by log lines.
            await asyncio.sleep(0)
        if step.events:
            self._steps += 1
            self.log.info(
                "step", device=origin, input=type(inp).__name__, who=who, kinds=[e.kind for e in step.events]
            )
            for e in step.events:
                if e.kind == "alarm_raised":
                    p = e.payload
                    self.log.warning("alarm", device=origin, id=p["id"], section=p["section"],
                                     message=p["message"], halts=p["halts"])  # fmt: skip
            self.telemetry.journal_appended()
            if not isinstance(self.telemetry, NullTelemetry):
                self.telemetry.state_changed(self.snapshot())
            self._changed()
        elif self.jt.journal.last_seq != last:  # only the device's counters went in
            self.telemetry.journal_appended()
        return step

    async def _carry_out(self, cmd: CoreCommand) -> None:
        try:
            command = self.translator.device_command(cmd)
        except Untranslatable as e:
            self.log.error("command_not_sent", device=cmd.device, error=str(e))
            return
        if isinstance(command, dc.EjectToShoe):
            self._eject_sent.add(command.slot)  # not to be sent again by _reconcile
        self._send_device(DeviceKind(cmd.device), command)

    def _send_device(self, kind: DeviceKind, command: dc.Command) -> asyncio.Future[bool]:
        """Queue ``command`` for the device of ``kind``; the future says whether it was carried out.
        Called only after the step that caused it is journalled (commit before effect)."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        driver = self._driver_of(kind)
        if driver is None:
            done.set_result(False)
            return done
        self._unsent += 1
        self._outbox[driver.name].put_nowait((command, done))
        if self._queued is not None:
            self._queued.append(done)
        return done

    async def _sender(self, driver: Driver) -> None:
        """Write one device's commands in the order they were queued, outside the supervisor's lock."""
        outbox = self._outbox[driver.name]
        while True:
            command, done = await outbox.get()
            what = type(command).__name__
            try:
                await driver.send(command)
            except CommandRejected as e:
                self.log.warning("command_rejected", device=driver.name, command=what, error=str(e))
                done.set_result(False)
            except asyncio.CancelledError:
                done.cancel()
                raise
            except Exception as e:  # a driver bug: this command is lost, said so, the next goes on
                error = f"{type(e).__name__}: {e}"
                self.log.error("command_failed", device=driver.name, command=what, error=error)
                done.set_result(False)
            else:
                self.log.debug("command_sent", device=driver.name, command=what)
                done.set_result(True)
            finally:
                self._unsent -= 1
                async with self._progress:
                    self._progress.notify_all()
            stop_if_cancelling()

    def _driver_of(self, kind: DeviceKind) -> Driver | None:
        return next((d for n, d in self.drivers.items() if self.kinds[n] is kind), None)

    async def _follow_ups(self, step: Step, was_in_round: bool) -> None:
        """Device work the core leaves to the shell, done after the step is journalled."""
        t = self.table
        kinds = {e.kind for e in step.events}
        if "round_started" in kinds and t.blackjack:
            self._send_device(DeviceKind.KEYPAD, dc.LockSensors())  # no wagers after Start Game
        rnd = t.round
        dealer_up = any(e.kind == "card_dealt" and e.payload.get("seat") == DEALER for e in step.events)
        if dealer_up and rnd is not None and len(rnd.state.dealer) == 1:
            # The up card is public; a peek device needs its rank before the hole card goes in.
            self._send_device(DeviceKind.READER, dc.SetUpCard(rnd.state.dealer[0].rank))
        if was_in_round and not t.in_round:
            self._send_device(DeviceKind.READER, dc.ResetReader())
            self._send_device(DeviceKind.KEYPAD, dc.UnlockSensors())

    async def _reconcile(self) -> None:
        """Observations the devices imply but do not send as events: a batch sitting in a shuffler
        slot is in the shuffler; a shuffled batch goes into an empty shoe (the core ejects it)."""
        t = self.table
        if t.manual:
            return
        slots = self.translator.slots
        for slot, view in slots.items():
            if view.state is not dev.ShufflerState.IDLE:
                self._start_sent.discard(slot)
                continue
            batch = t.batches.get(view.back or "")
            if batch is None or batch.opened_at is None:
                continue  # 673a.4: not until the floor has verified the inspection
            stored = [b for b in t.batches.values() if b.location is Place.SHUFFLER and b is not batch]
            if batch.location in (Place.NEW, Place.DISCARD) and not stored:
                await self._feed_auto(I.BatchToShuffler(back=batch.back))
            if (
                batch.location is Place.SHUFFLER
                and batch.shuffler in (ShufflerState.UNSHUFFLED, ShufflerState.JAMMED)
                and slot not in self._start_sent
            ):
                self._start_sent.add(slot)
                self._send_device(DeviceKind.SHUFFLER, dc.StartShuffle(slot))
        if t.shoe_back is not None and t.batches[t.shoe_back].location is Place.SHOE:
            # The journal has the batch in the shoe but the shuffler still holds it ready: the
            # controller died between journalling batch_to_shoe and the eject. Carry it out now.
            for in_slot, shown in slots.items():
                if shown.back != t.shoe_back:
                    continue
                if shown.state is not dev.ShufflerState.READY:
                    self._eject_sent.discard(in_slot)
                elif in_slot not in self._eject_sent:
                    self._eject_sent.add(in_slot)
                    self._send_device(DeviceKind.SHUFFLER, dc.EjectToShoe(in_slot))
        if t.two_batches and t.shoe_back is None and not t.in_round:
            for batch in t.batches.values():
                held = batch.back in self._backs()
                ready = slots.get(self.translator.slot_of(batch.back)) if held else None
                if (
                    batch.location is Place.SHUFFLER and batch.shuffler is ShufflerState.READY
                    and ready is not None and ready.state is dev.ShufflerState.READY
                ):  # fmt: skip
                    await self._feed_auto(I.BatchToShoe(back=batch.back))
                    break

    def _backs(self) -> set[str]:
        return {self.translator.back_of(s) for s in dev.Slot}

    async def _feed_auto(self, inp: I.Input) -> None:
        """An input the supervisor infers: tried again only once the journal has moved on."""
        if self._auto_refused.get(inp) == self._steps:
            return
        if await self._feed(inp, origin=None) is None:
            self._auto_refused[inp] = self._steps
        else:
            self._auto_refused.pop(inp, None)

    # ================================================================== authorised commands
    async def command(self, name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        """A dealer or floor action from the one allow-list (actions.ACTIONS), by the signed-in
        person ``who`` (the console) or the floor account's ``who`` (MQTT). Refusals change nothing."""
        try:
            action = actions.check(name, args, who, role)
        except actions.BadAction as e:
            known = isinstance(name, str) and name in actions.ACTIONS
            self.log.warning("command_refused", command=name if known else None, error=str(e))
            return {"ok": False, "error": str(e)}
        if self.jt is None or self._stopped:
            return {"ok": False, "error": f"{name}: the table is not running"}
        if not self.ready.is_set():
            # Reconciliation first: what the devices did while the controller was down is read
            # and journalled before any person's action is taken.
            return {"ok": False, "error": f"{name}: the table is reading its devices; send it again"}
        queued: list[asyncio.Future[bool]] = []
        async with self._lock:
            self._queued = queued
            try:
                result = await self._command_locked(name, args, who, role, action)
            finally:
                self._queued = None
        # The answer comes once the action's device commands are carried out (or refused), as the
        # person expects; the wait holds no lock, so the table's other devices go on meanwhile.
        await asyncio.gather(*queued, return_exceptions=True)  # cancelled only when stopping
        return result

    async def _command_locked(
        self, name: str, args: dict[str, Any], who: str, role: str, action: actions.Action
    ) -> dict[str, Any]:
        assert self.jt is not None
        try:
            inputs = self._inputs_of(name, args, who, action)
        except (actions.BadAction, TablectlError) as e:
            self.log.warning("command_refused", command=name, who=who, error=str(e))
            return {"ok": False, "error": str(e)}
        self.log.info("command", command=name, who=who, role=role)
        kinds: list[str] = []
        for inp in inputs:
            try:
                step = await self._step(inp, None, who, taken_by={"action": name, "who": who, "role": role})
            except (RuleViolation, JournalError) as e:
                self.log.warning("refused", input=type(inp).__name__, who=who, error=str(e))
                return {"ok": False, "error": str(e), "events": kinds}
            kinds += [e.kind for e in step.events]
        await self._reconcile()
        return {"ok": True, "events": kinds, "seq": self.jt.journal.last_seq}

    def _inputs_of(self, name: str, args: dict[str, Any], who: str, action: actions.Action) -> list[I.Input]:
        if action.build is not None:
            return action.build(args, who)
        if name == "key":  # one of dev.Key's values: checked against the allow-list's choices
            return self.translator.key_inputs(args["key"], self.table)
        if name == "start_round":
            return self.translator.key_inputs(dev.Key.START_GAME.value, self.table, tuple(args["boxes"]))
        if name == "mark_out_of_order":
            return self._out_of_order(args["device"], who)
        if name == "device_restored":
            return self._restored(args["device"], who)
        if name == "shuffler_restored":
            return self._restored(DeviceKind.SHUFFLER.value, who)
        raise actions.BadAction(f"{name}: not implemented")  # pragma: no cover

    def _device_named(self, action: str, device: str) -> str:
        """The device called ``device`` at this table, by name or by kind."""
        name = (
            device
            if device in self.kinds
            else next((n for n, k in self.kinds.items() if k.value == device), None)
        )
        if name is None:
            raise actions.BadAction(f"{action}: no device {device!r} at this table")
        return name

    def _out_of_order(self, device: str, who: str) -> list[I.Input]:
        """Journalled with who (``device_out_of_order``, or ``shuffler_out_of_order``); a restart
        restores it from the journal."""
        name = self._device_named("mark_out_of_order", device)
        kind = self.kinds[name]
        self.health[name] = DeviceHealth.OUT_OF_ORDER
        self.telemetry.device_health(name, DeviceHealth.OUT_OF_ORDER.value)
        self._changed()
        if kind is DeviceKind.KEYPAD:
            self.translator.progressive_closed = True
        return [I.DeviceOutOfOrder(device=kind.value, by=who)]

    def _restored(self, device: str, who: str) -> list[I.Input]:
        """The floor puts the device back in service; its health is then what its driver sees."""
        name = self._device_named("device_restored", device)
        kind = self.kinds[name]
        if self.health.get(name) is DeviceHealth.OUT_OF_ORDER:
            driver = self.drivers.get(name)
            up = driver is not None and driver.health in (dev.Health.ONLINE, dev.Health.DEGRADED)
            self.health[name] = DeviceHealth.ONLINE if up else DeviceHealth.FAULT
            self.telemetry.device_health(name, self.health[name].value)
            if kind is DeviceKind.KEYPAD and up:
                self.translator.progressive_closed = False
            self._changed()
        return [I.DeviceRestored(device=kind.value, by=who)]

    # ================================================================== change listeners
    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after every journalled step and device health change (the console's
        live updates); returns the function that removes it. Listeners must not block."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    # ================================================================== views and waiting
    def snapshot(self) -> dict[str, Any]:
        """The public state for telemetry and the terminal view: no card identities."""
        snap = self.table.snapshot() if self.jt is not None else {}
        return {
            "table": self.table_id,
            "site": self.config.site,
            "game": self.config.options.game.value,
            **snap,
            "devices": {n: h.value for n, h in self.health.items()},
            "progressive_closed": self.translator.progressive_closed,
            "shoe_failed": self.shoe_failed,
        }

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds after some poll or event (tests, the virtual dealer)."""
        async with self._progress:
            await self._progress.wait_for(predicate)

    def idle(self) -> bool:
        return not self._busy and self.events.empty() and not self._lock.locked() and self._unsent == 0

    async def settle(self, *names: str) -> None:
        """Poll ``names`` (every device when none) now, and wait until what they reported is
        handled. The virtual dealer calls this after acting on a device, instead of sleeping."""
        names = names or tuple(self.drivers)
        target = {n: self._polls_started[n] + 1 for n in names}
        for n in names:
            if not isinstance(self.drivers[n], StubCounterDriver):
                self._poke[n].set()
        polled = [n for n in names if not isinstance(self.drivers[n], StubCounterDriver)]
        await self.wait_for(lambda: all(self._polls_done[n] >= target[n] for n in polled) and self.idle())


class _Followed(PollHooks):
    """What the supervisor hears of a device's poll loop: polls counted (settle waits on them),
    and a device whose driver was restarted after a crash is online again once it answers."""

    def __init__(self, sup: Supervisor, name: str) -> None:
        self.sup, self.name = sup, name

    def polling(self) -> None:
        self.sup._polls_started[self.name] += 1

    async def polled(self, ok: bool) -> None:
        sup = self.sup
        sup._polls_done[self.name] += 1
        async with sup._progress:
            sup._progress.notify_all()
        if ok and self.name in sup._crashed:  # restarted and answering again
            sup._crashed.discard(self.name)
            await sup._set_health(self.name, DeviceHealth.ONLINE)
