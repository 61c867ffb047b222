"""Device observations taken in the order they happened: the settle window at a shoe change.

Each device is polled at its own rate (on the shipped tables the shoe every 50 ms, the shuffler
every 100 ms), so what two devices did in one order can reach the table in the other. At a shoe
change that matters: the used batch goes back into its shuffler slot at the moment the new batch
goes into the shoe (put there by the dealer, or by a direct-insert shuffler's eject), and a burn
or a Start Game read before the shuffler's next poll would find two batches in the discard rack
(673a.3(b)(5), 665a.3(b)(5), 685a.3(b)(5)): a false alarm, and a key refused and used up.

The devices' own sequence numbers cannot order them: each counts its own events and none shares a
clock with another. So what would look wrong only because the shuffler has not been read since is
held, for a bounded time. While the table has the new batch in the shoe and the used one still in
the discard rack, the first draw or key of another device opens a window: the shuffler is polled
at once (out of turn), and the window closes at the first poll of the shuffler, begun after it
opened, that has answered, been handled and shows the used batch back in its slot (a shuffler
may take a moment to sense cards put into it: a read that still shows the slot empty waits for
the next), or once ``SETTLE_READS`` shuffler polls begun after it opened have finished without
showing it (answered or not), whichever is first: decided by what the shuffler showed, never by a
guess of how long a poll takes on a busy machine. ``SETTLE_S`` on the table's clock is only a
backstop for a shuffler not polled at all (its driver restarting). Then what was held is handled,
in the order it was read, against what the shuffler said. Meanwhile every other device's events
wait behind it (each device's events keep their order); the shuffler's go straight on, being what
the window waits for.

So a legitimate order raises nothing and refuses nothing, and a real wrong batch (the used batch
not back in its slot) is still alarmed, at the third shuffler poll after the draw at the latest
(300 ms at the shipped 100 ms poll; a shuffler that does not answer, its polls' timeouts).
One window a shoe: once one has closed with the batch still in the rack, the table's alarm
stands and nothing more is held until the rack is clear, so cards are never delayed one by one.

Nothing held is journalled or acted on, and its device's counters are not marked as seen: a
controller killed within the window reads it again from the device (the shoe's and the keypad's
rings) when it restarts, and decides it then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from structlog.typing import FilteringBoundLogger

from controller.clock import Clock
from controller.supervisor.progress import Progress
from controller.table.core import Table
from controller.table.shoe import other_batch_in_rack
from devices import events as dev

# The shuffler's reads decide a window, not the clock: it closes at the first read (a poll begun
# after it opened, answered and handled) that shows the used batch back, or once SETTLE_READS polls
# begun after it opened have finished without showing it (answered or not: a shuffler that does
# not answer is decided by its own failed polls, which also raise its own alarm). On a busy machine
# a poll takes what it takes; a fixed time (it was 0.5 s) closed windows before the shuffler had
# been read at all and alarmed a batch that was back in its slot.
SETTLE_READS = 3
# Only a backstop, never reached while the shuffler is polled: nothing is held for ever if its
# driver is not polling at all (restarting after a crash). On the table's clock.
SETTLE_S = 10.0
# What opens a window: what the core would alarm on or refuse for the rack (a burn or a card; a
# key, Start Game among them). Anything else waits behind an open window but opens none.
_OPENS = (dev.CardDrawn, dev.ButtonPressed)


@dataclass(frozen=True, slots=True)
class Settled(dev.DeviceEvent):
    """A window may close (put on the event queue behind the shuffler's events, never sent by a
    device): ``by`` is ``shuffler_read`` or ``deadline``."""

    window: int
    by: str


def rack_in_doubt(table: Table) -> bool:
    """A batch is in the shoe and the other one still in the discard rack: the shuffler may
    already hold it back in its slot without the table having read it yet."""
    return (
        not table.manual
        and not table.shuffler_out_of_order
        and table.shoe_back is not None
        and other_batch_in_rack(table) is not None
    )


class SettleWindow:
    def __init__(
        self,
        *,
        shuffler: str,
        clock: Clock,
        events: asyncio.Queue[dev.DeviceEvent],
        progress: Progress,
        log: FilteringBoundLogger,
        settle_s: float = SETTLE_S,
        later_reads: bool = True,
    ) -> None:
        self.shuffler, self.clock, self.events, self.progress = shuffler, clock, events, progress
        self.log, self.settle_s = log, settle_s
        # Whether a read that still shows the slot empty waits for the shuffler's next (at its own
        # rate). Not where nothing polls by itself (on a virtual clock the dealer says when): there
        # the next read would never come, and the first decides.
        self.later_reads = later_reads
        self.held: list[dev.DeviceEvent] = []
        self.window = 0  # the number of the window open (or last open)
        self.spent = False  # a window closed at this shoe with the rack still in doubt
        self._since = 0.0
        self._after_poll = 0  # a successful shuffler poll that began after this one closes it
        self._opened_at_poll = 0  # the shuffler's polls_started when the window opened
        self._opened = asyncio.Event()

    @property
    def holding(self) -> bool:
        return bool(self.held)

    def sort(self, event: dev.DeviceEvent, in_doubt: Callable[[], bool]) -> list[dev.DeviceEvent]:
        """The events to handle now, in the order they were read: ``event`` itself, nothing (it
        is held), or, when ``event`` closes the window, everything held."""
        if isinstance(event, Settled):
            if not self.held or event.window != self.window:
                return []
            if event.by == "shuffler_read" and self.later_reads and in_doubt() and self._polls_left() > 0:
                # Read, but the slot does not show the used batch back yet: a shuffler may take a
                # moment to sense cards put into it. Its next read decides, within SETTLE_READS.
                self._after_poll = self.progress.polls_started[self.shuffler]
                self._opened.set()
                return []
            return self._close(event.by)
        if self.held:
            if event.device == self.shuffler:
                return [event]
            self.held.append(event)
            return []
        if event.device == self.shuffler or not isinstance(event, _OPENS):
            return [event]
        if not in_doubt():
            self.spent = False
            return [event]
        if self.spent:
            return [event]  # decided at this shoe already: the table's alarm stands
        self._open(event)
        return []

    def _open(self, event: dev.DeviceEvent) -> None:
        self.window += 1
        self.held = [event]
        self._since = self.clock.now()
        self._after_poll = self._opened_at_poll = self.progress.polls_started[self.shuffler]
        self.progress.poke[self.shuffler].set()  # read the shuffler now, not at its next turn
        self._opened.set()

    def _close(self, by: str) -> list[dev.DeviceEvent]:
        held, self.held = self.held, []
        self.spent = True  # reset by the first event that finds the rack clear
        self.log.info("settle_window", by=by, held=len(held), held_s=round(self.clock.now() - self._since, 3))
        return held

    def _polls_left(self) -> int:
        """Shuffler polls, begun after the window opened, still to finish before it is decided."""
        return SETTLE_READS - (self.progress.polls_done[self.shuffler] - self._opened_at_poll)

    def _read_since(self, window: int) -> bool:
        return self.window != window or self.progress.read_ok[self.shuffler] > self._after_poll

    def _silent_since(self, window: int) -> bool:
        """SETTLE_READS polls begun after the window opened have finished, none answered since the
        last read that showed the slot empty: the shuffler does not answer."""
        return self.window == window and self._polls_left() <= 0

    async def _until(self, at: float) -> None:
        """Until ``at`` on the clock, however late this starts."""
        while (left := at - self.clock.now()) > 0:
            await self.clock.sleep(left)

    async def run(self) -> None:
        """Closes each window: once the shuffler has been read after it opened, or at its
        deadline. The marker goes on the event queue after what that poll reported."""
        while True:
            await self._opened.wait()
            self._opened.clear()
            window = self.window
            try:
                by = await self._closed_by(window)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # what is held is never left stuck: it is handed on now
                self.log.error("settle_failed", error=f"{type(e).__name__}: {e}")
                by = "error"
            await self.events.put(Settled(self.shuffler, window, by))

    async def _closed_by(self, window: int) -> str:
        read = asyncio.ensure_future(self.progress.wait_for(partial(self._read_since, window)))
        silent = asyncio.ensure_future(self.progress.wait_for(partial(self._silent_since, window)))
        deadline = asyncio.ensure_future(self._until(self._since + self.settle_s))
        try:
            await asyncio.wait((read, silent, deadline), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for f in (read, silent, deadline):
                f.cancel()
        if read.done() and not read.cancelled():
            return "shuffler_read"
        return "shuffler_silent" if silent.done() and not silent.cancelled() else "deadline"
