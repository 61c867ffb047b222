"""Keypad Start Game to bet sensors locked, through Modbus TCP, beside the bare Modbus round trip.

The keypad of a Double Back Jack table is put on Modbus TCP and polled at 20 Hz (the default
50 ms poll); the rest of the table as in config/tables/double-back-jack.toml. The simulators run
in a process of their own, as a table's devices are outside the appliance (``--sim-in-process``
puts them in the controller's event loop, to compare). Each sample: chips on the sensors, Start
Game pressed on the simulated keypad (t0); the keypad's driver sees the key (its watch, or its
poll) and writes ``lock`` at once, before the core decides and the journal commits; the
simulator carrying out the first ``lock`` after the press is t1. The floor then voids the round
so the next press starts afresh.

The bare round trip is a plain pymodbus client reading the keypad's 33 registers in the same run,
at the poll's own rhythm (20 Hz, fixed rate): every round trip on a press's path follows a pause,
and on a VM a pause makes whatever follows it slower. The same read back to back (hot) is printed
beside it, with the target it would give.
Target: p99 within the poll interval plus three round trips (the past-posting window).

The run also splits each sample where the time goes: press to the driver's event (the poll phase
plus the read), the queue hop to the supervisor, the core's decision with the journal's commit
(an fsync: the record is on disk before the lock is sent: the journal before every effect), and the lock's
write. ``--journal-dir`` puts the journal elsewhere, e.g. on /dev/shm, to see what the storage's
flush costs: tmpfs is not durable, so that run is a diagnosis, never the figure.

``appliance_cpu_share`` is the controller process's CPU time over ``--rest-s`` seconds at rest
before the presses (a fraction of one core), every device of the table polled as configured and
the keypad's watch running, while the bench only sleeps; ``appliance_cpu_share_while_pressing``
is the same over the presses, with ``presses_per_s`` and ``cpu_ms_per_press`` (what each press
cycle costs above the polling, the bench's own pipe to the simulators included). ``--watch-ms``
sets the keypad's ``watch_interval_s``: its watch's process reads the keypad's block that often,
locks the sensors itself at a Start Game, and the polls take its looks. ``--slow-device NAME``
makes that simulated device hold every request past its timeout once the shoe is loaded (it never
answers in time): the keypad's figures must not move. On Modbus TCP the keypad is by default one
that does NOT latch (the reference profile with ``latches_on_start_game = false``, written beside
the run by tests/support/keypads.py): the window is the driver's reflex. ``--latched`` measures
the shipped reference keypad as it is, which latches (687a.9(b)): the device freezes its sensors
itself when Start Game is pressed, so ``start_to_locked_ms`` (press to sensors locked) is zero by
construction and ``start_to_lock_command_ms`` is the controller's own path (poll, journal, lock
written).

``--load`` runs a bounded background load through the measurements (bench/background_load.py: a
CPU spinner per core and a writer fsyncing 64 KB over and over beside the journal) and every
figure is printed with the one-minute load average it was taken at (``load_average_1m``).
``window_over_bare_rtt`` is the window in bare round trips (at the poll's rhythm, same run).
``--realtime-priority N`` (default 10, as the shipped unit) gives the key watch's process
SCHED_FIFO as ``tablectl run --realtime-priority N`` does (0: none); ``--devices-realtime-priority
N`` (default 20) the simulators' process (the devices are hardware of their own at a table: the
appliance's load is not theirs; 0: none). ``appliance_cpu_share`` counts the watch's process
(``watch_process_cpu_share``) with the controller's own.

``--rtu`` leaves the keypad where the shipped table has it: on the RS-485 line it shares with the
reader (Modbus RTU, 19,200 baud 8E1, polled at its configured interval), the simulated line paced
at that baud and framing (sim/wire_pace.py: a pty alone carries bytes at once, which no wire
does). ``--watch-ms`` then sets the keypad's looks at its key counter through the line, each an
urgent request (devices/transport/line_turns.py). The bare figure is then a one-register read of
the keypad on the same paced line, printed beside the line's floor (``line_floor_ms``: that read's
time on the wire), and ``polls_per_s`` shows each device on the line still polled at its rate.
The keypad is then the shipped one, which latches; ``--rtu --not-latching`` puts the keypad that
does not latch on the same line, for comparison (its window is the driver's reflex through the
shared line: what a device maker's non-latching keypad gives there).

    .venv/bin/python bench/appliance_start_game.py [--presses 1000] [--journal-dir DIR]
        [--slow-device shuffler] [--latched] [--watch-ms 2] [--rest-s 10] [--load]
        [--rtu [--not-latching]] [--poll-ms MS]
        [--realtime-priority N] [--devices-realtime-priority N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests/support/, shared

from background_load import BackgroundLoad, load_average  # bench/, beside this script
from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient

from controller import logs
from controller.clock import REAL_CLOCK
from controller.journal import Classification, Journal
from controller.realtime import realtime
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import TABLES
from controller.supervisor.supervisor import Supervisor
from devices.config_file import load_devices
from devices.drivers.base import Driver, PollSchedule
from devices.events import Key
from devices.profiles import load_profile
from devices.transport.block_watch import set_watch_priority, watch_priority
from sim.table import SimTable
from sim.wire_pace import read_floor_s
from tests.support.keypads import not_latching_keypad

POLL_S = 0.05


class SimControl:
    """The bench's hand at the simulated table: chips on the sensors, Start Game pressed (t0),
    and the time the keypad carries out ``lock`` (t1)."""

    def __init__(self, sim: SimTable) -> None:
        self.sim = sim
        self.model = sim.devices["keypad"].model
        reg = sim.devices["keypad"].register_sim
        assert reg is not None
        reg.on_command = self._on_command
        self._changed = asyncio.Event()
        self._locked_at: list[float] = []
        self.slow: str | None = None

    def _on_command(self, name: str, _: Any) -> None:
        if name == "lock":
            self._locked_at.append(time.perf_counter())
        self._changed.set()

    async def handle(self, msg: tuple[Any, ...]) -> Any:
        match msg:
            case ("configs",):
                return self.sim.driver_configs()
            case ("slow", name):
                reg = self.sim.devices[name].register_sim
                assert reg is not None, f"{name}: not a Modbus device"
                reg.faults.hold()  # every request waits past the controller's timeout
            case ("bets",):
                for box in range(1, 7):
                    self.model.place_bet(box, 1)
            case ("press",):
                before = len(self._locked_at)
                t0 = time.perf_counter()
                self.model.press(Key.START_GAME)
                latched = time.perf_counter() if self.model.locked else None  # the device's own latch
                await self._until(lambda: len(self._locked_at) > before)
                # The first lock after the press: the driver's reflex (the table's own lock after
                # its commit follows it, and is not the window).
                first = self._locked_at[before]
                return t0, latched or first, first
            case ("unlocked",):
                await self._until(lambda: not self.model.locked)
        return None

    async def _until(self, done: Callable[[], bool]) -> None:
        while not done():
            self._changed.clear()
            await self._changed.wait()


class SimInProcess:
    """The simulators in the controller's own event loop (the old topology, kept to compare)."""

    def __init__(self, devices: list[Any], spec: Any, decks: int, paced: bool = False) -> None:
        # A direct-insert shuffler (declared below): Start Game is measured, not the cut.
        self.sim = SimTable(devices, spec, seed=1, decks=decks, direct_insert=True, paced_rtu=paced)
        self.control: SimControl | None = None

    async def start(self) -> None:
        await self.sim.start()
        self.control = SimControl(self.sim)

    async def ask(self, *msg: Any) -> Any:
        assert self.control is not None
        return await self.control.handle(msg)

    async def stop(self) -> None:
        await self.sim.stop()


