"""How far the supervisor has got, and waiting until it has got somewhere.

Tests and the virtual dealer never sleep to let the table catch up: they wait on this instead.
Polls are counted per device (``settle`` asks for one more and waits for it), each handled event
and written device command notifies ``wait_for``, and so does every release of the table's lock
(``StepLock``: ``idle`` holds only while nobody has it); listeners (the console's live updates) are
told after every journalled step and device health change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

from devices import events as dev
from devices.drivers.base import Driver, Wake
from devices.drivers.stub import StubCounterDriver


class StepLock(asyncio.Lock):
    """The table's lock: one step at a time. Letting it go is progress as well: ``idle`` holds
    only while nobody has it, so whoever waits in ``wait_for`` is told when it is let go.

    Not every step is followed by a notice of its own: a step a timer takes (the stall check's
    alarm, the tick, the disk check), a command, a retried eject. Such a step holds the lock across
    its journal commit (fsync, off the event loop); polls that finish meanwhile notify while the
    lock is held, and nothing after would have told a ``settle`` that the table was idle at last:
    it waited for ever, on a busy machine about one stall alarm in three."""

    def __init__(self, condition: asyncio.Condition) -> None:
        super().__init__()
        self._released = condition

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
        async with self._released:
            self._released.notify_all()


class Progress:
    def __init__(
        self,
        events: asyncio.Queue[dev.DeviceEvent],
        drivers: dict[str, Driver],
        unsent: Callable[[], int],
    ) -> None:
        self.events, self.drivers, self.unsent = events, drivers, unsent
        self.condition = asyncio.Condition()
        # The table's lock (the supervisor's ``lock``): its release notifies ``condition``.
        self.lock = StepLock(self.condition)
        self.busy = False  # an event is being handled (or more are queued behind it)
        self.polls_started: dict[str, int] = {}
        self.polls_done: dict[str, int] = {}
        self.read_ok: dict[str, int] = {}  # the number (polls_started) of the last poll that answered
        self.poke: dict[str, Wake] = {}  # each driver's: a poll out of turn (settle)
        self.listeners: list[Callable[[], None]] = []

    def add_device(self, driver: Driver) -> None:
        self.polls_started[driver.name] = self.polls_done[driver.name] = self.read_ok[driver.name] = 0
        self.poke[driver.name] = driver.wake

    async def notify(self) -> None:
        """Something was handled: whoever waits in ``wait_for`` looks again."""
        async with self.condition:
            self.condition.notify_all()

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after every journalled step and device health change (the console's
        live updates); returns the function that removes it. Listeners must not block."""
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def changed(self) -> None:
        for listener in list(self.listeners):
            listener()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds after some poll or event (tests, the virtual dealer)."""
        async with self.condition:
            await self.condition.wait_for(predicate)

    def idle(self) -> bool:
        return not self.busy and self.events.empty() and not self.lock.locked() and self.unsent() == 0

    async def settle(self, *names: str) -> None:
        """Poll ``names`` (every device when none) now, and wait until what they reported is
        handled. The virtual dealer calls this after acting on a device, instead of sleeping."""
        names = names or tuple(self.drivers)
        target = {n: self.polls_started[n] + 1 for n in names}
        for n in names:
            if not isinstance(self.drivers[n], StubCounterDriver):
                self.poke[n].set()
        polled = [n for n in names if not isinstance(self.drivers[n], StubCounterDriver)]
        await self.wait_for(lambda: all(self.polls_done[n] >= target[n] for n in polled) and self.idle())
