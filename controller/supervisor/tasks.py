"""The supervisor's long-running tasks: one per device driver, each with its own restart loop, and
the tick; started and ended together.

Why not a TaskGroup: a TaskGroup cancels every sibling when one task fails; a table must keep
dealing with the keypad when the reader's driver dies, so each device restarts on its own, with
exponential backoff and jitter, and its health says what the floor needs to know.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from structlog.typing import FilteringBoundLogger

from controller.backoff import Backoff
from controller.clock import Clock
from controller.supervisor.device_policy import DevicePolicy
from controller.supervisor.health import DeviceHealth
from controller.supervisor.progress import Progress
from controller.supervisor.step import Stepper
from controller.table import inputs as I
from devices.drivers.base import Driver, PollHooks

SAFE_STOP_S = 2.0  # how long shutdown waits for the keypad to lock its sensors, and for tasks
RESTART_OK_AFTER_S = 30.0  # a driver that ran this long starts its backoff from the beginning again
TICK_S = 60.0


class Tasks:
    def __init__(
        self,
        *,
        clock: Clock,
        rng: random.Random,
        poll_on_demand: bool,
        lock: asyncio.Lock,
        stepper: Stepper,
        policy: DevicePolicy,
        progress: Progress,
        log: FilteringBoundLogger,
    ) -> None:
        self.clock, self.rng, self.poll_on_demand, self.lock = clock, rng, poll_on_demand, lock
        self.stepper, self.policy, self.progress, self.log = stepper, policy, progress, log
        self.crashed: set[str] = set()  # drivers restarted after a crash, not yet answering again
        self._tasks: list[asyncio.Task[None]] = []

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.create_task(work, name=name))

    async def cancel_all(self) -> None:
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

    async def supervise(self, driver: Driver) -> None:
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
                await self.policy.set_health(driver.name, DeviceHealth.FAULT)
                self.crashed.add(driver.name)
                with contextlib.suppress(Exception):
                    await driver.close()
                await self.clock.sleep(delay)

    async def _poll_loop(self, driver: Driver) -> None:
        """The driver's own poll loop (Driver.run, the only one), followed by the supervisor."""
        await driver.run(_Followed(self, driver.name), on_demand=self.poll_on_demand)

    async def every(self, seconds: float, work: Callable[[], Awaitable[None]]) -> None:
        """``work`` every ``seconds`` of the clock, under the table's lock (one step at a time)."""
        while True:
            await self.clock.sleep(seconds)
            async with self.lock:
                await work()

    async def tick(self) -> None:
        """Time passing with nothing else happening: the core warns of decks about to expire."""
        while True:
            await self.clock.sleep(TICK_S)
            async with self.lock:
                await self.stepper.feed(I.Tick(), origin=None)


class _Followed(PollHooks):
    """What the supervisor hears of a device's poll loop: polls counted (settle waits on them),
    and a device whose driver was restarted after a crash is online again once it answers."""

    def __init__(self, tasks: Tasks, name: str) -> None:
        self.tasks, self.name = tasks, name

    def polling(self) -> None:
        self.tasks.progress.polls_started[self.name] += 1
        self.tasks.stepper.metrics.polling(self.name)

    async def polled(self, ok: bool) -> None:
        tasks = self.tasks
        tasks.stepper.metrics.polled(self.name, ok)
        tasks.progress.polls_done[self.name] += 1
        if ok:  # the settle window waits for a read of the shuffler begun after it opened
            tasks.progress.read_ok[self.name] = tasks.progress.polls_started[self.name]
        await tasks.progress.notify()
        if ok and self.name in tasks.crashed:  # restarted and answering again
            tasks.crashed.discard(self.name)
            await tasks.policy.set_health(self.name, DeviceHealth.ONLINE)