class SimProcess:
    """The simulators in a child process, as a table's devices are outside the appliance: the
    controller's event loop carries only the controller, and each round trip crosses processes
    as it crosses the wire at a table. The child stamps t0 and t1 itself; perf_counter is
    CLOCK_MONOTONIC on Linux, so its stamps compare with the controller's own marks."""

    def __init__(self, devices: list[Any], spec: Any, decks: int, paced: bool = False) -> None:
        ctx = multiprocessing.get_context("spawn")  # never fork a process that runs an event loop
        self._conn, child = ctx.Pipe()
        args = (child, devices, spec, decks, paced)
        self._proc = ctx.Process(target=_sim_child, args=args, daemon=True)
        self._child = child

    async def start(self) -> None:
        self._proc.start()
        self._child.close()

    async def ask(self, *msg: Any) -> Any:
        loop = asyncio.get_running_loop()
        self._conn.send(msg)
        ready = asyncio.Event()
        loop.add_reader(self._conn.fileno(), ready.set)
        try:
            await ready.wait()
        finally:
            loop.remove_reader(self._conn.fileno())
        return self._conn.recv()

    async def stop(self) -> None:
        if self._proc.is_alive():
            self._conn.send(("stop",))
            await asyncio.to_thread(self._proc.join, 10)


