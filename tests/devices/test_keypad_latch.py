"""A keypad profile may say the device latches its own bet sensors when Start Game is pressed
(``latches_on_start_game``): a chip placed after the press is never sensed, whatever the poll
rate (687a.9(b), the past-posting window zero by construction). The simulator models it, the
shipped reference keypad has it, and the driver trusts it for nothing it cannot check: a keypad
said to latch that left its sensors open at Start Game is locked by its driver and logged once."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from controller.clock import REAL_CLOCK
from controller.games import GameId
from controller.supervisor.rig import TABLES
from devices.commands import UnlockSensors
from devices.drivers.base import Driver
from devices.drivers.factory import build_driver
from devices.errors import ProfileError
from devices.events import BetSensed, ButtonPressed, Key, SensorsLocked
from devices.profiles import LATCHES, load_profile, parse_profile
from devices.transport.modbus import BusRegistry
from sim.models import KeypadModel
from sim.table import SimTable
from tests.devices.conftest import device_config, game, keypad_commands, poll_until
from tests.support.keypads import not_latching_keypad

REF = TABLES.parent / "devices" / "ref-keypad.toml"


def test_a_latching_keypad_takes_no_chip_after_start_game() -> None:
    pad = KeypadModel(7, 2, latches=True)
    pad.place_bet(1)
    pad.press(Key.START_GAME)
    pad.place_bet(2)  # after the press: past-posted
    assert pad.locked and pad.sensed() == {(1, 1)} and pad.latched_at == [1]


def test_a_keypad_that_does_not_latch_waits_for_the_controllers_lock() -> None:
    pad = KeypadModel(7, 2)
    pad.place_bet(1)
    pad.press(Key.START_GAME)
    pad.place_bet(2)
    assert not pad.locked and pad.sensed() == {(1, 1), (2, 1)}


def test_the_shipped_reference_keypad_latches() -> None:
    """The product's choice (issue 27): every shipped table's keypad has no window at all."""
    assert load_profile(REF).options[LATCHES] is True


def test_the_profile_option_is_true_or_false() -> None:
    data = tomllib.loads(REF.read_text())
    data["options"][LATCHES] = True
    assert parse_profile(data, REF).options[LATCHES] is True
    data["options"][LATCHES] = "yes"
    with pytest.raises(ProfileError, match=f"options.{LATCHES}.*true or false"):
        parse_profile(data, Path("ref-keypad.toml"))


# -- over the wire: the driver trusts the latch, never blindly (687a.9(b)) ---------------------


@pytest.fixture
async def keypad_line(tmp_path: Path) -> AsyncIterator[tuple[SimTable, list[str], Callable[[bool], Driver]]]:
    """The keypad that does NOT latch on an RTU line (the simulated device), its command writes
    named, and a driver for it whose profile says latching or not, as the test asks."""
    line = {"transport": "modbus-rtu", "path": str(tmp_path / "line"), "baudrate": 19200}
    plain = str(not_latching_keypad(tmp_path))
    sim = SimTable([device_config("keypad", kind="keypad", profile=plain, device_id=3, **line)],
                   game(GameId.DOUBLE_BACK_JACK.value), seed=1)  # fmt: skip
    await sim.start()
    buses = BusRegistry()
    _, written = keypad_commands(sim)
    [served] = sim.driver_configs()
    drivers: list[Driver] = []

    def driver(profile_latches: bool) -> Driver:
        prof = load_profile(REF) if profile_latches else served.profile
        drivers.append(build_driver(replace(served, profile=prof), buses=buses, clock=REAL_CLOCK))
        return drivers[-1]

    try:
        yield sim, written, driver
    finally:
        for d in drivers:
            await d.close()
        buses.close()
        await sim.stop()


async def test_a_keypad_said_to_latch_that_does_not_is_locked_by_its_driver_and_said_once(
    keypad_line: tuple[SimTable, list[str], Callable[[bool], Driver]],
) -> None:
    """The profile says the device latches, the device does not: the poll that reads the Start
    Game with the sensors open locks them at once as for any keypad, and the mis-configured device
    is logged once (``keypad_did_not_latch``), not at every round."""
    sim, written, make = keypad_line
    model = sim.devices["keypad"].model
    with capture_logs() as logs:
        driver = make(True)  # bound inside: its logger is the captured one
        await poll_until(driver, SensorsLocked)
        for round_no in (1, 2):
            model.place_bet(1, 1)
            model.press(Key.START_GAME)
            press, _ = await poll_until(driver, ButtonPressed)
            assert press.key is Key.START_GAME and press.locked and model.locked
            model.place_bet(2, 1)  # after the lock: not sensed
            assert model.sensed() == {(1, 1)}
            model.remove_bet(2, 1)
            await driver.send(UnlockSensors())  # the round over
            assert written == ["lock", "unlock"] * round_no
    said = [e for e in logs if e["event"] == "keypad_did_not_latch"]
    assert len(said) == 1 and said[0]["log_level"] == "warning" and said[0]["section"] == "687a.9(b)"


async def test_a_keypad_that_latches_as_its_profile_says_gets_no_lock_from_its_driver(tmp_path: Path) -> None:
    """The shipped keypad on its line: the press freezes the sensors in the device, the poll reads
    them locked and the press as the one that locked them; the driver writes nothing, says nothing."""
    line = {"transport": "modbus-rtu", "path": str(tmp_path / "line"), "baudrate": 19200}
    sim = SimTable([device_config("keypad", kind="keypad", profile="../devices/ref-keypad.toml",
                                  device_id=3, **line)],
                   game(GameId.DOUBLE_BACK_JACK.value), seed=1)  # fmt: skip
    await sim.start()
    buses = BusRegistry()
    model, written = keypad_commands(sim)
    try:
        with capture_logs() as logs:
            [served] = sim.driver_configs()
            driver = build_driver(served, buses=buses, clock=REAL_CLOCK)
            await poll_until(driver, SensorsLocked)
            model.place_bet(1, 1)
            model.press(Key.START_GAME)
            model.place_bet(2, 1)  # before any poll: never sensed
            press, seen = await poll_until(driver, ButtonPressed)
            assert press.key is Key.START_GAME and press.locked and written == []
            assert not [e for e in seen if isinstance(e, BetSensed) and e.box == 2]
            assert model.sensed() == {(1, 1)} and model.latched_at == [model.key_seq]
        assert not [e for e in logs if e["event"] == "keypad_did_not_latch"]
        await driver.close()
    finally:
        buses.close()
        await sim.stop()
