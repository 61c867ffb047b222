"""Drivers for Modbus devices: poll one register block, diff it against the last good one."""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import ClassVar

from controller.clock import REAL_CLOCK, Clock, RealClock
from devices.config import DeviceConfig, TransportKind
from devices.drivers.base import Driver
from devices.errors import CommandRejected, TransportError
from devices.events import CountersRead, DeviceCondition, DeviceEvent, Health
from devices.transport.block_watch import QUIET_POLL_S, BlockWatch
from devices.transport.modbus import ModbusBus
from devices.transport.watch_process import Reflex

Snapshot = dict[str, list[int]]


class RegisterDriver(Driver):
    # The register a fast watch compares between polls, when the device's ``watch_interval_s`` is
    # set: a move ends the pause (and may set off the driver's ``reflex``).
    watch_register: ClassVar[str | None] = None

    def __init__(
        self,
        config: DeviceConfig,
        bus: ModbusBus,
        *,
        clock: Clock = REAL_CLOCK,
        events: asyncio.Queue[DeviceEvent] | None = None,
    ) -> None:
        super().__init__(config, clock=clock, events=events)
        self.bus = bus
        self.profile = config.profile
        self._span = self.profile.poll_span()
        self._prev: Snapshot | None = None
        self._words: list[int] | None = None  # the block _prev was decoded from
        self._watch: BlockWatch | None = None
        self._moved = False  # the watch saw the watched word move since the pause began
        self._line_watch_s: float | None = None
        every = config.options.get("watch_interval_s")
        watching = self.watch_register is not None and every is not None and every < config.poll_interval_s
        # On Modbus TCP a process of its own reading the whole poll block (BlockWatch), which the
        # polls then take; on a shared RTU line the bus itself, the watched word alone, each look
        # urgent (_watch_line). Only on real time: a virtual clock's table has no wire to watch.
        tcp = bus.endpoint.transport is TransportKind.MODBUS_TCP
        if watching and every is not None and bus.endpoint.transport is TransportKind.MODBUS_RTU:
            self._line_watch_s = float(every)
        real = isinstance(clock, RealClock)
        if watching and tcp and real and every is not None and self.watch_register is not None:
            start, count = self._span
            self._watch = BlockWatch(bus.endpoint, config.device_id, start, count, period_s=float(every),
                                     timeout_s=config.timeout_s,
                                     index=self.profile.reg(self.watch_register).address - start)  # fmt: skip

    async def _poll(self) -> None:
        self.ingest(await self.read_block())

    async def read_block(self) -> list[int]:
        if self._watch is not None:
            return await self._watched_block()
        start, count = self._span
        return await self.bus.read_holding(
            self.config.device_id, start, count,
            timeout_s=self.config.timeout_s, attempts=self.config.retry.read_attempts,
        )  # fmt: skip

    def ingest(self, words: list[int]) -> None:
        """Turn one polled block into events; FrameDecodeError leaves the driver as it was."""
        for ev in self.decode(words):
            self.emit(ev)

    def decode(self, words: list[int]) -> list[DeviceEvent]:
        """The events one polled block makes, worked out before any is emitted: a poll that fails
        to decode half way is dropped whole (FrameDecodeError), and the next good poll is diffed
        against the last good one."""
        if words == self._words and self.settled():
            self._follow()
            return []  # the same block as the last (most polls): nothing moved, nothing to decode
        snap = self.profile.decode_block(self._span[0], words)
        events = self.diff(self._prev, snap)
        if self._prev is None:
            events = self._first_reading(snap) + events
        events += self.conditions(self._prev, snap)
        self._prev, self._words = snap, words
        self._follow()
        return events

    def _follow(self) -> None:
        """What the watch compares its looks with from now on: the block last decoded (sent
        only when it changed, and again to a watch started anew)."""
        if self._watch is not None and self._words is not None:
            self._watch.follow(self._words[self._watch.index], self.watch_trusted())

    def conditions(self, prev: Snapshot | None, cur: Snapshot) -> list[DeviceEvent]:
        """A DeviceCondition for each of the profile's conditions whose bit changed (at the first
        reading: each that holds), whatever the kind of device."""
        out: list[DeviceEvent] = []
        for c in self.profile.conditions.values():
            now = bool(cur[c.name][0])
            if now != (bool(prev[c.name][0]) if prev is not None else False):
                halts = c.halts.value
                out.append(DeviceCondition(self.name, c.name, now, c.message, c.action, halts, c.section))
        return out

    def counters(self, snap: Snapshot) -> dict[str, int]:
        """The counters a restart reads this device on from (see ``Driver.baseline``)."""
        return {}

    def _first_reading(self, snap: Snapshot) -> list[DeviceEvent]:
        """The first reading of a device the journal has no counters of (a fresh journal: the
        first minutes of every gaming day): its counters, to be journalled before any effect.
        Without them a restart took its own first reading as the start, and a burn drawn or a
        shuffle finished while the controller was down was never seen."""
        counters = self.counters(snap)
        if not counters or any(k in self.baseline for k in counters):
            return []
        self.baseline.update(counters)
        return [CountersRead(self.name, tuple(counters.items()))]

    def settled(self) -> bool:
        """Whether the same block again would change nothing: no poll held back for a second
        look (a counter that went backwards, a cover flag), which an unchanged poll settles."""
        return True

    async def watch(self, seconds: float) -> bool:
        """The pause between polls: True as soon as the watched word moved (poll now). On Modbus
        TCP the watch's process looks all along (BlockWatch); on an RTU line the looks go through
        the bus (``_watch_line``); without a watch, a pause."""
        if self._line_watch_s is not None and self._words is not None:
            return await self._watch_line(self._line_watch_s, seconds)
        if self._watch is None or not self._watch.running:
            return await super().watch(seconds)
        if not self._moved and not self._watch.news:
            await self.wake.wait(seconds, self.clock)  # ended early by the watch too (_watch_saw_move)
        moved, self._moved = self._moved, False
        return moved or self._watch.news

    async def _watched_block(self) -> list[int]:
        """A poll's block from the watch's next look (its process started at the first poll, and
        again after it died: said in one line)."""
        assert self._watch is not None
        if not self._watch.running:
            self._watch.start(self._watch_saw_move, self.reflex(), on_told=self.wake.interrupt)
        failure: TransportError | None = None
        for attempt in range(max(1, self.config.retry.read_attempts)):
            try:  # a poll asked for (settle) sees the device as it is now, not as last told
                return await self._watch.read(fresh=self.out_of_turn or attempt > 0)
            except TransportError as exc:
                failure = exc
                if not self._watch.running:  # died meanwhile: the next poll starts another
                    break
        assert failure is not None
        raise failure

    def poll_interval_s(self) -> float:
        """With a watch's process reading the block every few ms and telling every change and
        failure, the full polls only prove it alive: QUIET_POLL_S, or the configured interval
        when that is longer. Not while the device or the watch is failing: a device that stopped
        answering is tried, counted offline and seen back at its own rate, as without a watch."""
        if self._watch is None or not self._watch.running or self.health is not Health.ONLINE:
            return super().poll_interval_s()
        return max(self.config.poll_interval_s, QUIET_POLL_S)

    def reflex(self) -> Reflex | None:
        """The write the watch makes by itself the moment the watched word moves (a keypad's
        sensors locked at Start Game); None: the watch only watches."""
        return None

    def watch_trusted(self) -> int | None:
        """The last sequence number of the watched counter the driver has taken in (the reflex
        acts on entries after it); None: not yet known, no reflex."""
        return None

    def watch_moved(self, word: int, locked: bool) -> None:
        """On the loop, when the watch saw the word move (``locked``: its reflex wrote)."""

    def _watch_saw_move(self, word: int, locked: bool) -> None:
        self.watch_moved(word, locked)
        self._moved = True  # the pause ends and the poll comes at once
        self.wake.interrupt()

    async def _watch_line(self, every: float, seconds: float) -> bool:
        """On a shared RTU line: the watched word alone (a one-register read, the line's floor:
        ~10.6 ms at 19,200 baud 8E1) every ``every`` s for ``seconds``, each look an urgent request
        (devices/transport/line_turns.py), so it waits only for the request already on the wire,
        never behind the other devices' polls. A move is handed to ``line_moved`` (a keypad's
        reflex) and the full poll comes at once. A look that fails waits out the time: the full
        poll reads the device, and its health, as ever."""
        assert self.watch_register is not None and self._words is not None
        address = self.profile.reg(self.watch_register).address
        last = self._words[address - self._span[0]]
        end = self.clock.now() + seconds
        while (left := end - self.clock.now()) > 0:
            await self.wake.wait(min(every, left), self.clock)
            if self.wake.is_set() or self.clock.now() >= end:
                return False
            try:
                word = await self.read_urgent(address, 1)
            except TransportError:
                await self.wake.wait(max(0.0, end - self.clock.now()), self.clock)
                return False
            if word[0] != last:
                await self.line_moved(word[0])
                return True
        return False

    async def read_urgent(self, address: int, count: int) -> list[int]:
        """A read ahead of the ordinary requests waiting for the line (the watch's, the reflex's)."""
        return await self.bus.read_holding(
            self.config.device_id, address, count, timeout_s=self.config.timeout_s, urgent=True
        )

    async def line_moved(self, word: int) -> None:
        """On an RTU line, the moment the watched word moved (read by ``_watch_line``): what may be
        done before the full poll (a keypad's reflex), as ``reflex`` is in a TCP watch's process."""

    async def close(self) -> None:
        if self._watch is not None:
            await self._watch.stop()

    @abstractmethod
    def diff(self, prev: Snapshot | None, cur: Snapshot) -> list[DeviceEvent]: ...

    async def _command(self, name: str, *args: int, urgent: bool = False) -> None:
        spec = self.profile.reg("command")
        values = [self.profile.commands[name], *args]
        if len(values) > spec.count:
            raise CommandRejected(f"{self.name}: {name} needs {len(values)} command registers")
        values += [0] * (spec.count - len(values))
        try:
            await self.bus.write_registers(
                self.config.device_id, spec.address, values,
                timeout_s=self.config.timeout_s, attempts=self.config.retry.write_attempts, urgent=urgent,
            )  # fmt: skip
        except TransportError as exc:
            raise CommandRejected(f"{self.name}: {name} not carried out: {exc}") from None


