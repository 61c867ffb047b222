"""What every driver shares: health tracking, the event queue, the run loop and its schedule."""

from __future__ import annotations

import asyncio
import collections
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import ClassVar

import structlog

from controller.clock import REAL_CLOCK, Clock
from devices.commands import Command
from devices.config import DeviceConfig
from devices.errors import (
    BadResponse,
    CommandRejected,
    DeviceError,
    FrameDecodeError,
    TransportError,
)
from devices.events import (
    DeviceDegraded,
    DeviceEvent,
    DeviceOffline,
    DeviceOnline,
    FrameError,
    Health,
)
from devices.profiles import DeviceKind


def stop_if_cancelling() -> None:
    """Raise the cancellation a library swallowed. pymodbus (and aiomqtt) await
    ``asyncio.wait_for``, which on Python 3.11 returns the reply instead of raising when a cancel
    lands as the reply arrives; a loop that carried on would outlive the shutdown that cancelled it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class PollSchedule:
    """Polls at a fixed rate, not with a fixed gap after each poll: the period stays the poll
    interval however long a poll took, and that period bounds how late a key press or a bet is
    seen (the past-posting window of 687a.9(b)). After an overrun the next poll is due at once;
    it never bursts to catch up."""

    def __init__(self, clock: Clock, interval_s: float) -> None:
        self.clock, self.interval_s = clock, interval_s
        self.due = clock.now()

    def wait_s(self) -> float:
        """Seconds until the next poll is due, counted from the last one that was due."""
        now = self.clock.now()
        self.due = max(self.due + self.interval_s, now)
        return self.due - now

    def restart(self) -> None:
        """A poll out of turn: the schedule starts again from now."""
        self.due = self.clock.now()


# Events waiting for the supervisor. Far above any burst a table makes (a full shoe's draws with
# their keys are a few hundred); past it drivers wait (see Driver.emit), they never drop an event.
EVENT_QUEUE_MAX = 4096


class Driver(ABC):
    """A device driver.

    ``run()`` polls or listens until cancelled and never raises for a device problem: wire
    failures become health events (DeviceDegraded / DeviceOffline / DeviceOnline) and broken
    frames become FrameError events. Events go to ``self.events`` (an asyncio.Queue, which the
    supervisor may pass in to merge several drivers); ``stream()`` iterates over it.
    ``send(command)`` raises CommandRejected with one line when a command cannot be carried out.
    """

    kind: ClassVar[DeviceKind]
    commands: ClassVar[tuple[type[Command], ...]] = ()

    def __init__(
        self,
        config: DeviceConfig,
        *,
        clock: Clock = REAL_CLOCK,
        events: asyncio.Queue[DeviceEvent] | None = None,
    ) -> None:
        if config.kind is not self.kind:
            raise ValueError(f"{config.name}: a {config.kind} device needs a {config.kind} driver")
        self.config = config
        self.name = config.name
        self.clock = clock
        self.events: asyncio.Queue[DeviceEvent] = (
            events if events is not None else asyncio.Queue(EVENT_QUEUE_MAX)
        )
        self._held_events: collections.deque[DeviceEvent] = collections.deque()
        self._frame_errors_held = 0
        self.health = Health.STARTING
        self.last_error = ""
        self._failures_in_row = 0
        # What the controller last acted on of this device's counters (from the journal): the
        # first poll is diffed against it, so what happened while the controller was down is seen.
        self.baseline: dict[str, int] = {}
        self.log = structlog.get_logger("devices").bind(device=config.name, kind=config.kind.value)

    # -- events and health ----------------------------------------------------------------------

    def emit(self, event: DeviceEvent) -> None:
        # Log the kind of event only: its fields may hold a card or a reader answer.
        self.log.debug("device_event", kind_of_event=type(event).__name__)
        if self._held_events or self.events.full():
            # The queue is bounded: a device event is never dropped, it waits here and the driver
            # polls no more until it is taken (flush_events), so the device's own ring holds the
            # rest. A frame error is only counted: it says nothing the next one would not.
            if isinstance(event, FrameError):
                self._frame_errors_held += event.count
            else:
                self._held_events.append(event)
            return
        self.events.put_nowait(event)

    async def flush_events(self) -> None:
        """Hand on what emit() held back, waiting for room: called before the next poll."""
        while self._held_events:
            await self.events.put(self._held_events.popleft())
        if self._frame_errors_held:
            count, self._frame_errors_held = self._frame_errors_held, 0
            await self.events.put(FrameError(self.name, "frame errors while the event queue was full", count))

    async def stream(self) -> AsyncIterator[DeviceEvent]:
        while True:
            yield await self.events.get()

    def _ok(self) -> None:
        self._failures_in_row = 0
        if self.health is not Health.ONLINE:
            self.health = Health.ONLINE
            self.log.info("online")
            self.emit(DeviceOnline(self.name))

    def _failed(self, exc: DeviceError) -> None:
        self._failures_in_row += 1
        self.last_error = str(exc)
        if isinstance(exc, FrameDecodeError | BadResponse):
            self.emit(FrameError(self.name, str(exc), getattr(exc, "count", 1)))
        if self._failures_in_row >= self.config.offline_after:
            if self.health is not Health.OFFLINE:
                self.health = Health.OFFLINE
                self.log.warning("offline", error=str(exc))
                self.emit(DeviceOffline(self.name, str(exc)))
        elif self.health in (Health.ONLINE, Health.STARTING):
            self.health = Health.DEGRADED
            self.log.warning("degraded", error=str(exc))
            self.emit(DeviceDegraded(self.name, str(exc)))

    # -- the loop -------------------------------------------------------------------------------

    async def poll_once(self) -> bool:
        """One poll (or one read of the link). True when it succeeded."""
        try:
            await self._poll()
        except (TransportError, FrameDecodeError) as exc:
            self._failed(exc)
            return False
        self._ok()
        return True

    @abstractmethod
    async def _poll(self) -> None: ...

    async def run(self) -> None:
        try:
            schedule = PollSchedule(self.clock, self.config.poll_interval_s)
            while True:
                await self.poll_once()
                stop_if_cancelling()
                await self.flush_events()
                await self.clock.sleep(schedule.wait_s())
        finally:
            await self.close()

    async def close(self) -> None:  # noqa: B027 - most drivers hold nothing of their own
        """Release the link (a shared Modbus bus is closed by its registry, not here)."""

    async def send(self, command: Command) -> None:
        if not isinstance(command, self.commands):
            what = type(command).__name__
            raise CommandRejected(f"{self.name}: a {self.kind} does not take {what}")
        await self._send(command)

    @abstractmethod
    async def _send(self, command: Command) -> None: ...
