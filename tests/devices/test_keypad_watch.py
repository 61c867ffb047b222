"""The keypad's fast key watch (687a.9(b), the past-posting window): between two full polls the
driver reads the key counter alone, and a Start Game is polled in full as soon as the counter
moves. Shown with a full poll due only once an hour, so nothing but the watch can see the press;
real sockets, the driver's own poll loop, events rather than time. The keypad here is the one that
does NOT latch (the shipped one does, and needs no reflex): the watch's lock is what it relies on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from controller.clock import REAL_CLOCK
from controller.games import GameId
from devices.config_file import load_devices
from devices.drivers.base import Driver
from devices.drivers.factory import build_driver
from devices.events import BetSensed, ButtonPressed, DeviceDegraded, DeviceOnline, Key, SensorsLocked
from devices.transport.block_watch import TELL_S, set_watch_priority
from devices.transport.modbus import BusRegistry
from devices.transport.watch_process import _REPLY_HEAD, Device, LookFailed, Reflex, Watch, WatchSpec
from sim.table import SimTable
from tests.devices.conftest import GUARD_S, TABLES, game, keypad_commands, next_event, running
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
    async with running(driver):
        await next_event(driver, SensorsLocked)  # the first full poll; the next is an hour away
        sim.devices["keypad"].model.press(Key.START_GAME)
        pressed, _ = await next_event(driver, ButtonPressed)
        assert pressed.key is Key.START_GAME


async def test_a_poll_out_of_turn_ends_the_watch(keypad_on_tcp: tuple[SimTable, Driver, BusRegistry]) -> None:
    sim, driver, _ = keypad_on_tcp
    async with running(driver):
        await next_event(driver, SensorsLocked)
        sim.devices["keypad"].model.place_bet(1, 1)
        driver.wake.set()  # as the supervisor's settle() does: the poll asks for a look of its own
        sensed, _ = await next_event(driver, BetSensed)
        assert (sensed.box, sensed.spot, sensed.present) == (1, 1, True)


async def test_a_change_is_told_by_the_watch_as_it_reads_it(
    keypad_on_tcp: tuple[SimTable, Driver, BusRegistry],
) -> None:
    """Not only the key counter: any change of the block (here a chip on a sensor) is told to
    the table by the look that read it, with no poll due for an hour and none asked for."""
    sim, driver, _ = keypad_on_tcp
    async with running(driver):
        await next_event(driver, SensorsLocked)
        sim.devices["keypad"].model.place_bet(2, 1)
        sensed, _ = await next_event(driver, BetSensed)
        assert (sensed.box, sensed.spot, sensed.present) == (2, 1, True)
        sim.devices["keypad"].model.remove_bet(2, 1)
        gone, _ = await next_event(driver, BetSensed)
        assert (gone.box, gone.spot, gone.present) == (2, 1, False)


async def test_the_watch_locks_the_sensors_at_start_game_itself(
    keypad_on_tcp: tuple[SimTable, Driver, BusRegistry],
) -> None:
    """687a.9(b): the watch's thread locks the sensors on its own socket the moment it reads the
    press (a reflex), before the event reaches anyone; another key locks nothing."""
    sim, driver, _ = keypad_on_tcp
    model, locks = keypad_commands(sim)
    async with running(driver):
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
        # The polls read the watch's looks: nothing through the bus, and no write of its own.
        assert driver.bus.requests == polled == 0  # type: ignore[attr-defined]
        model.place_bet(2, 1)  # too late: not sensed
        assert model.sensed() == {(1, 1)}


async def test_a_keypad_that_stops_answering_fails_its_polls_and_comes_back(
    keypad_on_tcp: tuple[SimTable, Driver, BusRegistry],
) -> None:
    """The polls take the watch's looks, so the device's health is the watch's: a keypad that
    answers nothing is degraded at the next poll, and online again at the first poll it answers;
    its presses meanwhile are not lost (the key counter and ring hold them)."""
    sim, driver, _ = keypad_on_tcp
    faults = sim.devices["keypad"].register_sim.faults  # type: ignore[union-attr]
    async with running(driver):
        await next_event(driver, SensorsLocked)
        faults.silent = True
        driver.wake.set()  # a poll out of turn, as the supervisor's settle() does
        await next_event(driver, DeviceDegraded)
        sim.devices["keypad"].model.press(Key.HIT)
        faults.silent = False
        driver.wake.set()
        _, seen = await next_event(driver, DeviceOnline)
        if not any(isinstance(e, ButtonPressed) for e in seen):
            seen = (await next_event(driver, ButtonPressed))[1]
        assert [e.key for e in seen if isinstance(e, ButtonPressed)] == [Key.HIT]


async def test_a_sensor_flickering_at_every_look_is_told_no_faster_than_tell_s(
    keypad_on_tcp: tuple[SimTable, Driver, BusRegistry],
) -> None:
    """Hostile hardware: a sensor that changes at every read. The watch tells changes at most
    every TELL_S, so the table decodes at most that many blocks (it decoded one per look, 200 a
    second here, before the bound), and the last state is still told."""
    sim, driver, _ = keypad_on_tcp
    model = sim.devices["keypad"].model
    update, reads = model.update, 0
    enough = asyncio.Event()

    def flicker() -> None:
        nonlocal reads
        reads += 1
        (model.remove_bet if reads % 2 else model.place_bet)(1, 1)
        update()
        if reads == 120:
            enough.set()

    async with running(driver):
        await next_event(driver, SensorsLocked)
        model.update = flicker
        began = time.monotonic()
        async with asyncio.timeout(GUARD_S):
            await enough.wait()  # 120 looks at 5 ms: 0.6 s, every one of them a change
        model.update = update
        seconds = time.monotonic() - began
        sensed: list[BetSensed] = []
        while not driver.events.empty():
            if isinstance(ev := driver.events.get_nowait(), BetSensed):
                sensed.append(ev)
        assert 1 <= len(sensed) <= seconds / TELL_S + 3, (len(sensed), seconds)
        while not sensed[-1].present:  # the chip the 120th read left on the sensor: told too
            sensed.append((await next_event(driver, BetSensed))[0])


@pytest.mark.parametrize(
    ("ended", "said"), [(signal.SIGKILL, "watch_process_died"), (signal.SIGSTOP, "watch_process_hung")],
    ids=["dead", "hung"],
)  # fmt: skip
async def test_a_dead_or_hung_watch_process_is_replaced_and_ends_with_the_driver(
    keypad_on_tcp: tuple[SimTable, Driver, BusRegistry],
    capsys: pytest.CaptureFixture[str],
    ended: signal.Signals,
    said: str,
) -> None:
    """The watch runs in a process of its own (devices/transport/watch_process.py). One killed,
    or alive but answering nothing (stopped, here: killed then by the poll it fails), is said in
    one line and replaced, and the reflex works in the new one; the driver's close ends it."""
    sim, driver, _ = keypad_on_tcp
    model, locks = keypad_commands(sim)
    async with running(driver):
        await next_event(driver, SensorsLocked)
        first = driver._watch.pid  # type: ignore[attr-defined]
        assert first is not None
        os.kill(first, ended)
        try:
            driver.wake.set()  # a poll (settle's: this keypad's own rate is an hour) finds it gone
            await next_event(driver, DeviceDegraded)
            driver.wake.set()  # and the next starts another
            await next_event(driver, DeviceOnline)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(first, signal.SIGCONT)
        assert said in capsys.readouterr().out
        second = driver._watch.pid  # type: ignore[attr-defined]
        assert second not in (None, first)
        model.place_bet(1, 1)
        model.press(Key.START_GAME)
        start, _ = await next_event(driver, ButtonPressed)
        # One write: the new process's reflex, or the driver's poll when a loaded box had the
        # process read the press before the driver's block reached it (then the reflex is not
        # set off for it as well: test_a_start_game_told_before_the_tables_first_polled_...).
        assert start.locked and locks == ["lock"]
    with pytest.raises(ProcessLookupError):  # ended and reaped
        os.kill(second, 0)