def moved(last: int, cur: int, bits: int = 16) -> int | None:
    """How far a counter of ``bits`` bits (its profile's width) moved forward from ``last``; None
    when it went backwards (a move of half the counter's range or more cannot be draws between
    two polls)."""
    n = (cur - last) & ((1 << bits) - 1)
    return None if n >= 1 << (bits - 1) else n


SETTLE_POLLS = 3  # polls a disagreement must hold before it is decided (a glitch is shorter)


class SeqGuard:
    """A device's event counter (keys pressed, cards inserted) read up to the last value the
    controller trusted. A value that goes backwards, or jumps past the device's history between
    two polls of a running controller, is held back instead of read, for up to SETTLE_POLLS polls
    that follow each other: back in line with the trusted value within them, it was a glitch;
    still there after them, the device was reset and it is the new baseline (a jump forward that
    holds is real entries, more than the history keeps). Either way the caller reports one glitch
    and reads nothing twice."""

    def __init__(self, ring: int, bits: int = 16) -> None:
        self.ring = ring
        self.bits = bits  # the counter's width, as its profile declares it
        self.trusted: int | None = None
        self.live = False  # polled since the driver started (a jump then cannot be real)
        self.held: tuple[int, str] | None = None  # the first value of the run held back, and why
        self.held_last: int | None = None
        self.held_polls = 0

    def _why(self, was: int, cur: int) -> str | None:
        n = moved(was, cur, self.bits)
        if n is None:
            return f"the counter went backwards ({was} to {cur})"
        if self.live and n > self.ring:
            return f"the counter jumped by {n}, past the device's history of {self.ring}"
        return None

    def check(self, cur: int) -> tuple[int, int, str | None] | None:
        """(the value to read from, how many new entries, a glitch to report), or None to hold
        this poll back. Nothing changes until ``commit``."""
        if self.trusted is None:
            return cur, 0, None
        if self._why(self.trusted, cur) is None:
            polls = "one poll" if self.held_polls == 1 else f"{self.held_polls} polls"
            glitch = f"{self.held[1]} for {polls}" if self.held else None
            return self.trusted, moved(self.trusted, cur, self.bits) or 0, glitch
        if self.held is None or self.held_last is None or self._why(self.held_last, cur) is not None:
            self.held, self.held_polls = (cur, self._why(self.trusted, cur) or ""), 0
        self.held_last = cur
        self.held_polls += 1
        if self.held_polls < SETTLE_POLLS:
            return None
        first, why = self.held
        if moved(self.trusted, first, self.bits) is not None:
            # A jump forward that held: real entries, more than the history keeps. Read the
            # history; the caller reports the ones that fell out of it (one alarm).
            self.live = False
            return self.trusted, moved(self.trusted, cur, self.bits) or 0, None
        return first, moved(first, cur, self.bits) or 0, f"{why}: the device was reset"

    def commit(self, cur: int) -> None:
        self.trusted, self.held, self.held_last, self.held_polls, self.live = cur, None, None, 0, True
