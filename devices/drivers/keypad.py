"""Progressive keypad with bet sensors, a light per sensor, the meter, Start Game and the
dealer's decision keys (687a.9(b))."""

from __future__ import annotations

from dataclasses import replace

from devices.commands import Command, LockSensors, SetLight, ShowMeter, UnlockSensors
from devices.drivers.registers import RegisterDriver, SeqGuard, Snapshot, moved
from devices.errors import CommandRejected, FrameDecodeError, TransportError
from devices.events import (
    BetSensed,
    ButtonPressed,
    DeviceEvent,
    DeviceGlitch,
    Health,
    Key,
    KeysMissed,
    MeterShown,
    SensorFault,
    SensorsLocked,
)
from devices.profiles import LATCHES, DeviceKind
from devices.rings import new_in_ring, ring_word
from devices.transport.watch_process import Reflex


class KeypadDriver(RegisterDriver):
    kind = DeviceKind.KEYPAD
    commands = (LockSensors, UnlockSensors, SetLight, ShowMeter)
    watch_register = "key_seq"  # a Start Game is seen within the watch's interval (687a.9(b))

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.boxes = self.profile.reg("sensors").count
        self.spots = int(self.config.options.get("spots", self.profile.options.get("spots", 1)))
        self._keys = SeqGuard(self.profile.reg("key_ring").count, self.profile.reg("key_seq").bits)
        self._start_code = self.profile.enum_value("key", Key.START_GAME.value)
        self._lock_words = self._command_words("lock")
        # The key_seq of the look the watch locked at: it counts for a press up to it, no later one.
        self.reflexed: int | None = None
        # The driver wrote unlock since its last full poll: the locked flag that poll read is
        # stale (on an RTU line, a poll is a tenth of a second apart and the look reads no flag).
        self._unlocked = False
        # The profile says the device freezes its own sensors at the press (687a.9(b), the window
        # zero). Trusted for the looks on a shared line, never for the lock: a press the poll reads
        # with the sensors open is locked at once all the same, and said once (``_did_not_latch``).
        self.latches = bool(self.profile.options.get(LATCHES, False))
        self._said_did_not_latch = False

    # -- the reflex: the sensors locked at Start Game, before the table decides (687a.9(b)) -------
    # Locking can only stop wagers, never take or pay one, so it need not wait for the journal:
    # the window is then the driver's (the watch's interval and two round trips), not the disk's
    # flush or the event loop's. The table decides after; a refusal unlocks (controller/table/
    # sensors.py). A keypad that latches on Start Game by itself is left to do so.

    def reflex(self) -> Reflex:
        """For the TCP watch's process: a Start Game among the keys after the last one taken in,
        with the sensors open, locks them with one write on the watch's own connection, before
        the table hears of the press."""
        start, _ = self._span
        ring = self.profile.reg("key_ring")
        address, values = self._lock_words
        return Reflex(ring_at=ring.address - start, ring_count=ring.count, trigger=self._start_code,
                      guard_at=self.profile.reg("locked").address - start,
                      address=address, values=tuple(values))  # fmt: skip

    def watch_trusted(self) -> int | None:
        return self._keys.trusted

    def watch_moved(self, word: int, locked: bool) -> None:
        if locked:
            self.reflexed = word

    async def line_moved(self, word: int) -> None:
        """On an RTU line: the key counter moved past the last poll with the sensors open. The
        keys new since then are read (the ring's one word for one key: the line's floor) and a
        Start Game among them locks the sensors at once, each request urgent, ahead of the other
        devices' polls waiting for the line. A failed lock is left to the full poll that follows
        (``_locked_for``), as the TCP watch's is."""
        trusted = self._keys.trusted
        if trusted is None or self._prev is None or self.reflexed == word or self.latches:
            # A latching keypad froze its sensors at the press: no line time for a redundant lock.
            # Should it not have, the full poll that follows the look at once locks them.
            return
        if self._prev["locked"][0] and not self._unlocked:  # a round in play: not this press's
            return
        ring = self.profile.reg("key_ring")
        news, _ = new_in_ring(trusted, word, ring.count)
        try:
            if len(news) == 1:
                keys = await self.read_urgent(ring.address + (news[0] - 1) % ring.count, 1)
            else:
                whole = await self.read_urgent(ring.address, ring.count)
                keys = [ring_word(whole, s) for s in news]
            if self._start_code not in keys:
                return
            await self._command("lock", urgent=True)
        except (TransportError, CommandRejected) as exc:
            self.log.warning("reflex_lock_failed", error=str(exc))
            return
        self.reflexed = word

    async def _poll(self) -> None:
        if self.health in (Health.STARTING, Health.OFFLINE):
            self._said_did_not_latch = False  # the device online afresh (a new connection): said again
        # Locked before this poll's keys, as far as the driver knows: the last poll's flag, unless
        # the driver has written unlock since (the round voided or refused). A latching keypad's
        # press then reads locked, and is the press that locked them (journalled as the lock, so a
        # refusal unlocks them again), not a press in a round still in play.
        was_locked = self._prev is not None and bool(self._prev["locked"][0]) and not self._unlocked
        self._unlocked = False  # before the read: an unlock written meanwhile is kept in mind
        words = await self.read_block()
        events = self.decode(words)
        for i, ev in enumerate(events):
            if isinstance(ev, ButtonPressed) and ev.key is Key.START_GAME:
                events[i] = await self._locked_for(ev, was_locked)
                break
        for ev in events:
            self.emit(ev)

    async def _locked_for(self, press: ButtonPressed, was_locked: bool) -> ButtonPressed:
        """A Start Game read by the full poll: locked at once if the sensors are still open (no
        watch, or the watch missed it), and marked ``locked`` when this press left them locked:
        by the watch's reflex, by this write, or by the device's own latch. Sensors locked
        already before it (a round in play, the shutdown's lock) are not this press's."""
        assert self._prev is not None  # decoded just now
        reflexed, self.reflexed = self.reflexed, None
        if reflexed is not None and moved(press.sequence, reflexed, self._keys.bits) is None:
            # The watch locked for a word before this press (its ``moved`` told after the poll
            # that took that press): its lock, if the sensors still hold it, is not this press's.
            reflexed = None
        if self._prev["locked"][0]:
            if reflexed is not None:  # the watch's lock, not the device's latch
                self._did_not_latch(press)
            return replace(press, locked=not was_locked or reflexed is not None)
        self._did_not_latch(press)
        try:
            await self._command("lock", urgent=True)  # ahead of the other devices' polls waiting
        except CommandRejected as exc:  # the table's own lock after its decision is the fallback
            self.log.warning("reflex_lock_failed", error=str(exc))
            return press
        return replace(press, locked=True)

    def _did_not_latch(self, press: ButtonPressed) -> None:
        """A keypad whose profile says it latches left its sensors open at a Start Game: the
        config is not trusted blindly, the driver locks them as for any keypad (687a.9(b)), and a
        mis-configured device is said once a connection, not once a round."""
        if self.latches and not self._said_did_not_latch:
            self._said_did_not_latch = True
            self.log.warning("keypad_did_not_latch", key_seq=press.sequence, section="687a.9(b)")

    def _command_words(self, name: str) -> tuple[int, list[int]]:
        spec = self.profile.reg("command")
        return spec.address, [self.profile.commands[name]] + [0] * (spec.count - 1)

    def counters(self, snap: Snapshot) -> dict[str, int]:
        return {"key_seq": snap["key_seq"][0]}

    def settled(self) -> bool:
        return self._keys.held is None

    def diff(self, prev: Snapshot | None, cur: Snapshot) -> list[DeviceEvent]:
        out: list[DeviceEvent] = []
        for reg, make in (("sensors", BetSensed), ("sensor_faults", SensorFault)):
            for box in range(self.boxes):
                new = cur[reg][box]
                if new >> self.spots:
                    raise FrameDecodeError(f"{self.name}: {reg} of box {box + 1} has unknown bits")
                old = prev[reg][box] if prev else 0
                for spot in range(self.spots):
                    bit = 1 << spot
                    if (new ^ old) & bit:
                        out.append(make(self.name, box + 1, spot + 1, bool(new & bit)))
        locked = bool(cur["locked"][0])
        if prev is None or locked != bool(prev["locked"][0]):
            out.append(SensorsLocked(self.name, locked))
        if prev is None or cur["meter"][0] != prev["meter"][0]:
            out.append(MeterShown(self.name, cur["meter"][0]))
        guard = self._keys
        if guard.trusted is None and "key_seq" in self.baseline:
            guard.trusted = self.baseline["key_seq"]  # read on from what the journal has
        seq_now = cur["key_seq"][0]
        verdict = guard.check(seq_now)
        if verdict is None:
            return out  # the key counter is held back this poll; the sensors are read as ever
        base, n, glitch = verdict
        if glitch is not None:
            # The counter read on from, journalled with the alarm: not raised again at a restart.
            out.append(DeviceGlitch(self.name, "keys", glitch, counters=(("key_seq", base),)))
        ring = cur["key_ring"]
        amounts = cur.get("key_amount")  # a keypad that takes amounts (docs/devices/keypad.md)
        bits = self._keys.bits
        seqs, missed = new_in_ring(base, (base + n) & ((1 << bits) - 1), len(ring), bits)
        if missed:
            out.append(KeysMissed(self.name, missed))
        for seq in seqs:
            name = self.profile.enum_name("key", ring_word(ring, seq))
            try:
                key = Key(name)
            except ValueError:
                raise FrameDecodeError(f"{self.name}: key code names no key") from None
            amount = ring_word(amounts, seq) if amounts is not None else 0
            out.append(ButtonPressed(self.name, key, seq, amount or None))
        guard.commit(seq_now)
        return out

    async def _send(self, command: Command) -> None:
        match command:
            case LockSensors():
                await self._command("lock")
            case UnlockSensors():
                await self._command("unlock")
                self._unlocked = True
            case SetLight(box=box, spot=spot, on=on):
                if not (1 <= box <= self.boxes and 1 <= spot <= self.spots):
                    raise CommandRejected(f"{self.name}: set_light: no sensor {box}/{spot}")
                await self._command("set_light", box, spot, int(on))
            case ShowMeter(amount_cents=amount):
                if not 0 <= amount <= 0xFFFFFFFF:
                    raise CommandRejected(f"{self.name}: show_meter: amount out of range")
                await self._command("show_meter", amount >> 16, amount & 0xFFFF)
