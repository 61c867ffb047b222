"""The keypad's fast key watch (687a.9(b), the past-posting window): between two full polls the
driver reads the key counter alone, and a Start Game is polled in full as soon as the counter
moves. Shown with a full poll due only once an hour, so nothing but the watch can see the press;
real sockets, the driver's own poll loop, events rather than time. The keypad here is the one that
does NOT latch (the shipped one does, and needs no reflex): the watch's lock is what it relies on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from controller.clock import REAL_CLOCK
from controller.games import GameId
from devices.config_file import load_devices
from devices.drivers.base import Driver
from devices.drivers.factory import build_driver
from devices.events import BetSensed, ButtonPressed, Key, SensorsLocked
from devices.transport.modbus import BusRegistry
from sim.table import SimTable
from tests.devices.conftest import GUARD_S, TABLES, game, keypad_commands, next_event
from tests.support.keypads import not_latching_keypad

HOUR = 3600.0


@pytest.fixture
async def keypad_on_tcp(tmp_path: Path) -> AsyncIterator[tuple[SimTable, Driver, BusRegistry]]:
    profile = str(not_latching_keypad(tmp_path))
    cfg = load_devices(
        {"keypad": {"kind": "keypad", "profile": profile, "transport": "modbus-tcp",
                    "host": "127.0.0.1", "port": 0, "device_id": 3, "watch_interval_s": 0.005}},
        TABLES, source="test.toml",
    )  # fmt: skip
    sim = SimTable(cfg, game(GameId.DOUBLE_BACK_JACK.value), seed=1)
    await sim.start()
    buses = BusRegistry()
    [served] = sim.driver_configs()
    driver = build_driver(replace(served, poll_interval_s=HOUR), buses=buses, clock=REAL_CLOCK)
    try:
        yield sim, driver, buses
    finally:
        await driver.close()
        buses.close()
        await sim.stop()


async def test_a_start_game_is_seen_by_the_watch_between_full_polls(
    keypad_on_tcp: tuple[SimTable, Driver, BusRegistry],
) -> None:
    sim, driver, _ = keypad_on_tcp
    running = asyncio.create_task(driver.run())
    try:
        await next_event(driver, SensorsLocked)  # the first full poll; the next is an hour away
        sim.devices["keypad"].model.press(Key.START_GAME)
        pressed, _ = await next_event(driver, ButtonPressed)
        assert pressed.key is Key.START_GAME
    finally:
        running.cancel()
        async with asyncio.timeout(GUARD_S):
            await asyncio.gather(running, return_exceptions=True)


async def test_a_poll_out_of_turn_ends_the_watch(keypad_on_tcp: tuple[SimTable, Driver, BusRegistry]) -> None:
    sim, driver, _ = keypad_on_tcp
    running = asyncio.create_task(driver.run())
    try:
        await next_event(driver, SensorsLocked)
        sim.devices["keypad"].model.place_bet(1, 1)  # not the watched word: only a full poll sees it
        driver.wake.set()  # as the supervisor's settle() does
        sensed, _ = await next_event(driver, BetSensed)
        assert (sensed.box, sensed.spot, sensed.present) == (1, 1, True)
    finally:
        running.cancel()
        async with asyncio.timeout(GUARD_S):
            await asyncio.gather(running, return_exceptions=True)


async def test_the_watch_locks_the_sensors_at_start_game_itself(
    keypad_on_tcp: tuple[SimTable, Driver, BusRegistry],
) -> None:
    """687a.9(b): the watch's thread locks the sensors on its own socket the moment it reads the
    press (a reflex), before the event reaches anyone; another key locks nothing."""
    sim, driver, _ = keypad_on_tcp
    model, locks = keypad_commands(sim)
    running = asyncio.create_task(driver.run())
    try:
        await next_event(driver, SensorsLocked)
        model.place_bet(1, 1)
        model.press(Key.HIT)
        hit, _ = await next_event(driver, ButtonPressed)
        assert hit.key is Key.HIT and not hit.locked and not model.locked and locks == []
        polled = driver.bus.requests  # type: ignore[attr-defined]
        model.press(Key.START_GAME)
        start, _ = await next_event(driver, ButtonPressed)
        assert start.key is Key.START_GAME and start.locked
        assert model.locked and locks == ["lock"]  # one write: the full poll found them locked
        assert driver.bus.requests == polled + 1  # type: ignore[attr-defined]  # that poll, no write of its own
        model.place_bet(2, 1)  # too late: not sensed
        assert model.sensed() == {(1, 1)}
    finally:
        running.cancel()
        async with asyncio.timeout(GUARD_S):
            await asyncio.gather(running, return_exceptions=True)
