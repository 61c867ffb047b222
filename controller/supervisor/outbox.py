"""The device output path: each device's commands queued in order and written by a sender task
of its own, outside the supervisor's lock.

A command is queued only after the step that caused it is journalled (commit before effect); a
device stuck in its timeout (up to 30 s) then holds up its own commands only, never another
device's events or the keypad's lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from structlog.typing import FilteringBoundLogger

from devices import commands as dc
from devices.drivers.base import Driver, stop_if_cancelling
from devices.errors import CommandRejected
from devices.profiles import DeviceKind

Queued = tuple[dc.Command, asyncio.Future[bool]]


class Outbox:
    def __init__(
        self,
        drivers: dict[str, Driver],
        kinds: dict[str, DeviceKind],
        progress: asyncio.Condition,
        log: FilteringBoundLogger,
    ) -> None:
        self.drivers, self.kinds, self.progress, self.log = drivers, kinds, progress, log
        self.queues: dict[str, asyncio.Queue[Queued]] = {}
        self.unsent = 0  # commands queued or being written; idle() waits for them
        self._collected: list[asyncio.Future[bool]] | None = None  # what command() waits for

    def add_device(self, driver: Driver) -> None:
        self.queues[driver.name] = asyncio.Queue()

    def driver_of(self, kind: DeviceKind) -> Driver | None:
        return next((d for n, d in self.drivers.items() if self.kinds[n] is kind), None)

    def send(self, kind: DeviceKind, command: dc.Command) -> asyncio.Future[bool]:
        """Queue ``command`` for the device of ``kind``; the future says whether it was carried out.
        Called only after the step that caused it is journalled (commit before effect)."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        driver = self.driver_of(kind)
        if driver is None:
            done.set_result(False)
            return done
        self.unsent += 1
        self.queues[driver.name].put_nowait((command, done))
        if self._collected is not None:
            self._collected.append(done)
        return done

    @contextmanager
    def collecting(self, into: list[asyncio.Future[bool]]) -> Iterator[None]:
        """While inside, every command queued is also put ``into`` the list (a person's action
        is answered once its device commands are carried out)."""
        self._collected = into
        try:
            yield
        finally:
            self._collected = None

    async def sender(self, driver: Driver) -> None:
        """Write one device's commands in the order they were queued, outside the supervisor's lock."""
        outbox = self.queues[driver.name]
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
                self.unsent -= 1
                async with self.progress:
                    self.progress.notify_all()
            stop_if_cancelling()

    def cancel_unsent(self) -> None:
        """At stop: what was never written is cancelled, so nobody waits on it for ever."""
        for outbox in self.queues.values():
            while not outbox.empty():
                outbox.get_nowait()[1].cancel()
