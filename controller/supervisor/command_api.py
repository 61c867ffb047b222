"""Dealer and floor actions (the console and MQTT), from the one allow-list (actions.ACTIONS).

An action is checked against the allow-list and the person's role, refused until the table has
read its devices (reconciliation first), then journalled step by step under the supervisor's
lock, like a device's event. Refusals change nothing and say why in one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from structlog.typing import FilteringBoundLogger

from controller import actions
from controller.errors import RuleViolation, TablectlError
from controller.journal import JournalError
from controller.supervisor.device_policy import DevicePolicy
from controller.supervisor.mapping import Translator
from controller.supervisor.outbox import Outbox
from controller.supervisor.reconcile import Reconciler
from controller.supervisor.step import Stepper
from controller.table import inputs as I
from controller.table.asking import asking
from devices import events as dev
from devices.profiles import DeviceKind


class CommandApi:
    def __init__(
        self,
        *,
        running: Callable[[], bool],
        lock: asyncio.Lock,
        kinds: dict[str, DeviceKind],
        translator: Translator,
        stepper: Stepper,
        policy: DevicePolicy,
        reconciler: Reconciler,
        outbox: Outbox,
        log: FilteringBoundLogger,
    ) -> None:
        self.running, self.lock, self.kinds, self.translator = running, lock, kinds, translator
        self.stepper, self.policy, self.reconciler, self.outbox = stepper, policy, reconciler, outbox
        self.log = log

    async def command(self, name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        """A dealer or floor action from the one allow-list (actions.ACTIONS), by the signed-in
        person ``who`` (the console) or the floor account's ``who`` (MQTT). Refusals change nothing."""
        try:
            action = actions.check(name, args, who, role)
        except actions.BadAction as e:
            known = isinstance(name, str) and name in actions.ACTIONS
            self.log.warning("command_refused", command=name if known else None, error=str(e))
            return {"ok": False, "error": str(e)}
        if action.telemetry:
            return {"ok": False, "error": f"{name}: the table's telemetry answers it, over MQTT only"}
        if not self.running():
            return {"ok": False, "error": f"{name}: the table is not running"}
        if not self.policy.ready.is_set():
            # Reconciliation first: what the devices did while the controller was down is read
            # and journalled before any person's action is taken.
            return {"ok": False, "error": f"{name}: the table is reading its devices; send it again"}
        if self.stepper.outage.down:
            # Not waited for: the lock is the held input's until the journal takes it.
            error = self.stepper.outage.refusal(name)
            self.log.warning("command_refused", command=name, who=who, error=error)
            return {"ok": False, "error": error}
        queued: list[asyncio.Future[bool]] = []
        async with self.lock:
            with self.outbox.collecting(queued):
                result = await self._command_locked(name, args, who, role, action)
        # The answer comes once the action's device commands are carried out (or refused), as the
        # person expects; the wait holds no lock, so the table's other devices go on meanwhile.
        await asyncio.gather(*queued, return_exceptions=True)  # cancelled only when stopping
        return result

    async def _command_locked(
        self, name: str, args: dict[str, Any], who: str, role: str, action: actions.Action
    ) -> dict[str, Any]:
        jt = self.stepper.jt
        assert jt is not None
        meant_for = args.get("ask")
        if meant_for is not None and meant_for != asking(self.stepper.table)["id"]:
            # An answer to an ask the table no longer asks (pressed twice, or on the display after
            # the keypad): it must not be taken as the answer to the ask that came next.
            error = f"{name}: the table no longer asks what this answers ({meant_for}); nothing was done"
            self.log.warning("command_refused", command=name, who=who, error=error)
            return {"ok": False, "error": error}
        try:
            inputs = self._inputs_of(name, args, who, action)
        except (actions.BadAction, TablectlError) as e:
            self.log.warning("command_refused", command=name, who=who, error=str(e))
            return {"ok": False, "error": str(e)}
        self.log.info("command", command=name, who=who, role=role)
        kinds: list[str] = []
        for inp in inputs:
            taken_by = {"action": name, "who": who, "role": role}
            if "reason" in args:  # a destructive action's reason, kept with who took it
                taken_by["reason"] = str(args["reason"])
            try:
                step = await self.stepper.step(inp, None, who, taken_by=taken_by)
            except JournalError as e:  # refused to the person; the table halts (journal_outage.py)
                self.stepper.outage.began(e, name, None, holding=False)
                error = self.stepper.outage.refusal(name)
                return {"ok": False, "error": error, "events": kinds}
            except RuleViolation as e:
                self.log.warning("refused", input=type(inp).__name__, who=who, error=str(e))
                return {"ok": False, "error": str(e), "events": kinds}
            kinds += [e.kind for e in step.events]
        await self.reconciler.reconcile()
        return {"ok": True, "events": kinds, "seq": jt.journal.last_seq}

    def _inputs_of(self, name: str, args: dict[str, Any], who: str, action: actions.Action) -> list[I.Input]:
        if action.build is not None:
            return action.build(args, who)
        table = self.stepper.table
        if name == "key":  # one of dev.Key's values: checked against the allow-list's choices
            return self.translator.key_inputs(args["key"], table, amount=args.get("amount"))
        if name == "start_round":
            return self.translator.key_inputs(dev.Key.START_GAME.value, table, tuple(args["boxes"]))
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
        self.policy.mark_out_of_order(name)
        return [I.DeviceOutOfOrder(device=self.kinds[name].value, by=who)]

    def _restored(self, device: str, who: str) -> list[I.Input]:
        """The floor puts the device back in service; its health is then what its driver sees."""
        name = self._device_named("device_restored", device)
        self.policy.restore(name)
        return [I.DeviceRestored(device=self.kinds[name].value, by=who)]
