"""The simulated RTU line keeps the wire's timing, and the keypad's watch goes ahead on it.

A pty hands bytes on at once; a paced line (sim/wire_pace.py) carries each frame in its time at the
configured baud and framing (Modbus over Serial Line V1.02, 2.5.1: 11 bits a character on 8E1, a
3.5-character silence ending each frame). Checked by arithmetic on the delays the bridge asks for,
with the bridge's timer in the test's hand: nothing here waits for time to pass.

On a shared line the keypad's look at its key counter is urgent (the past-posting window,
687a.9(b)): it goes on the line before the other devices' polls already waiting. Checked by the
order of the frames the simulated line receives, on real ptys.
"""

from __future__ import annotations

import asyncio
import os
import tty
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from controller.clock import REAL_CLOCK
from controller.games import GameId
from devices.commands import UnlockSensors
from devices.config import MODBUS_RTU_FRAMING, Framing
from devices.drivers.base import Driver
from devices.drivers.factory import build_driver
from devices.events import ButtonPressed, Key, SensorsLocked
from devices.transport.line_turns import LineTurns
from devices.transport.modbus import BusRegistry
from sim.pty import PtyBridge
from sim.rtu_gate import RtuGate, crc16
from sim.table import SimTable
from sim.wire_pace import GAP_CHARS, LinePacer, char_bits, read_floor_s, wire_s
from tests.devices.conftest import GUARD_S, device_config, game, keypad_commands, next_event, running
from tests.support.keypads import not_latching_keypad

HOUR = 3600.0
BAUD = 19200


def test_a_character_is_eleven_bits_on_modbus_rtu_framings() -> None:
    assert char_bits(MODBUS_RTU_FRAMING) == 11  # 8E1: start, 8 data, parity, stop
    assert char_bits(Framing(parity="none", stopbits=2)) == 11  # 8N2 keeps the 11 bits
    assert char_bits(Framing(parity="none", stopbits=1)) == 10


def test_the_line_floor_of_a_one_register_read_at_19200_8e1() -> None:
    """8 bytes out, the 3.5-character silence, 7 bytes back: 18.5 characters of 11 bits."""
    assert read_floor_s(BAUD, MODBUS_RTU_FRAMING) == pytest.approx(18.5 * 11 / BAUD)
    assert round(read_floor_s(BAUD, MODBUS_RTU_FRAMING) * 1000, 1) == 10.6


def test_the_pacer_carries_one_frame_at_a_time() -> None:
    now = 0.0
    pacer = LinePacer(BAUD, MODBUS_RTU_FRAMING, lambda: now)
    assert pacer.request(8) == pytest.approx(wire_s(8 + GAP_CHARS, BAUD, MODBUS_RTU_FRAMING))
    # An answer written at once waits for the request to be off the wire, then takes its own time.
    assert pacer.reply(7) == pytest.approx(wire_s(8 + GAP_CHARS + 7, BAUD, MODBUS_RTU_FRAMING))
    now = 1.0  # the line long free: a frame takes only its own time
    assert pacer.reply(7) == pytest.approx(wire_s(7, BAUD, MODBUS_RTU_FRAMING))


class Timers:
    """The bridge's call_later, in the test's hand: each delay asked for, run when the test says."""

    def __init__(self) -> None:
        self.asked: list[tuple[float, Callable[[], None]]] = []
        self.changed = asyncio.Event()

    def later(self, delay: float, then: Callable[[], None]) -> None:
        self.asked.append((delay, then))
        self.changed.set()

    async def next(self) -> tuple[float, Callable[[], None]]:
        async with asyncio.timeout(GUARD_S):
            while not self.asked:
                self.changed.clear()
                await self.changed.wait()
        return self.asked.pop(0)