DEVICES_PRIORITY_ENV = "BENCH_DEVICES_REALTIME_PRIORITY"
SHIPPED_PRIORITY = 10  # config/systemd/tablectl@.service: --realtime-priority 10
# The devices are hardware of their own at a table: the appliance's load is not theirs, so their
# simulators outrank the bench's background load (and the key watch: a device answers at once).
DEVICES_PRIORITY = 20


def _sim_child(conn: Any, devices: list[Any], spec: Any, decks: int, paced: bool) -> None:
    logs.configure(logging.ERROR)
    priority = os.environ.get(DEVICES_PRIORITY_ENV)
    if priority:  # the devices are hardware of their own: the appliance's load is not theirs
        refused = realtime(int(priority))
        assert refused is None, refused
    asyncio.run(_serve_sim(conn, devices, spec, decks, paced))


def _received(conn: Any) -> Any:
    """The bench's next message; its end closed (the bench killed) is a stop: a child left
    reading an fd at end-of-file would spin, and at realtime priority take a core."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return ("stop",)


async def _serve_sim(conn: Any, devices: list[Any], spec: Any, decks: int, paced: bool) -> None:
    sim = SimInProcess(devices, spec, decks, paced)  # in-process to the child, which is all it runs
    await sim.start()
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    loop.add_reader(conn.fileno(), lambda: inbox.put_nowait(_received(conn)))
    try:
        while (msg := await inbox.get()) != ("stop",):
            conn.send(await sim.ask(*msg))
    finally:
        loop.remove_reader(conn.fileno())
        await sim.stop()


class Marks:
    """Timestamps on the path of each press: the driver's ButtonPressed, the start and end of the
    journalled step that opens the round, and the start and end of the LockSensors write."""

    def __init__(self) -> None:
        self.emitted: list[float] = []
        self.step: list[tuple[float, float]] = []
        self.lock: list[tuple[float, float]] = []

    def install(self, sup: Supervisor) -> None:
        emit, marks = Driver.emit, self

        def timed_emit(driver: Driver, event: Any) -> None:
            if type(event).__name__ == "ButtonPressed":
                marks.emitted.append(time.perf_counter())
            emit(driver, event)

        Driver.emit = timed_emit  # type: ignore[method-assign,assignment]
        assert sup.jt is not None
        handle, queue = sup.jt.handle_async, sup.outbox.send

        async def timed_handle(inp: Any, now: float, *rest: Any) -> Any:
            t = time.perf_counter()
            step = await handle(inp, now, *rest)  # the core on the loop, the commit in its thread
            if any(e.kind == "round_started" for e in step.events):
                marks.step.append((t, time.perf_counter()))
            return step

        def timed_send(kind: Any, command: Any) -> Any:
            t = time.perf_counter()
            done = queue(kind, command)  # queued for the keypad's sender; written outside the lock
            if type(command).__name__ == "LockSensors":
                done.add_done_callback(lambda _: marks.lock.append((t, time.perf_counter())))
            return done

        sup.jt.handle_async = timed_handle  # type: ignore[method-assign]
        sup.outbox.send = timed_send  # type: ignore[method-assign]

    def split(self, pressed: list[float]) -> dict[str, dict[str, float]]:
        n = min(len(pressed), len(self.emitted), len(self.step), len(self.lock))
        parts = {
            "press_to_event": [self.emitted[i] - pressed[i] for i in range(n)],
            "event_to_step": [self.step[i][0] - self.emitted[i] for i in range(n)],
            "core_and_journal_commit": [self.step[i][1] - self.step[i][0] for i in range(n)],
            "step_to_lock_sent": [self.lock[i][0] - self.step[i][1] for i in range(n)],
            "lock_queued_to_written": [self.lock[i][1] - self.lock[i][0] for i in range(n)],
        }
        return {k: p50_p99(v) for k, v in parts.items()}


def _count_polls(driver: Any, polls: dict[str, int]) -> None:
    read_block = driver.read_block

    async def counted() -> list[int]:
        words: list[int] = await read_block()
        polls[driver.name] += 1
        return words

    driver.read_block = counted


def _bare_client(ep: Any) -> Any:
    """A plain pymodbus client of the keypad's endpoint (on a pty: no parity, see Framing.for_port)."""
    if ep.transport.value == "modbus-rtu":
        framing = ep.serial_framing.for_port(ep.path).pyserial()
        return AsyncModbusSerialClient(ep.path, baudrate=ep.baudrate, timeout=1.0, retries=0, **framing)
    return AsyncModbusTcpClient("127.0.0.1", port=ep.port)


