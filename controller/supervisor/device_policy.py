"""What each device's health means for the table, and the health the floor sees.

A failed reader is journalled (673a.13(j)); a failed shoe halts dealing until it is back (the
chapter's .7(a)); a failed keypad closes progressive wagers while the main game goes on; a device
back online is given again what it may have missed (sensors unlocked, the stub's last count, the
reader's up card). The floor's out-of-order mark (673a.13(l)) stands until the floor restores
the device, whatever the driver sees. ``ready`` is set once every device has answered (or is
marked out of order): reconciliation before any person's action.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from structlog.typing import FilteringBoundLogger

from controller.supervisor.health import DeviceHealth
from controller.supervisor.mapping import Translator
from controller.supervisor.outbox import Outbox
from controller.supervisor.step import Stepper
from controller.supervisor.telemetry import Telemetry
from controller.table import inputs as I
from controller.table.sensors import sensors_held
from devices import commands as dc
from devices import events as dev
from devices.drivers.base import Driver
from devices.profiles import DeviceKind


class DevicePolicy:
    def __init__(
        self,
        *,
        kinds: dict[str, DeviceKind],
        drivers: dict[str, Driver],
        translator: Translator,
        stepper: Stepper,
        outbox: Outbox,
        telemetry: Telemetry,
        snapshot: Callable[[], dict[str, Any]],
        changed: Callable[[], None],
        log: FilteringBoundLogger,
    ) -> None:
        self.kinds, self.drivers, self.translator = kinds, drivers, translator
        self.stepper, self.outbox, self.telemetry = stepper, outbox, telemetry
        self.snapshot, self.changed, self.log = snapshot, changed, log
        self.health: dict[str, DeviceHealth] = {}
        self.answered: set[str] = set()  # devices heard from since start (ready needs them all)
        self.ready = asyncio.Event()  # journal replayed and every device answered once

    def add_device(self, name: str, out_of_order: bool) -> None:
        """A device at start: connecting, or out of order as the floor marked it before a restart."""
        self.health[name] = DeviceHealth.CONNECTING
        if out_of_order:
            self.health[name] = DeviceHealth.OUT_OF_ORDER
            if self.kinds[name] is DeviceKind.KEYPAD:
                self.translator.progressive_closed = True
        self.telemetry.device_health(name, self.health[name].value)

    async def after_event(self, event: dev.DeviceEvent, old: DeviceHealth, new: DeviceHealth) -> None:
        """What a device's health means for the table (673a.13(j)-(l); a failed shoe; the keypad)."""
        table = self.stepper.table
        kind = self.kinds.get(event.device)
        marked = new is DeviceHealth.OUT_OF_ORDER  # only the floor's device_restored clears it
        if isinstance(event, dev.DeviceOnline) and kind is DeviceKind.KEYPAD and not marked:
            self.translator.progressive_closed = False
            # The sensors as the journal has them (687a.9(b)): a restart after a kill between a
            # lock and its commit, or a keypad that lost its lock mid-round, is put right.
            held = sensors_held(table)
            self.outbox.send(DeviceKind.KEYPAD, dc.LockSensors() if held else dc.UnlockSensors())
        wild = table.wild
        if isinstance(event, dev.DeviceOnline) and kind is DeviceKind.STUB_COUNTER and wild and wild.dealt:
            # Back after a restart or an outage while the stub is due: its count may have gone by
            # unheard; the last one again (the driver knows which counts the journal has).
            self.outbox.send(DeviceKind.STUB_COUNTER, dc.RequestStubCount())
        rnd = table.round
        if isinstance(event, dev.DeviceOnline) and kind is DeviceKind.READER and rnd and rnd.state.dealer:
            # Back after a restart or an outage mid-round: the peek device needs the up card again.
            self.outbox.send(DeviceKind.READER, dc.SetUpCard(rnd.state.dealer[0].rank))
        if new is old:
            return
        failed = new in (DeviceHealth.FAULT, DeviceHealth.OUT_OF_ORDER)
        if kind is DeviceKind.READER and failed and not table.reader_failed:
            await self.stepper.feed(I.ReaderFailed(code=getattr(event, "code", 0)), origin=event.device)
        elif kind is DeviceKind.SHOE and isinstance(event, dev.DeviceOffline | dev.DeviceOnline):
            if failed:
                self.log.error(
                    "dealing_halted", device=event.device,
                    error=f"{table.chapter}.7(a): the dealing shoe has failed; no round till it is back",
                )  # fmt: skip
                reason = getattr(event, "reason", "") or "no answer"
                await self.stepper.feed(I.DeviceFailed(device="shoe", reason=reason), origin=event.device)
            else:
                self.log.info("dealing_may_resume", device=event.device)
                await self.stepper.feed(I.DeviceBack(device="shoe"), origin=event.device)
        elif kind is DeviceKind.KEYPAD and failed:
            self.translator.progressive_closed = True
            self.log.warning("progressive_closed", device=event.device, why="the keypad has failed")
            if new is DeviceHealth.FAULT:  # the floor's own out-of-order mark needs no alarm
                reason = getattr(event, "reason", "") or "no answer"
                await self.stepper.feed(I.DeviceFailed(device="keypad", reason=reason), origin=event.device)
        elif kind is DeviceKind.KEYPAD and isinstance(event, dev.DeviceOnline) and not marked:
            await self.stepper.feed(I.DeviceBack(device="keypad"), origin=event.device)

    async def set_health(self, name: str, health: DeviceHealth) -> None:
        old = self.health.get(name)
        if old is health:
            return
        self.health[name] = health
        self.log.info("device_health", device=name, health=health.value, was=old.value if old else None)
        self.stepper.metrics.health_changed(name, old.value if old else None, health.value)
        self.telemetry.device_health(name, health.value)
        self.telemetry.state_changed(self.snapshot())
        self.changed()
        if health is DeviceHealth.ONLINE:
            self.answered.add(name)  # degraded is no answer: a failed connect says so
        # Out of order (also as restored from the journal at start): the floor's mark stands
        # whether the device answers or not.
        heard = all(n in self.answered or h is DeviceHealth.OUT_OF_ORDER for n, h in self.health.items())
        if not self.ready.is_set() and heard:
            self.ready.set()
            t = self.stepper.table
            jt = self.stepper.jt
            seq = jt.journal.last_seq if jt else 0
            self.log.info("ready", round=t.round_no, in_round=t.in_round, seq=seq)

    def mark_out_of_order(self, name: str) -> None:
        """The floor's mark (journalled by the caller, with who); a restart restores it from the
        journal."""
        self.health[name] = DeviceHealth.OUT_OF_ORDER
        self.telemetry.device_health(name, DeviceHealth.OUT_OF_ORDER.value)
        self.changed()
        if self.kinds[name] is DeviceKind.KEYPAD:
            self.translator.progressive_closed = True

    def restore(self, name: str) -> None:
        """The floor puts the device back in service; its health is then what its driver sees."""
        if self.health.get(name) is not DeviceHealth.OUT_OF_ORDER:
            return
        driver = self.drivers.get(name)
        up = driver is not None and driver.health in (dev.Health.ONLINE, dev.Health.DEGRADED)
        self.health[name] = DeviceHealth.ONLINE if up else DeviceHealth.FAULT
        self.telemetry.device_health(name, self.health[name].value)
        if self.kinds[name] is DeviceKind.KEYPAD and up:
            self.translator.progressive_closed = False
        self.changed()
