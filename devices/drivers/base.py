"""What every driver shares: health tracking, the event queue, the one poll loop and its schedule."""

from __future__ import annotations

import asyncio
import collections
import threading
from abc import ABC, abstractmethod
from typing import ClassVar

import structlog

from controller.clock import REAL_CLOCK, Clock, RealClock
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

    def early(self) -> None:
        """The pause ended before the poll was due (a watched word moved and was polled at once):
        the poll that was due stays due, so the full polls keep their rate."""
        self.due -= self.interval_s


def _wake_future(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Wake:
    """A poll out of turn (the supervisor's ``settle``, a test): ends the loop's pause at once (an
    RTU line's watch between its looks too). One future per pause, woken by the poke or by a timer,
    whichever comes first: no task per pause, which matters at a fast watch's rate."""

    def __init__(self) -> None:
        self.flag = threading.Event()
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self.flag.set()
        self.interrupt()

    def interrupt(self) -> None:
        """End the pause now without a poll out of turn (a watch saw its word move: the poll is
        early, and the schedule keeps its rate)."""
        if self._waiter is not None:
            _wake_future(self._waiter)

    def is_set(self) -> bool:
        return self.flag.is_set()

    def clear(self) -> None:
        self.flag.clear()

    async def wait(self, seconds: float | None, clock: Clock) -> None:
        """Until set, or ``seconds`` on ``clock`` have passed (None: until set)."""
        if self.flag.is_set():
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer: asyncio.TimerHandle | None = None
        sleeper: asyncio.Future[None] | None = None
        if seconds is not None and isinstance(clock, RealClock):
            timer = loop.call_later(seconds, _wake_future, waiter)  # the loop's time is the clock's
        elif seconds is not None:
            sleeper = asyncio.ensure_future(clock.sleep(seconds))
            sleeper.add_done_callback(lambda _: _wake_future(waiter))
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
            if sleeper is not None:
                sleeper.cancel()


class PollHooks:
    """How the owner of a driver's poll loop follows it. The defaults run a driver on its own
    (tests, tools); the supervisor counts polls for ``settle`` and marks a restarted device
    online again."""

    def polling(self) -> None:
        """A poll is about to start."""

    async def polled(self, ok: bool) -> None:
        """It ended; ``ok`` is False when it failed (or raised: a driver bug, which propagates)."""


# Events waiting for the supervisor. Far above any burst a table makes (a full shoe's draws with
# their keys are a few hundred); past it drivers wait (see Driver.emit), they never drop an event.
EVENT_QUEUE_MAX = 4096


class Driver(ABC):
    """A device driver.

    ``run()`` polls or listens until cancelled and never raises for a device problem: wire
    failures become health events (DeviceDegraded / DeviceOffline / DeviceOnline) and broken
    frames become FrameError events. Events go to ``self.events`` (an asyncio.Queue, which the
    supervisor passes in to merge every driver of the table).
    ``send(command)`` raises CommandRejected with one line when a command cannot be carried out.
    """

    kind: ClassVar[DeviceKind]
    commands: ClassVar[tuple[type[Command], ...]] = ()
    # A driver that waits on its line for data (a frame device) reads on at once after data.
    reads_a_stream: ClassVar[bool] = False

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
        self.wake = Wake()
        self.out_of_turn = False  # the poll under way was asked for (``wake``), not scheduled
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

    async def watch(self, seconds: float) -> bool:
        """The pause between two polls, for a driver that watches a word between them (the
        keypad's key counter): True as soon as the word moved (poll now), False when the time is
        up or ``wake`` was set. Drivers without a watch just wait."""
        await self.wake.wait(seconds, self.clock)
        return False

    async def run(self, hooks: PollHooks | None = None, *, on_demand: bool = False) -> None:
        """The one poll loop of every driver, until cancelled: poll at a fixed rate (PollSchedule),
        hand on the events, pause. ``on_demand``: poll only when ``wake`` is set (a virtual clock's
        table, where time passing wakes nothing). A frame device reads on at once after data and
        waits out its interval after a failure. Between polls a driver may watch a word (the
        keypad's fast key watch): the pause ends when it moves, and the poll comes at once."""
        hooks = hooks or PollHooks()
        schedule = PollSchedule(self.clock, self.poll_interval_s())
        wake = self.wake
        try:
            while True:
                hooks.polling()
                ok = False
                try:
                    ok = await self.poll_once()
                finally:  # a poll that crashed is over too: nobody waits on it for ever
                    await hooks.polled(ok)
                stop_if_cancelling()
                await self.flush_events()  # a full event queue holds this device, not the others
                if self.reads_a_stream and ok:
                    continue
                if on_demand:
                    await wake.wait(None, self.clock)
                elif not wake.is_set():
                    schedule.interval_s = self.poll_interval_s()
                    seconds = schedule.wait_s()
                    if await (self.watch(seconds) if ok else wake.wait(seconds, self.clock)):
                        schedule.early()
                self.out_of_turn = wake.is_set()
                if self.out_of_turn:  # polled out of turn
                    schedule.restart()
                wake.clear()
        finally:
            await self.close()

    def poll_interval_s(self) -> float:
        """The full polls' period from now: the configured one, unless something else watches
        the device between them (see RegisterDriver)."""
        return self.config.poll_interval_s

    async def close(self) -> None:  # noqa: B027 - most drivers hold nothing of their own
        """Release the link (a shared Modbus bus is closed by its registry, not here)."""

    async def send(self, command: Command) -> None:
        if not isinstance(command, self.commands):
            what = type(command).__name__
            raise CommandRejected(f"{self.name}: a {self.kind} does not take {what}")
        await self._send(command)

    @abstractmethod
    async def _send(self, command: Command) -> None: ...