def bare_commits(path: Path, n: int, rng: random.Random) -> list[float]:
    """One-record commits to a journal beside the table's, as far apart as the presses: the
    storage's flush after a pause is what the journalled step pays (it is far dearer than back
    to back on a virtual disk)."""
    out: list[float] = []
    with Journal.open(path) as journal:
        for i in range(n):
            time.sleep(rng.uniform(0, POLL_S) + 0.03)  # the bench's own pacing, not synchronisation
            t0 = time.perf_counter()
            journal.append("round_started", {"round": i, "boxes": [1, 2, 3]}, Classification.PUBLIC, float(i))
            out.append(time.perf_counter() - t0)
    return out


def watch_cpu_s(sup: Supervisor) -> float:
    """The key watch's process's CPU time (devices/transport/watch_process.py), user and system."""
    total = 0.0
    for driver in sup.drivers.values():
        pid = getattr(getattr(driver, "_watch", None), "pid", None)
        if pid is not None:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


def appliance_cpu_s(sup: Supervisor) -> float:
    """The controller's CPU time: its own process and the key watch's."""
    return time.process_time() + watch_cpu_s(sup)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000


def p50_p99(xs: list[float], digits: int = 3) -> dict[str, float]:
    return {"p50": round(pct(xs, 50), digits), "p99": round(pct(xs, 99), digits)}


