"""Progressive keypad: bet sensors, lock, lights, meter and keys, over Modbus RTU on a pty."""

from __future__ import annotations

import pytest

from devices.commands import LockSensors, SetLight, ShowMeter, UnlockSensors
from devices.drivers.keypad import KeypadDriver
from devices.drivers.registers import SETTLE_POLLS
from devices.errors import CommandRejected
from devices.events import BetSensed, ButtonPressed, Key, KeysMissed, MeterShown, SensorFault, SensorsLocked
from tests.devices.conftest import Rig, drain, of_type, poll_until


async def test_bets_sensed_lock_and_lights(rig: Rig) -> None:
    d = rig.driver("keypad")
    await d.poll_once()
    first = drain(d)
    assert of_type(first, SensorsLocked) == [SensorsLocked("keypad", False)]
    kp = rig.model("keypad")
    kp.place_bet(1, 1)
    kp.place_bet(4, 2)
    await d.poll_once()
    sensed = of_type(drain(d), BetSensed)
    assert [(b.box, b.spot, b.present) for b in sensed] == [(1, 1, True), (4, 2, True)]
    await d.send(LockSensors())
    kp.place_bet(6, 1)  # 687a.9(b): too late, not accepted
    await d.poll_once()
    events = drain(d)
    assert of_type(events, SensorsLocked) == [SensorsLocked("keypad", True)]
    assert not of_type(events, BetSensed)
    assert kp.lights == {(1, 1), (4, 2)}
    await d.send(UnlockSensors())
    await d.poll_once()
    events = drain(d)
    assert of_type(events, SensorsLocked) == [SensorsLocked("keypad", False)]
    assert [(b.box, b.spot) for b in of_type(events, BetSensed)] == [(6, 1)]


async def test_set_light_and_meter(rig: Rig) -> None:
    d = rig.driver("keypad")
    await d.send(SetLight(7, 2, True))
    assert rig.model("keypad").lights == {(7, 2)}
    await d.send(ShowMeter(123_456_789))
    meter, _ = await poll_until(d, MeterShown)
    assert meter.amount_cents == 123_456_789
    with pytest.raises(CommandRejected, match="no sensor 8/1"):
        await d.send(SetLight(8, 1, True))


async def test_every_key_is_reported_in_order(rig: Rig) -> None:
    d = rig.driver("keypad")
    await d.poll_once()
    keys = list(Key)
    for k in keys:
        rig.model("keypad").press(k)
    pressed: list[Key] = []
    for _ in range(SETTLE_POLLS - 1):  # 9 keys, ring of 8, between two polls: held back as a possible glitch
        await d.poll_once()
        assert not of_type(drain(d), ButtonPressed)
    await d.poll_once()  # it held: real keys; the ring's 8 are read, one is missed (issue 11)
    events = drain(d)
    pressed += [e.key for e in of_type(events, ButtonPressed)]
    assert pressed == keys[1:]
    assert [e.count for e in of_type(events, KeysMissed)] == [1]
    for k in keys:
        rig.model("keypad").press(k)
        await d.poll_once()
    assert [e.key for e in of_type(drain(d), ButtonPressed)] == keys


async def test_stuck_sensor_is_reported_and_clears(rig: Rig) -> None:
    d = rig.driver("keypad")
    await d.poll_once()
    kp = rig.model("keypad")
    kp.faults.stuck.add((3, 1))
    fault, seen = await poll_until(d, SensorFault)
    assert (fault.box, fault.spot, fault.faulty) == (3, 1, True)
    assert BetSensed("keypad", 3, 1, True) in seen
    kp.faults.stuck.clear()
    fault, seen = await poll_until(d, SensorFault)
    assert fault.faulty is False
    assert BetSensed("keypad", 3, 1, False) in seen


async def test_lock_lights_what_it_froze_and_unlock_puts_every_light_out(rig: Rig) -> None:
    """docs/devices/keypad.md, 'Sensors and lights on lock and unlock'."""
    d, kp = rig.driver("keypad"), rig.model("keypad")
    await d.send(SetLight(7, 2, True))  # a light set before the lock
    kp.place_bet(2, 1)
    kp.faults.stuck.add((5, 2))
    await d.send(LockSensors())
    assert kp.lights == {(2, 1), (5, 2)}  # the wagers sensed, the stuck sensor's spot; 7/2 out
    kp.remove_bet(2, 1)  # taken away after the lock: still reads as placed
    kp.place_bet(3, 1)
    await d.send(LockSensors())  # again while locked: nothing changes
    assert (kp.sensed(), kp.lights) == ({(2, 1), (5, 2)}, {(2, 1), (5, 2)})
    await d.send(SetLight(1, 1, True))  # one light, while locked
    assert kp.lights == {(1, 1), (2, 1), (5, 2)}
    await d.send(UnlockSensors())
    assert (kp.locked, kp.lights, kp.sensed()) == (False, set(), {(3, 1), (5, 2)})


async def test_a_key_carries_the_amount_keyed_with_it(rig: Rig) -> None:
    """A double for less (673a.10(a), 665a.10(a), 685a.9(a)): the amount is read from
    key_amount, the slot of the key in key_ring; a key with nothing keyed carries none."""
    d = rig.driver("keypad")
    await d.poll_once()
    drain(d)
    kp = rig.model("keypad")
    kp.press(Key.DOUBLE, 5)
    kp.press(Key.HIT)
    await d.poll_once()
    pressed = of_type(drain(d), ButtonPressed)
    assert [(e.key, e.amount) for e in pressed] == [(Key.DOUBLE, 5), (Key.HIT, None)]


async def test_a_watch_lock_told_late_is_no_lock_of_a_later_start_game(rig: Rig) -> None:
    """687a.9(b): a press is marked ``locked`` (journalled as the lock that led its decision) only
    when it left the sensors locked. The watch's word for a lock it made, told only after the
    poll that took that press, counts for no later press: a Start Game pressed again in the round
    (the sensors locked since the first) is not the lock."""
    d = rig.driver("keypad")
    assert isinstance(d, KeypadDriver)
    kp = rig.model("keypad")
    await d.poll_once()
    kp.press(Key.START_GAME)  # the shipped keypad latches at the press
    first, _ = await poll_until(d, ButtonPressed)
    assert first.locked
    d.watch_moved(first.sequence, True)  # the watch's ``moved`` for it, after that poll
    kp.press(Key.START_GAME)  # again, in the round: the sensors locked before it
    again, _ = await poll_until(d, ButtonPressed)
    assert again.key is Key.START_GAME and not again.locked