@pytest.mark.parametrize("closes", [False, True], ids=["answer-in-two-parts", "closed-half-way"])
def test_a_look_takes_an_answer_in_parts_and_fails_on_one_cut_short(closes: bool) -> None:
    """A device's answer may come in parts (the look reads on) or stop half way as the device
    drops the connection: the look fails then, in one line, rather than reading on for ever at
    the watch's realtime priority."""
    listener = socket.create_server(("127.0.0.1", 0))
    spec = WatchSpec("127.0.0.1", listener.getsockname()[1], 3, 0, 4, 0, 0.005, 1.0)
    answer = struct.pack(">HHHBBB4H", 1, 0, 11, 3, 3, 8, 7, 0, 0, 9)

    def device() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(12)
            conn.sendall(answer[:6])
            if not closes:
                conn.sendall(answer[6:])
                conn.recv(1)  # until the look's side closes

    served = threading.Thread(target=device, daemon=True)
    served.start()
    looked: list[BaseException | list[int]] = []

    def look() -> None:
        watched = Device(spec)
        try:
            watched.look()
            looked.append(watched.words())
        except LookFailed as exc:
            looked.append(exc)
        finally:
            watched.close()

    looking = threading.Thread(target=look, daemon=True)  # daemon: a look that spun would not end
    looking.start()
    looking.join(GUARD_S)
    served.join(GUARD_S)
    listener.close()
    assert looked, "the look did not end"
    if closes:
        assert isinstance(looked[0], LookFailed) and looked[0].kind == "link"
    else:
        assert looked == [[7, 0, 0, 9]]