def _open_raw(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    tty.setraw(fd)
    return fd


async def _read(fd: int, n: int) -> bytes:
    loop, got = asyncio.get_running_loop(), b""
    async with asyncio.timeout(GUARD_S):
        while len(got) < n:
            ready = loop.create_future()
            loop.add_reader(fd, ready.set_result, None)
            try:
                await ready
            finally:
                loop.remove_reader(fd)
            got += os.read(fd, n - len(got))
    return got


def _nothing_waiting(fd: int) -> bool:
    try:
        os.read(fd, 1)
    except BlockingIOError:
        return True
    return False


async def test_a_paced_bridge_holds_each_frame_for_its_time_on_the_wire() -> None:
    timers = Timers()
    bridge = PtyBridge(RtuGate({3}), MODBUS_RTU_FRAMING, baudrate=BAUD, later=timers.later, now=lambda: 0.0)
    bridge.open()
    host, device = _open_raw(bridge.host_path), _open_raw(bridge.device_path)
    try:
        request = bytes((3, 3, 0, 24, 0, 1))
        request += crc16(request)
        os.write(host, request)
        delay, arrive = await timers.next()
        assert delay == pytest.approx(wire_s(len(request) + GAP_CHARS, BAUD, MODBUS_RTU_FRAMING))
        assert _nothing_waiting(device)  # still on the wire
        arrive()
        assert await _read(device, len(request)) == request
        answer = bytes((3, 3, 2, 0, 5))
        answer += crc16(answer)
        os.write(device, answer)
        delay, arrive = await timers.next()
        # Written the moment the request arrived (the test's clock stands still): it follows the
        # request off the wire, then takes its own 7 characters.
        carried = len(request) + GAP_CHARS + len(answer)
        assert delay == pytest.approx(wire_s(carried, BAUD, MODBUS_RTU_FRAMING))
        assert _nothing_waiting(host)
        arrive()
        assert await _read(host, len(answer)) == answer
    finally:
        os.close(host)
        os.close(device)
        bridge.close()


async def test_an_urgent_turn_goes_before_the_ordinary_ones_waiting() -> None:
    turns, order = LineTurns(), []

    async def take(name: str, urgent: bool, hold: asyncio.Event | None = None) -> None:
        async with turns.turn(urgent):
            order.append(name)
            if hold is not None:
                await hold.wait()

    release = asyncio.Event()
    first = asyncio.create_task(take("on the wire", False, release))
    await asyncio.sleep(0)
    queued = (("poll a", False), ("poll b", False), ("look", True))
    waiting = [asyncio.create_task(take(name, urgent)) for name, urgent in queued]
    cancelled = asyncio.create_task(take("cancelled", True))
    await asyncio.sleep(0)
    cancelled.cancel()
    release.set()
    async with asyncio.timeout(GUARD_S):
        await asyncio.gather(first, *waiting, cancelled, return_exceptions=True)
    assert order == ["on the wire", "look", "poll a", "poll b"]


@pytest.fixture
async def shared_line(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SimTable, list[tuple[int, int, int]]]]:
    """The reader (id 2) and the keypad (id 3) on one simulated RTU line, as the shipped Double
    Back Jack table has them, but for the keypad: by default one that does NOT latch, whose reflex
    is what is shown here (parametrized ``True``: the shipped keypad, which latches); the frames
    the line receives are recorded (id, function, address)."""
    line = {"transport": "modbus-rtu", "path": str(tmp_path / "line"), "baudrate": BAUD}
    latching = bool(getattr(request, "param", False))
    keypad = "../devices/ref-keypad.toml" if latching else str(not_latching_keypad(tmp_path))
    cfg = [
        device_config("reader", kind="reader", profile="../devices/ref-reader-peek.toml",
                      device_id=2, **line),
        device_config("keypad", kind="keypad", profile=keypad, device_id=3,
                      watch_interval_s=0.005, **line),
    ]  # fmt: skip
    sim = SimTable(cfg, game(GameId.DOUBLE_BACK_JACK.value), seed=1)
    await sim.start()
    seen: list[tuple[int, int, int]] = []
    server = sim.devices["keypad"].server
    gate = server.bridge.gate  # type: ignore[union-attr]
    feed = gate.feed

    def recorded(data: bytes) -> tuple[list[bytes], bytes]:
        frames, reply = feed(data)
        seen.extend((f[0], f[1], int.from_bytes(f[2:4], "big")) for f in frames)
        return frames, reply

    gate.feed = recorded
    yield sim, seen
    await sim.stop()


