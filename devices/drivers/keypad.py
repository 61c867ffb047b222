"""Progressive keypad with bet sensors, a light per sensor, the meter, Start Game and the
dealer's decision keys (687a.9(b))."""

from __future__ import annotations

from devices.commands import Command, LockSensors, SetLight, ShowMeter, UnlockSensors
from devices.drivers.registers import RegisterDriver, SeqGuard, Snapshot, new_in_ring, ring_word
from devices.errors import CommandRejected, FrameDecodeError
from devices.events import (
    BetSensed,
    ButtonPressed,
    DeviceEvent,
    DeviceGlitch,
    Key,
    KeysMissed,
    MeterShown,
    SensorFault,
    SensorsLocked,
)
from devices.profiles import DeviceKind


class KeypadDriver(RegisterDriver):
    kind = DeviceKind.KEYPAD
    commands = (LockSensors, UnlockSensors, SetLight, ShowMeter)
    watch_register = "key_seq"  # a Start Game is seen within the watch's interval (687a.9(b))

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.boxes = self.profile.reg("sensors").count
        self.spots = int(self.config.options.get("spots", self.profile.options.get("spots", 1)))
        self._keys = SeqGuard(self.profile.reg("key_ring").count)

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
        seqs, missed = new_in_ring(base, (base + n) & 0xFFFF, len(ring))
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
            case SetLight(box=box, spot=spot, on=on):
                if not (1 <= box <= self.boxes and 1 <= spot <= self.spots):
                    raise CommandRejected(f"{self.name}: set_light: no sensor {box}/{spot}")
                await self._command("set_light", box, spot, int(on))
            case ShowMeter(amount_cents=amount):
                if not 0 <= amount <= 0xFFFFFFFF:
                    raise CommandRejected(f"{self.name}: show_meter: amount out of range")
                await self._command("show_meter", amount >> 16, amount & 0xFFFF)
