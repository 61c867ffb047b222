"""A journal that cannot be written: a halting alarm at once, nothing dropped, resumed by itself.

A commit that fails (a full disk, an I/O error, a file gone read-only) used to be one
``journal_failed`` line and the input dropped: the table carried on as if the card had never been
drawn, and the next card raised an accounting alarm. Now the input that failed is held and tried
again (``Stepper.feed``), with a backoff of half a second up to five, until the journal takes it;
everything after it waits behind it in order (device events in their queue, the devices' own
histories beyond that, which the drivers read on from where the journal stands), so nothing is
lost and nothing is invented. Meanwhile the table is halted with an alarm that is not journalled
(the journal is what fails): the published state, the console, ``/healthz`` and
``tablectl_journal_writable`` say so, and commands are refused at once with the reason. When a
retry commits, the alarm ends by itself and the table goes on. A person's command whose write
fails is refused to them rather than held, and halts the table all the same; with no input held,
the file system is probed on the same backoff until it takes a write. One line when it starts,
one when it ends, never a line per retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from structlog.typing import FilteringBoundLogger

from controller.backoff import Backoff, BackoffPolicy
from controller.journal import JournalError

RETRY = BackoffPolicy(initial_s=0.5, max_s=5.0)
# The free space the journal's file system keeps: below it the appliance warns (the shipped alert
# TablectlJournalDiskLow, docs/metrics.md) while days of records still fit (a busy gaming day is
# ~50,000 records: tens of megabytes with its write-ahead log).
RESERVE_BYTES = 256 * 1024 * 1024
LOW_ACTION = "free space on the journal's disk before it runs out; dealing goes on"
DISK_CHECK_S = 60.0  # how often the table looks at the free space under its journal
ALARM_ID = 0  # the core's alarms count from 1: this one is the shell's, never journalled
FLOOR_ACTION = (
    "free space on the journal's disk, or repair it; the table holds what it was given and "
    "resumes by itself once the journal takes it"
)


class JournalOutage:
    def __init__(
        self,
        *,
        sleep: Callable[[float], Awaitable[None]],
        wall: Callable[[], float],
        changed: Callable[[], None],
        log: FilteringBoundLogger,
    ) -> None:
        self.sleep, self.wall, self.changed, self.log = sleep, wall, changed, log
        self.error: str | None = None  # why the journal cannot be written, while it cannot
        self.section = "journal"  # the regulation section, set by the supervisor for its game
        self.since: float | None = None
        self.low: tuple[int, int] | None = None  # (free, reserve) bytes while under the reserve
        self.retries = 0  # of the outage under way
        self._backoff = Backoff(RETRY)
        # Set by the supervisor: where the journal is (its free space probed), and how a task of
        # the table's is started (the probe, when no input is held to try again).
        self.directory: Path | None = None
        self.spawn: Callable[[Coroutine[Any, Any, None]], object] | None = None
        self._holding = 0  # inputs held and tried again: their commit ends the outage
        self._probing = False

    @property
    def down(self) -> bool:
        return self.error is not None

    async def failed(self, e: JournalError, held: str, device: str | None) -> None:
        """A commit failed: the alarm (said once), then the wait before the same input again."""
        self.began(e, held, device, holding=True)
        self.retries += 1
        self._holding += 1
        try:
            await self.sleep(self._backoff.failed())
        finally:
            self._holding -= 1

    def began(self, e: JournalError, held: str, device: str | None, *, holding: bool) -> None:
        """A commit failed: the halting alarm, said once for the outage. A person's command that
        failed is refused to them, not held (``holding`` False), but halts the table all the
        same; with no input held to try again, the file system is probed instead (a file written,
        synced and removed beside the journal) and the outage ends once that works."""
        if not holding and not self._probing and self.spawn is not None and self.directory is not None:
            self._probing = True
            self.spawn(self._probe(self.directory))
        if self.error is None:
            self.error, self.since, self.retries = str(e), self.wall(), 0
            self.log.error(
                "journal_failed", device=device, held=held, error=self.error, section=self.section,
                action="dealing stops; "
                + ("the input is held and tried again" if holding else "the command is refused")
                + " until the journal takes a write",
            )  # fmt: skip
            self.changed()

    async def _probe(self, directory: Path) -> None:
        try:
            while self.error is not None:
                await self.sleep(self._backoff.failed())
                if (
                    self.error is not None
                    and not self._holding
                    and await asyncio.to_thread(_writable, directory)
                ):
                    self.committed()
        finally:
            self._probing = False

    def committed(self) -> None:
        """A commit went through: an outage under way is over."""
        if self.error is None:
            return
        down_s = self.wall() - (self.since or self.wall())
        self.log.warning("journal_resumed", error=self.error, retries=self.retries, down_s=round(down_s, 3))
        self.error = self.since = None
        self._backoff.succeeded()
        self.changed()

    def disk_checked(self, disk: tuple[int, int] | None) -> None:
        """The journal's file system looked at (every DISK_CHECK_S): under its reserve is a
        warning in the state and one log line, until it is above it again (one line too)."""
        low = disk if disk is not None and disk[0] < disk[1] else None
        if (low is None) == (self.low is None):
            self.low = low
            return
        self.low = low
        if low is not None:
            self.log.warning(
                "journal_disk_low", free_bytes=low[0], reserve_bytes=low[1], section=self.section
            )
        else:
            self.log.info("journal_disk_ok", free_bytes=disk[0] if disk else None)
        self.changed()

    def message(self) -> str:
        return f"the journal cannot be written ({self.error}): dealing is stopped; nothing is dropped"

    def refusal(self, name: str) -> str:
        return f"{self.section}: {name}: {self.message()}; send it again once the journal is back"

    def into(self, snap: dict[str, Any], ask_id: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        """The published state with the outage in it: a halting alarm first, and what the table
        asks for (the floor). ``journal_failed`` says why, or None when the journal is fine."""
        snap["journal_failed"] = self.error
        if self.error is None:
            if self.low is not None:  # a warning: dealing goes on
                free, reserve = (n // (1024 * 1024) for n in self.low)
                warning = {
                    "id": ALARM_ID,
                    "section": self.section,
                    "message": f"the journal's disk has {free} MiB free, under its reserve of {reserve} MiB",
                    "floor_action": LOW_ACTION,
                }
                snap["alarms"] = [warning, *snap.get("alarms", [])]
            return snap
        halt = {"id": ALARM_ID, "section": self.section, "message": self.message()}
        snap["halted"] = [halt, *snap.get("halted", [])]
        snap["alarms"] = [{**halt, "floor_action": FLOOR_ACTION}, *snap.get("alarms", [])]
        ask = {"what": "floor", "alarm": ALARM_ID, "section": self.section, "message": self.message()}
        ask["round"] = snap.get("round", 0)
        snap["asking"] = {**ask, "id": ask_id(ask)}
        return snap


def journal_disk(journal: Path) -> tuple[int, int] | None:
    """(free bytes for the appliance's user, the reserve) on the journal's file system."""
    try:
        st = os.statvfs(journal.parent)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize, RESERVE_BYTES


PROBE_BYTES = 64 * 1024  # what the probe writes beside the journal: more than a step's commit


def _writable(directory: Path) -> bool:
    """Whether the journal's file system takes a write now (written, synced, removed)."""
    probe = directory / f".tablectl-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"\0" * PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