async def bench(
    presses: int, journal_dir: Path | None = None, in_process: bool = False,
    slow: str | None = None, latched: bool = False, watch_ms: float = 0.0, rest_s: float = 10.0,
    load: bool = False, rtu: bool = False, poll_ms: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    cfg = load_table_config(TABLES / "double-back-jack.toml")
    cfg = replace(cfg, options=replace(cfg.options, direct_insert_shuffler=True))  # ruling G13
    # The shipped reference keypad latches (687a.9(b)); the one that does not is its profile with
    # the option off, written beside the run (one profile in the repository, not two).
    profile = "../devices/ref-keypad.toml"
    if not latched:
        profile = str(not_latching_keypad(Path(tempfile.mkdtemp())))
    watch = {"watch_interval_s": watch_ms / 1000} if watch_ms > 0 else {}
    if rtu:  # as the shipped table has it: on the reader's RS-485 line, at its own poll interval
        shipped = next(d for d in cfg.devices if d.name == "keypad")
        keypad = replace(shipped, options={**shipped.options, **watch})
        if not latched:
            keypad = replace(keypad, profile=load_profile(Path(profile)))
    else:
        keypad = load_devices(
            {"keypad": {"kind": "keypad", "profile": profile, "transport": "modbus-tcp",
                        "host": "127.0.0.1", "port": 0, "device_id": 3, "poll_interval_s": POLL_S, **watch}},
            TABLES, source="bench",
        )[0]  # fmt: skip
    if poll_ms is not None:  # the keypad's full poll at another interval (a diagnosis)
        keypad = replace(keypad, poll_interval_s=poll_ms / 1000)
    poll_s = keypad.poll_interval_s
    others = [replace(d, sim={**d.sim, "cycle_s": 0.2}) for d in cfg.devices if d.name != "keypad"]
    devices = [*others, keypad]
    sim = (SimInProcess if in_process else SimProcess)(devices, cfg.options.spec, cfg.options.decks, rtu)
    await sim.start()
    configs = await sim.ask("configs")
    keypad_ep = next(c.endpoint for c in configs if c.name == "keypad")
    line = [c for c in configs if rtu and c.endpoint.bus_key == keypad_ep.bus_key]
    polls: dict[str, int] = {c.name: 0 for c in line}
    rng = random.Random(1)
    latencies: list[float] = []
    to_command: list[float] = []
    bare: list[float] = []
    paced: list[float] = []
    pressed: list[float] = []
    marks = Marks()
    loads: dict[str, float] = {}  # the one-minute load average as each figure was taken
    with tempfile.TemporaryDirectory(dir=journal_dir) as tmp:
        sup = Supervisor(cfg, Path(tmp) / "j.db", devices=configs)
        stopped = False
        await sup.start()
        marks.install(sup)
        for c in line:  # each full poll of a device on the keypad's line, counted
            _count_polls(sup.drivers[c.name], polls)
        background = BackgroundLoad(Path(tmp)) if load else None
        try:
            async with asyncio.timeout(30):
                await sup.ready.wait()
                for back in sup.table.batches:
                    await sup.command("inspection_verified", {"back": back, "dealer": "d"}, "f", "floor")
                await sup.wait_for(lambda: sup.table.shoe_back is not None)
            if slow is not None:  # from now on (the shoe holds its batch: the table can deal)
                await sim.ask("slow", slow)
            await sim.ask("bets")
            if background is not None:  # from now to the last bare figure: every figure under it
                background.start()
                await asyncio.sleep(5)  # the spinners up and the load average climbing (pacing only)
            # At rest first: every device polled as configured (the keypad's watch included),
            # nothing pressed; the bench itself only sleeps, so this is the appliance's own share.
            wall0, cpu0, polled = time.perf_counter(), appliance_cpu_s(sup), dict(polls)
            watch0 = watch_cpu_s(sup)
            await asyncio.sleep(rest_s)
            rest_wall = time.perf_counter() - wall0
            rest_share = (appliance_cpu_s(sup) - cpu0) / rest_wall
            watch_share = (watch_cpu_s(sup) - watch0) / rest_wall
            polls_per_s = {n: round((polls[n] - polled[n]) / rest_wall, 2) for n in polls}
            loads["appliance_cpu_share"] = load_average()
            wall0, cpu0 = time.perf_counter(), appliance_cpu_s(sup)
            for _ in range(presses):
                # A dealer presses at any moment of the poll cycle, not just after a poll.
                await asyncio.sleep(rng.uniform(0, poll_s))
                async with asyncio.timeout(5):
                    t0, t1, sent = await sim.ask("press")
                pressed.append(t0)
                latencies.append(t1 - t0)
                to_command.append(sent - t0)
                await sup.wait_for(lambda: sup.table.in_round)  # the lock comes before the decision
                result = await sup.command("void_round", {"section": "673a.13(h)(1)"}, "floor-1", "floor")
                assert result["ok"], result
                async with asyncio.timeout(5):
                    await sim.ask("unlocked")
            pressing_wall, pressing_cpu = time.perf_counter() - wall0, appliance_cpu_s(sup) - cpu0
            loads["start_to_locked_ms"] = load_average()
            cpu_share = pressing_cpu / pressing_wall
            if rtu:  # the controller lets go of the line: the bench is then its only master
                await sup.stop()
                stopped = True
            # The bare read: on RTU one register (the line's floor's read), else the poll's 33.
            address, words = (24, 1) if rtu else (0, 33)
            async with _bare_client(keypad_ep) as client:
                for _ in range(presses):
                    t0 = time.perf_counter()
                    rr = await client.read_holding_registers(address, count=words, device_id=3)
                    bare.append(time.perf_counter() - t0)
                    assert not rr.isError()
                schedule = PollSchedule(REAL_CLOCK, poll_s)
                for _ in range(presses):  # the same read at the poll's own rhythm, fixed rate
                    await asyncio.sleep(schedule.wait_s())
                    t0 = time.perf_counter()
                    rr = await client.read_holding_registers(address, count=words, device_id=3)
                    paced.append(time.perf_counter() - t0)
                    assert not rr.isError()
            loads["bare_modbus_rtt_ms"] = load_average()
        finally:
            if not stopped:
                await sup.stop()
            await sim.stop()
        try:
            commits = bare_commits(Path(tmp) / "bare.db", presses, rng)  # the table stopped: nothing waits
            loads["bare_journal_commit_ms"] = load_average()
        finally:
            if background is not None:
                background.stop()
    window, rtt = p50_p99(latencies, 2), p50_p99(paced)
    return {
        "presses": len(latencies), "poll_interval_ms": poll_s * 1000,
        "keypad_transport": f"modbus-rtu {keypad_ep.baudrate} {keypad_ep.serial_framing.describe()}, paced"
                            if rtu else "modbus-tcp",
        # On RTU: the one-register read's time on the wire at the line's baud and framing, and
        # each device on the line's full polls a second at rest (against its configured rate).
        "line_floor_ms": round(read_floor_s(keypad_ep.baudrate, keypad_ep.serial_framing) * 1000, 2)
                         if rtu else None,
        "window_over_line_floor_p99": round(window["p99"] / (read_floor_s(keypad_ep.baudrate,
                                            keypad_ep.serial_framing) * 1000), 2) if rtu else None,
        "polls_per_s": {n: {"measured": polls_per_s[n], "configured": round(1 / c.poll_interval_s, 2)}
                        for c in line for n in [c.name]},
        "simulators": "in the controller's process" if in_process else "in their own process",
        "background_load": background.describe() if background is not None else None,
        "load_average_1m": loads,  # beside each figure: taken as it was finished
        "start_to_locked_ms": {**window,
                               "max": round(max(latencies) * 1000, 2),
                               "mean": round(statistics.mean(latencies) * 1000, 2)},
        # The window in bare round trips (at the poll's rhythm): what the path costs beyond the wire.
        "window_over_bare_rtt": {"p50": round(window["p50"] / rtt["p50"], 2),
                                 "p99": round(window["p99"] / rtt["p99"], 2)},
        "start_to_lock_command_ms": p50_p99(to_command, 2),
        "appliance_cpu_share": round(rest_share, 4),
        # Of it, the key watch's process (its looks: a timer's wakeup, a send and a receive each).
        "watch_process_cpu_share": round(watch_share, 4),
        "appliance_cpu_share_while_pressing": round(cpu_share, 4),
        "presses_per_s": round(len(latencies) / pressing_wall, 2),
        # What each press, its lock, the floor's void and the unlock cost beyond the polling
        # (the bench's own pipe to the simulators included).
        "cpu_ms_per_press": round((pressing_cpu - rest_share * pressing_wall) / len(latencies) * 1000, 3),
        "keypad_watch_ms": watch_ms or None,
        "realtime_priority": watch_priority(),  # the key watch's process, as tablectl run's
        "devices_realtime_priority": int(os.environ.get(DEVICES_PRIORITY_ENV, 0)) or None,
        "slow_device": slow, "keypad_latches_on_start_game": latched,
        # Every round trip on the press's path follows a pause (the poll that sees the key, the
        # lock's write after the fsync), so the target counts the bare read made at the poll's
        # rhythm; the same read back to back, hot, is printed beside it with what it would make.
        "bare_modbus_rtt_ms": rtt,
        "target_p99_ms": round(poll_s * 1000 + 3 * pct(paced, 99), 2),
        "back_to_back_modbus_rtt_ms": p50_p99(bare),
        "back_to_back_target_p99_ms": round(poll_s * 1000 + 3 * pct(bare, 99), 2),
        "bare_journal_commit_ms": p50_p99(commits),
        "journal_dir": str(journal_dir or Path(tempfile.gettempdir())),
        "split_ms": marks.split(pressed),
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--presses", type=int, default=1000)
    p.add_argument("--journal-dir", type=Path, default=None, help="where the journal goes (default: $TMPDIR)")
    p.add_argument("--sim-in-process", action="store_true", help="simulators in the controller's loop")
    p.add_argument("--slow-device", default=None, help="a device that never answers within its timeout")
    p.add_argument(
        "--latched",
        action="store_true",
        help="on Modbus TCP: the shipped keypad, which latches its sensors on Start Game",
    )
    p.add_argument("--watch-ms", type=float, default=0.0, help="the keypad's key watch interval (0: none)")
    p.add_argument("--rest-s", type=float, default=10.0, help="seconds at rest for the CPU share")
    p.add_argument(
        "--load",
        action="store_true",
        help="CPU spinners on every core and an fsync writer beside the journal",
    )
    p.add_argument(
        "--rtu", action="store_true", help="the shipped (latching) keypad on the shipped RS-485 line, paced"
    )
    p.add_argument(
        "--not-latching",
        action="store_true",
        help="with --rtu: the keypad that does not latch, on the same line (to compare)",
    )
    p.add_argument("--poll-ms", type=float, default=None, help="the keypad's full poll interval")
    p.add_argument(
        "--realtime-priority",
        type=int,
        default=SHIPPED_PRIORITY,
        help="as tablectl run's: SCHED_FIFO for the key watch's process (0: none)",
    )
    p.add_argument(
        "--devices-realtime-priority",
        type=int,
        default=DEVICES_PRIORITY,
        help="SCHED_FIFO for the simulators' process (0: none)",
    )
    args = p.parse_args()
    if args.not_latching and not args.rtu:
        p.error("--not-latching is for --rtu (on Modbus TCP the keypad does not latch unless --latched)")
    if args.not_latching and args.latched:
        p.error("--latched and --not-latching say opposite things")
    latched = args.latched or (args.rtu and not args.not_latching)  # the shipped keypad on the line
    if args.devices_realtime_priority:  # read by the simulators' child process
        os.environ[DEVICES_PRIORITY_ENV] = str(args.devices_realtime_priority)
    logs.configure(logging.ERROR)
    if args.realtime_priority:  # the key watch's process, as tablectl run gives it
        set_watch_priority(args.realtime_priority)
    run = bench(args.presses, args.journal_dir, args.sim_in_process, args.slow_device, latched,
                args.watch_ms, args.rest_s, args.load, args.rtu, args.poll_ms)  # fmt: skip
    print(json.dumps(asyncio.run(run), indent=1))


if __name__ == "__main__":
    main()