async def test_the_keypads_look_goes_on_the_line_before_the_polls_waiting(
    shared_line: tuple[SimTable, list[tuple[int, int, int]]],
) -> None:
    sim, seen = shared_line
    buses = BusRegistry()
    reader = next(c for c in sim.driver_configs() if c.name == "reader")
    bus = buses.bus(reader.endpoint)
    try:
        reads = [
            asyncio.create_task(bus.read_holding(2, 0, 4, timeout_s=1.0)),  # on the wire first
            asyncio.create_task(bus.read_holding(2, 1, 1, timeout_s=1.0)),  # the polls waiting
            asyncio.create_task(bus.read_holding(3, 0, 7, timeout_s=1.0)),
            asyncio.create_task(bus.read_holding(3, 24, 1, timeout_s=1.0, urgent=True)),  # the look
        ]
        async with asyncio.timeout(GUARD_S):
            await asyncio.gather(*reads)
        assert seen == [(2, 3, 0), (3, 3, 24), (2, 3, 1), (3, 3, 0)]
    finally:
        buses.close()


@asynccontextmanager
async def _keypad_polled_hourly(sim: SimTable) -> AsyncIterator[Driver]:
    """The line's keypad driver running, its full poll an hour away: only its look sees a press."""
    buses = BusRegistry()
    keypad_cfg = next(c for c in sim.driver_configs() if c.name == "keypad")
    driver = build_driver(replace(keypad_cfg, poll_interval_s=HOUR), buses=buses, clock=REAL_CLOCK)
    try:
        async with running(driver):
            yield driver
    finally:
        await driver.close()
        buses.close()


async def test_the_keypad_on_an_rtu_line_locks_at_start_game_from_its_watch(
    shared_line: tuple[SimTable, list[tuple[int, int, int]]],
) -> None:
    """687a.9(b): with the full poll an hour away, the watch's look sees the key counter move,
    reads the one new key and locks the sensors, before the event reaches anyone; another key
    locks nothing."""
    sim, seen = shared_line
    model, locks = keypad_commands(sim)
    async with _keypad_polled_hourly(sim) as driver:
        await next_event(driver, SensorsLocked)
        model.place_bet(1, 1)
        model.press(Key.HIT)
        hit, _ = await next_event(driver, ButtonPressed)
        assert hit.key is Key.HIT and not hit.locked and locks == []
        del seen[:]
        model.press(Key.START_GAME)
        start, _ = await next_event(driver, ButtonPressed)
        assert start.key is Key.START_GAME and start.locked and locks == ["lock"]
        # The look that saw it, the new key's ring word (key 2: the ring's second), the lock, the
        # full poll (which found the sensors locked: no write of its own).
        assert seen[-4:] == [(3, 3, 24), (3, 3, 26), (3, 16, 33), (3, 3, 0)]
        # The table unlocks (a void): the next Start Game is the watch's to lock again, though
        # the last full poll read the sensors locked (the next is an hour away).
        await driver.send(UnlockSensors())
        assert not model.locked
        model.press(Key.START_GAME)
        again, _ = await next_event(driver, ButtonPressed)
        assert again.key is Key.START_GAME and again.locked and locks == ["lock", "unlock", "lock"]
        assert seen[-4:] == [(3, 3, 24), (3, 3, 27), (3, 16, 33), (3, 3, 0)]


@pytest.mark.parametrize("shared_line", [True], indirect=True, ids=["latching"])
async def test_the_shipped_keypads_look_spends_no_line_time_on_a_lock(
    shared_line: tuple[SimTable, list[tuple[int, int, int]]],
) -> None:
    """The shipped keypad latches (687a.9(b)): the look that sees the key counter move is followed
    by the full poll at once, with no ring read and no lock of the driver's on the shared line."""
    sim, seen = shared_line
    model, locks = keypad_commands(sim)
    async with _keypad_polled_hourly(sim) as driver:
        await next_event(driver, SensorsLocked)
        model.place_bet(1, 1)
        del seen[:]
        model.press(Key.START_GAME)
        start, _ = await next_event(driver, ButtonPressed)
        assert start.key is Key.START_GAME and start.locked and model.locked and locks == []
        assert seen[-2:] == [(3, 3, 24), (3, 3, 0)]  # the look that saw it, then the full poll
        assert all(fn == 3 for _, fn, _ in seen)  # nothing written
