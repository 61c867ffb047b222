"""One step of the table: the core decides, the journal commits (fsync), then the effects.

Every input (a device event, an authorised command, a tick, what the supervisor infers) goes
through ``Stepper.step`` under the supervisor's lock, so steps never interleave. Effects come
only after the commit: the device commands the core asked for, then the follow-ups the core
leaves to the shell (the reader's up card, sensors locked and unlocked), then telemetry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from structlog.typing import FilteringBoundLogger

from controller.errors import RuleViolation
from controller.game_config import GameOptions
from controller.gaming_day import GamingDay
from controller.journal import JournalError
from controller.rules.requests import DEALER
from controller.supervisor.draws import DrawLedger, draw_of
from controller.supervisor.health import shoe_failed
from controller.supervisor.journal_outage import JournalOutage
from controller.supervisor.mapping import Translator, Untranslatable
from controller.supervisor.metrics import TableMetrics
from controller.supervisor.outbox import Outbox
from controller.supervisor.telemetry import NullTelemetry, Telemetry
from controller.table import inputs as I
from controller.table.core import Command as CoreCommand
from controller.table.core import Step, Table
from controller.table.recorder import JournaledTable, Seen
from controller.table.sensors import locked_at_start
from devices import commands as dc
from devices import events as dev
from devices.profiles import DeviceKind


class Stepper:
    def __init__(
        self,
        *,
        wall: Callable[[], float],
        translator: Translator,
        outbox: Outbox,
        telemetry: Telemetry,
        snapshot: Callable[[], dict[str, Any]],
        changed: Callable[[], None],
        log: FilteringBoundLogger,
    ) -> None:
        self.wall = wall  # the table's time (journalled)
        self.translator, self.outbox, self.telemetry = translator, outbox, telemetry
        self.snapshot, self.changed, self.log = snapshot, changed, log
        self.jt: JournaledTable | None = None
        self.metrics = TableMetrics("table")  # the supervisor hands its own in
        self.steps = 0  # steps with events; an inferred input refused is tried again after the next
        self.eject_sent: set[dev.Slot] = set()  # ejects queued: reconcile does not send them again
        # Told how each eject ended (carried out or not): the reconciler sends a refused one again.
        self.eject_settled: Callable[[dev.Slot, bool], None] | None = None
        # The journal's commits (and their fsync) run here, one at a time, off the event loop: a
        # slow flush holds up the step that waits for it (commit before effect), not the polls.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self.draws = DrawLedger()  # which of the shoe's draws are public (alarms name no other)
        # A commit that fails halts the table and is tried again (journal_outage.py); the
        # supervisor gives it its clock and the game's section.
        self.outage = JournalOutage(sleep=asyncio.sleep, wall=wall, changed=self._outage_changed, log=log)

    def _outage_changed(self) -> None:
        """The journal stopped or started taking commits: the console and the broker are told."""
        if not isinstance(self.telemetry, NullTelemetry):
            self.telemetry.state_changed(self.snapshot())
        self.changed()

    @property
    def table(self) -> Table:
        assert self.jt is not None, "the supervisor is not started"
        return self.jt.table

    def open(self, path: Path, options: GameOptions, table_id: str, calendar: GamingDay) -> JournaledTable:
        # The journal's directory is the operator's to make (with its owner and mode): a mistyped
        # --journal must not leave a new tree behind (Journal.open refuses in one line).
        self.jt = JournaledTable.open(path, options, table_id, now=self.wall())
        self.jt.table.calendar = calendar
        return self.jt

    def close(self) -> int | None:
        """The journal closed once a commit under way has finished; its last seq, if it was open."""
        self._writer.shutdown(wait=True)
        if self.jt is None:
            return None
        seq = self.jt.journal.last_seq
        self.jt.close()
        return seq

    async def mark(self, seen: Seen) -> None:
        """What a device reported, journalled though no step came of it: not to be read again."""
        assert self.jt is not None
        while True:
            try:
                await self.jt.mark_async(seen, self.wall(), self._writer)
                break
            except JournalError as e:  # held and tried again: the device is not read past it
                await self.outage.failed(e, "device_seen", seen.device)
        self.outage.committed()
        self.telemetry.journal_appended()

    async def feed(
        self, inp: I.Input, origin: str | None, who: str | None = None, seen: Seen | None = None,
        locked_at: int | None = None,
    ) -> Step | None:  # fmt: skip
        """Handle one input through the journal; None when it was refused (logged, one line).
        ``locked_at``: the Start Game (its key_seq) the keypad's driver locked the sensors for
        before this input was decided: journalled first, with the decision; a refusal unlocks."""
        while True:
            try:
                return await self.step(inp, origin, who, seen, locked_at=locked_at)
            except RuleViolation as e:
                self.log.warning("refused", device=origin, input=type(inp).__name__, who=who, error=str(e))
                if locked_at is not None and origin is not None and not isinstance(inp, I.StartRefused):
                    refused = I.StartRefused(origin, locked_at, e.section, e.message)
                    await self.feed(refused, origin, seen=seen, locked_at=locked_at)
                return None
            except JournalError as e:
                # Not journalled, so it did not happen yet (JournaledTable rebuilt the table from
                # the file): the same input again once the wait is over, nothing dropped; what
                # comes after it waits behind it (journal_outage.py).
                await self.outage.failed(e, type(inp).__name__, origin)

    async def step(
        self,
        inp: I.Input,
        origin: str | None,
        who: str | None,
        seen: Seen | None = None,
        taken_by: dict[str, str] | None = None,
        locked_at: int | None = None,
    ) -> Step:
        """Core decides, journal commits, then the effects. Raises what the core or journal raise."""
        assert self.jt is not None
        if shoe_failed(self.table) and isinstance(inp, I.RoundOpened | I.WildRoundOpened):
            # The core has no input for a failed shoe; the shell refuses the round itself.
            section = f"{self.table.chapter}.7(a)"
            raise RuleViolation(section, "the dealing shoe has failed; dealing is stopped")
        if isinstance(inp, I.DeviceGap) and inp.check:
            # A card is named only when its very draw is face up at the table (draws.py).
            inp = dataclasses.replace(inp, check=self.draws.named(inp.check))
        draw = draw_of(seen) if isinstance(inp, I.CardDrawn) else None
        self.draws.before(draw)
        before = self.table.in_round
        last = self.jt.journal.last_seq
        # Journalled (committed, in the journal's thread) before any effect.
        began = time.perf_counter()
        now = self.wall()
        lead = (locked_at_start(origin, locked_at, now),) if locked_at is not None and origin else ()
        step = await self.jt.handle_async(inp, now, self._writer, seen, taken_by, lead)
        self.draws.after(draw, step.events)
        if step.events:
            self.metrics.committed(time.perf_counter() - began, ((e.kind, e.payload) for e in step.events))
        # Effects first, then the bookkeeping: the lock after Start Game is the past-posting window
        # (687a.9(b)), so nothing that is not an effect (log lines, telemetry) goes before it.
        for cmd in step.commands:
            await self._carry_out(cmd)
        await self._follow_ups(step, was_in_round=before)
        if self.outbox.unsent:
            # Let the senders put what was just queued on the wire before the bookkeeping below
            # (one turn of the loop): the lock's write is not kept waiting by log lines.
            await asyncio.sleep(0)
        wrote = bool(step.events) or self.jt.journal.last_seq != last
        if wrote:  # the journal took a commit: an outage under way is over
            self.outage.committed()
        if step.events:
            self.steps += 1
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
            self.changed()
        else:
            if not isinstance(inp, I.Tick):  # the input's outcome: taken, and nothing to change
                self.log.info("unchanged", device=origin, input=type(inp).__name__, who=who)
            if wrote:  # only the device's counters went in
                self.telemetry.journal_appended()
        return step

    async def _carry_out(self, cmd: CoreCommand) -> None:
        try:
            command = self.translator.device_command(cmd)
        except Untranslatable as e:
            self.log.error("command_not_sent", device=cmd.device, error=str(e))
            return
        done = self.outbox.send(DeviceKind(cmd.device), command)
        if isinstance(command, dc.EjectToShoe):
            self.eject_pending(command.slot, done)

    def eject_pending(self, slot: dev.Slot, done: asyncio.Future[bool]) -> None:
        """An eject queued: reconcile does not send it again while it may still be carried out.
        One the shuffler refused or never got (a busy or lost reply on a loaded line) is forgotten,
        so reconcile sends it again while the shuffler still shows the batch ready: otherwise the
        table would wait for ever for a stack that never came out (``eject_settled`` sends it
        again after a short backoff, Reconciler.eject_settled)."""
        self.eject_sent.add(slot)

        def settled(f: asyncio.Future[bool]) -> None:
            carried_out = not f.cancelled() and f.result()
            if not carried_out:
                self.eject_sent.discard(slot)
            if self.eject_settled is not None and not f.cancelled():
                self.eject_settled(slot, carried_out)

        done.add_done_callback(settled)

    async def _follow_ups(self, step: Step, was_in_round: bool) -> None:
        """Device work the core leaves to the shell, done after the step is journalled."""
        t = self.table
        kinds = {e.kind for e in step.events}
        if "round_started" in kinds and t.blackjack:
            self.outbox.send(DeviceKind.KEYPAD, dc.LockSensors())  # no wagers after Start Game
        rnd = t.round
        dealer_up = any(e.kind == "card_dealt" and e.payload.get("seat") == DEALER for e in step.events)
        if dealer_up and rnd is not None and len(rnd.state.dealer) == 1:
            # The up card is public; a peek device needs its rank before the hole card goes in.
            self.outbox.send(DeviceKind.READER, dc.SetUpCard(rnd.state.dealer[0].rank))
        if was_in_round and not t.in_round:
            self.outbox.send(DeviceKind.READER, dc.ResetReader())
            self.outbox.send(DeviceKind.KEYPAD, dc.UnlockSensors())
        elif "sensors_unlocked" in kinds:  # a refused Start Game: its lock undone (687a.9(b))
            self.outbox.send(DeviceKind.KEYPAD, dc.UnlockSensors())