class _ScriptedKeypad(Device):
    """The watch's device, without a wire: each look reads the next block of ``blocks`` (the last
    one again when they run out), and ``at_look[n]`` runs as look n reads, as though the table's
    messages crossed it; writes are kept in ``written``."""

    def __init__(
        self, spec: WatchSpec, blocks: list[list[int]], at_look: dict[int, Callable[[], None]]
    ) -> None:
        super().__init__(spec)
        self.blocks, self.at_look, self.looks = blocks, at_look, 0
        self.written: list[tuple[int, tuple[int, ...]]] = []

    def look(self) -> None:
        self.looks += 1
        words = self.blocks[min(self.looks, len(self.blocks)) - 1]
        self.reply[_REPLY_HEAD.size :] = struct.pack(f">{len(words)}H", *words)
        self.at_look.get(self.looks, lambda: None)()

    def write(self, address: int, values: tuple[int, ...]) -> None:
        self.written.append((address, values))


def test_a_start_game_told_before_the_tables_first_polled_is_not_locked_again_by_the_reflex() -> None:
    """687a.9(b), one lock a press: a watch's process just started (the first, or one replacing a
    dead or hung one) has no ``polled`` until the table decoded its first block. A look before it
    that reads a Start Game with the sensors open tells the block unasked, and the table's poll
    locks for it (its fallback). The table's ``polled`` (its block before the press) arriving just
    after that look must not set the reflex off for the same press: that was a second lock, seen
    under load."""
    start_code, lock = 9, (1, 0)
    block = [1, 0, start_code, 0]  # key_seq 1, sensors open, key 1 Start Game in a ring of two
    reflex = Reflex(ring_at=2, ring_count=2, trigger=start_code, guard_at=1, address=100, values=lock)
    spec = WatchSpec("127.0.0.1", 9, 3, 0, len(block), 0, 0.001, 1.0, reflex=reflex)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    told: list[dict[str, object]] = []

    def stop() -> None:  # what the watch told, read before the table stops it
        ours.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                told.append(json.loads(ours.recv(4096)))
        ours.close()

    watch = Watch(spec, theirs)
    keypad = _ScriptedKeypad(spec, [block], {
        1: lambda: ours.send(b'{"polled":0,"trusted":0}'),  # the table's block before the press
        3: stop,
    })  # fmt: skip
    watch.device = keypad
    ran = threading.Thread(target=watch.run, daemon=True)
    ran.start()
    ran.join(GUARD_S)
    theirs.close()
    assert not ran.is_alive(), "the watch did not stop"
    assert told == [{"block": block, "asked": 0}]  # the press, with the sensors open: the table's
    assert keypad.written == []  # the table's poll locks for the block it was told: one write


def test_the_watch_process_stops_when_the_table_is_gone() -> None:
    """Its end of the socket pair closing (the table's process died, even by kill -9) stops it:
    no orphan keeps reading the keypad."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    spec = WatchSpec("127.0.0.1", 9, 1, 0, 1, 0, 0.005, 0.1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "devices.transport.watch_process", str(theirs.fileno()), spec.to_json()],
        pass_fds=[theirs.fileno()],
    )
    theirs.close()
    assert json.loads(ours.recv(4096)) == {"ready": 1}
    ours.close()
    assert proc.wait(timeout=GUARD_S) == 0


async def test_the_watch_process_runs_at_the_realtime_priority_run_gives_it(
    keypad_on_tcp: tuple[SimTable, Driver, BusRegistry],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``tablectl run --realtime-priority N`` (set_watch_priority) puts the watch's process, and it
    alone, under SCHED_FIFO; where the box does not grant it, the watch says so in one line and
    watches at normal priority."""
    _, driver, _ = keypad_on_tcp
    set_watch_priority(7)
    try:
        async with running(driver):
            await next_event(driver, SensorsLocked)
            pid = driver._watch.pid  # type: ignore[attr-defined]
            assert os.sched_getscheduler(os.getpid()) == os.SCHED_OTHER  # the table's own process
            if os.sched_getscheduler(pid) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO:
                assert os.sched_getparam(pid).sched_priority == 7
            else:
                assert "watch_realtime_refused" in capsys.readouterr().out
    finally:
        set_watch_priority(None)
