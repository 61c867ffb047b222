"""A keypad profile may say the device latches its own bet sensors when Start Game is pressed
(``latches_on_start_game``): a chip placed after the press is never sensed, whatever the poll
rate (687a.9(b), the past-posting window zero by construction). The simulator models it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from controller.supervisor.rig import TABLES
from devices.errors import ProfileError
from devices.events import Key
from devices.profiles import LATCHES, parse_profile
from sim.models import KeypadModel

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


def test_the_profile_option_is_true_or_false() -> None:
    data = tomllib.loads(REF.read_text())
    data["options"][LATCHES] = True
    assert parse_profile(data, REF).options[LATCHES] is True
    data["options"][LATCHES] = "yes"
    with pytest.raises(ProfileError, match=f"options.{LATCHES}.*true or false"):
        parse_profile(data, Path("ref-keypad.toml"))
