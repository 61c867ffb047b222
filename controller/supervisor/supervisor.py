"""The supervisor: one asyncio task per device driver (each with its own restart loop), one task
that turns device events into table-core inputs, the journal before every effect, telemetry told.

Order of work for every input (device event or authorised command), under one lock so steps never
interleave: core decides -> journal commits (fsync) -> device commands queued -> telemetry told ->
the supervisor's own follow-ups (reader up card, sensors locked/unlocked, the next batch in).

No device I/O happens under the lock: each device has an outbox and a sender task of its own that
writes its commands in order. A command is queued only after its step is on disk, so the journal
still comes before every effect, but a device stuck in its timeout (up to 30 s) holds up its own
commands only, never another device's events or the keypad's lock.

``Supervisor`` composes the parts and starts and stops them; each part is a module of its own:
step.py (core, journal, effects), outbox.py (device commands), device_events.py (events to
inputs), settle.py (device observations in the order they happened), device_policy.py (what
health means for the table), reconcile.py (what the devices imply), command_api.py (dealer and
floor actions), tasks.py (restart loops, the tick) and progress.py (waiting on it all, for tests
and the virtual dealer).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from structlog.typing import FilteringBoundLogger

from controller.clock import REAL_CLOCK, Clock
from controller.supervisor.command_api import CommandApi
from controller.supervisor.config import TableConfig
from controller.supervisor.device_events import DeviceEvents
from controller.supervisor.device_policy import DevicePolicy
from controller.supervisor.health import shoe_failed
from controller.supervisor.journal_outage import DISK_CHECK_S, journal_disk
from controller.supervisor.mapping import Translator
from controller.supervisor.metrics import Readings, TableMetrics
from controller.supervisor.outbox import Outbox
from controller.supervisor.progress import Progress
from controller.supervisor.reconcile import DEFAULT_MAX_CYCLE_S, Reconciler
from controller.supervisor.settle import SETTLE_READS, SETTLE_S, SettleWindow
from controller.supervisor.stalls import STALL_CHECK_S, StallWatch, presence
from controller.supervisor.startup import ConnectGrace
from controller.supervisor.step import Stepper
from controller.supervisor.tasks import SAFE_STOP_S, Tasks
from controller.supervisor.telemetry import NullTelemetry, Telemetry
from controller.table.asking import ask_id
from controller.table.core import Table
from controller.table.recorder import JournaledTable
from controller.table.sections import section
from devices import commands as dc
from devices import events as dev
from devices.config import DeviceConfig
from devices.drivers.base import EVENT_QUEUE_MAX, Driver
from devices.drivers.factory import build_drivers
from devices.errors import CommandRejected
from devices.profiles import DeviceKind
from devices.transport.modbus import BusRegistry


def _published(telemetry: Telemetry) -> int | None:
    """The last seq the ops broker acknowledged, from a telemetry that counts it (None without one)."""
    acked = getattr(telemetry, "acked_seq", None)
    return acked if isinstance(acked, int) and not isinstance(acked, bool) else None


def _refused(telemetry: Telemetry) -> int | None:
    """Floor commands the telemetry refused with a full queue (None without a broker)."""
    overflow = getattr(telemetry, "overflow", None)
    refused = getattr(overflow, "refused", None)
    return refused if isinstance(refused, int) else None


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
        self.log: FilteringBoundLogger = structlog.get_logger("tablectl.supervisor").bind(
            table=self.table_id, device=None
        )
        backs = next(
            (tuple(d.options.get("backs", ("red", "blue"))) for d in self.device_configs
             if d.kind is DeviceKind.SHUFFLER),
            ("red", "blue"),
        )  # fmt: skip
        self.translator = Translator((str(backs[0]), str(backs[1])))
        self.events: asyncio.Queue[dev.DeviceEvent] = asyncio.Queue(EVENT_QUEUE_MAX)  # see Driver.emit
        self.kinds: dict[str, DeviceKind] = {d.name: d.kind for d in self.device_configs}
        self.drivers: dict[str, Driver] = {}
        self._buses: BusRegistry | None = None
        self._stopped = False
        # The parts, each holding only what it needs (see the module docstring).
        self.progress = Progress(self.events, self.drivers, unsent=lambda: self.outbox.unsent)
        # One step at a time; never held across device I/O. Its release tells whoever waits on
        # progress (settle: the table is idle only while nobody holds it).
        self.lock = self.progress.lock
        self.outbox = Outbox(self.drivers, self.kinds, self.progress.condition, self.log)
        self.stepper = Stepper(
            wall=self.wall,
            translator=self.translator,
            outbox=self.outbox,
            telemetry=self.telemetry,
            snapshot=self.snapshot,
            changed=self.progress.changed,
            log=self.log,
        )
        self.metrics = self.stepper.metrics = TableMetrics(self.table_id)
        outage = self.stepper.outage  # a journal that cannot be written (journal_outage.py)
        outage.sleep = self.clock.sleep
        outage.section = section(config.options.spec, "reconstruction")
        self.policy = DevicePolicy(
            kinds=self.kinds,
            drivers=self.drivers,
            translator=self.translator,
            stepper=self.stepper,
            outbox=self.outbox,
            telemetry=self.telemetry,
            snapshot=self.snapshot,
            changed=self.progress.changed,
            log=self.log,
        )
        self.health = self.policy.health
        self.ready = self.policy.ready  # journal replayed and every device answered once
        shuffler = next((d for d in self.device_configs if d.kind is DeviceKind.SHUFFLER), None)
        self.max_cycle_s: float | None = None
        if shuffler is not None:
            self.max_cycle_s = float(shuffler.options.get("max_cycle_s", DEFAULT_MAX_CYCLE_S))
        self.metrics.watch(
            Readings(
                table=lambda: self.stepper.table if self.jt is not None else None,
                health=self.policy.health,
                event_queue=self.events.qsize,
                outbox_queues=lambda: {n: q.qsize() for n, q in self.outbox.queues.items()},
                journal_seq=lambda: self.jt.journal.last_seq if self.jt is not None else None,
                published_seq=lambda: _published(self.telemetry),
                ready=lambda: self.ready.is_set(),
                commands_refused=lambda: _refused(self.telemetry),
                journal_writable=lambda: not self.stepper.outage.down,
                journal_disk=lambda: journal_disk(self.journal_path),
            )
        )
        self.reconciler = Reconciler(
            self.translator, self.stepper, self.outbox, clock=self.clock,
            max_cycle_s=self.max_cycle_s or DEFAULT_MAX_CYCLE_S,
        )  # fmt: skip
        self.device_events = DeviceEvents(
            events=self.events,
            lock=self.lock,
            drivers=self.drivers,
            translator=self.translator,
            stepper=self.stepper,
            policy=self.policy,
            reconciler=self.reconciler,
            progress=self.progress,
            log=self.log,
        )
        self.tasks = Tasks(
            clock=self.clock,
            rng=self.rng,
            poll_on_demand=self.poll_on_demand,
            lock=self.lock,
            stepper=self.stepper,
            policy=self.policy,
            progress=self.progress,
            log=self.log,
        )
        self.stalls = StallWatch(
            self.clock, self.stepper, lambda: self.translator.shoe_load,
            lambda: presence(self.kinds, self.policy.health, self.drivers), self._not_out, self._held,
        )  # fmt: skip
        self.reconciler.retry_ejects(self.lock, lambda work, name: self.tasks.spawn(work, name=name))
        self.commands = CommandApi(
            running=lambda: self.jt is not None and not self._stopped,
            lock=self.lock,
            kinds=self.kinds,
            translator=self.translator,
            stepper=self.stepper,
            policy=self.policy,
            reconciler=self.reconciler,
            outbox=self.outbox,
            log=self.log,
        )

    @property
    def jt(self) -> JournaledTable | None:
        return self.stepper.jt

    @property
    def table(self) -> Table:
        return self.stepper.table

    # ================================================================== lifecycle
    async def start(self) -> None:
        from controller.logs import bind_table

        bind_table(self.table_id)
        jt = self.stepper.open(self.journal_path, self.config.options, self.table_id, self.config.gaming_day)
        t = jt.table
        self.log.info(
            "journal_open", path=str(self.journal_path), seq=jt.journal.last_seq, round=t.round_no,
            in_round=t.in_round, halted=len(t.halted),
        )  # fmt: skip
        await self.telemetry.start()
        drivers, self._buses = build_drivers(self.device_configs, clock=self.clock, events=self.events)
        for d in drivers:
            self.drivers[d.name] = d
            # Reconciliation: each driver's first poll is diffed against what the journal says the
            # controller last acted on, so what the device did meanwhile is handled as if live.
            d.baseline = dict(t.device_seen.get(d.name, {}))
            # Out of order when marked by the floor before a restart.
            self.policy.add_device(d.name, out_of_order=self.kinds[d.name].value in t.out_of_order)
            self.progress.add_device(d)
            self.outbox.add_device(d)
        self.tasks.spawn(self.device_events.consume(), name="supervisor-events")
        self.tasks.spawn(self.tasks.tick(), name="supervisor-tick")
        if self.max_cycle_s is not None:  # a shuffle that never ends is noticed with nothing else happening
            every = max(1.0, self.max_cycle_s / 4)
            self.tasks.spawn(self.tasks.every(every, self._overdue), name="supervisor-shuffles")
        outage = self.stepper.outage
        outage.directory = self.journal_path.parent
        outage.spawn = lambda work: self.tasks.spawn(work, name="journal-probe")
        outage.disk_checked(journal_disk(self.journal_path))
        self.tasks.spawn(self.tasks.every(DISK_CHECK_S, self._check_disk), name="supervisor-disk")
        self.tasks.spawn(self.tasks.every(STALL_CHECK_S, self._stalls), name="supervisor-stalls")
        shuffler = next((d for d in drivers if d.kind is DeviceKind.SHUFFLER), None)
        if shuffler is not None:  # a draw or key at a shoe change waits for the shuffler's read
            settle = SettleWindow(
                shuffler=shuffler.name, clock=self.clock, events=self.events, progress=self.progress,
                log=self.log, settle_s=max(SETTLE_S, SETTLE_READS * shuffler.config.poll_interval_s),
                later_reads=not self.poll_on_demand,
            )  # fmt: skip
            self.device_events.settle = settle
            self.tasks.spawn(settle.run(), name="supervisor-settle")
        grace = self.device_events.grace = ConnectGrace(self.clock, [d.config for d in drivers])
        self.tasks.spawn(grace.run(self.events, self.policy.answered.__contains__), name="connect-grace")
        for d in drivers:
            self.tasks.spawn(self.tasks.supervise(d), name=f"device-{d.name}")
            self.tasks.spawn(self.outbox.sender(d), name=f"outbox-{d.name}")
        self.telemetry.state_changed(self.snapshot())

    async def _check_disk(self) -> None:
        """Free space under the journal below its reserve is warned of before it runs out."""
        self.stepper.outage.disk_checked(journal_disk(self.journal_path))

    async def _overdue(self) -> None:
        """A shuffle overdue fails (Reconciler.overdue), and the batch is started again at once."""
        if self.ready.is_set():
            await self.reconciler.reconcile()

    def _not_out(self) -> set[str]:
        """The batches whose eject the shuffler refused and which it still shows ready."""
        slots = self.translator.slots
        return {
            self.translator.back_of(slot)
            for slot in self.reconciler.eject_refused_since
            if slot in slots and slots[slot].state is dev.ShufflerState.READY
        }

    def _held(self) -> set[str]:
        """The batches a shuffler slot reads unshuffled (a batch the table has out of the
        shuffler that is read there came back with a restarted or swapped shuffler)."""
        unshuffled = (dev.ShufflerState.IDLE, dev.ShufflerState.SHUFFLING, dev.ShufflerState.JAMMED)
        slots = self.translator.slots
        return {self.translator.back_of(s) for s, view in slots.items() if view.state in unshuffled}

    async def _stalls(self) -> None:
        """A wait that cannot end becomes an alarm (controller/supervisor/stalls.py); from ready
        on, when every device has had its chance to answer."""
        if self.ready.is_set():
            await self.stalls.check()

    async def stop(self) -> None:
        """Devices left safe (sensors locked), tasks ended, journal closed, telemetry told."""
        if self._stopped:
            return
        self._stopped = True
        keypad = self.outbox.driver_of(DeviceKind.KEYPAD)
        if keypad is not None:
            try:
                async with asyncio.timeout(SAFE_STOP_S):
                    await keypad.send(dc.LockSensors())
                self.log.info("sensors_locked", device=keypad.name, why="shutdown")
            except (CommandRejected, TimeoutError) as e:
                self.log.warning("sensors_not_locked", device=keypad.name, error=str(e) or "timeout")
        await self.tasks.cancel_all()
        self.outbox.cancel_unsent()  # never written: nobody waits on them for ever
        for d in self.drivers.values():
            with contextlib.suppress(Exception):
                await d.close()
        if self._buses is not None:
            self._buses.close()
        seq = self.stepper.close()  # a commit under way finishes before the journal closes
        if seq is not None:
            self.log.info("journal_closed", seq=seq)
        await self.telemetry.stop()
        self.log.info("stopped")

    async def run(self, stop: asyncio.Event) -> None:
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    # ================================================================== the public API
    async def command(self, name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        """A dealer or floor action (see CommandApi.command)."""
        return await self.commands.command(name, args, who, role)

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after every journalled step and device health change (the console's
        live updates); returns the function that removes it. Listeners must not block."""
        return self.progress.on_change(listener)

    @property
    def shoe_failed(self) -> bool:
        """Whether a failed shoe stops dealing (see health.shoe_failed); not before start."""
        return self.jt is not None and shoe_failed(self.table)

    def snapshot(self) -> dict[str, Any]:
        """The public state for telemetry and the terminal view: no card identities."""
        snap = self.table.snapshot() if self.jt is not None else {}
        out = {
            "table": self.table_id,
            "site": self.config.site,
            "game": self.config.options.game.value,
            **snap,
            "devices": {n: h.value for n, h in self.health.items()},
            "progressive_closed": self.translator.progressive_closed,
            "shoe_failed": self.shoe_failed,
        }
        answers = self.table.state.asks.answers if self.jt is not None else 0
        return self.stepper.outage.into(out, lambda ask: ask_id(ask, answers))

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds after some poll or event (tests, the virtual dealer)."""
        await self.progress.wait_for(predicate)

    def idle(self) -> bool:
        return self.progress.idle()

    async def settle(self, *names: str) -> None:
        """Poll ``names`` (every device when none) now, and wait until what they reported is
        handled. The virtual dealer calls this after acting on a device, instead of sleeping."""
        await self.progress.settle(*names)
