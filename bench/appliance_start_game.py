"""Keypad Start Game to bet sensors locked, through Modbus TCP, beside the bare Modbus round trip.

The keypad of a Double Back Jack table is put on Modbus TCP and polled at 20 Hz (the default
50 ms poll); the rest of the table as in config/tables/double-back-jack.toml. Each sample: chips
on the sensors, Start Game pressed on the simulated keypad (t0); the supervisor's poll sees the
key, the core opens the round, the journal commits, the lock command is written; the simulator
carrying out ``lock`` is t1. The floor then voids the round so the next press starts afresh. The
bare round trip is a plain pymodbus read of the keypad's 33 registers in the same run, back to
back (the target's) and paced like the polls (printed beside it: on a VM a pause makes everything
after it slower).
Target: p99 within the poll interval plus three round trips (the past-posting window).

The run also splits each sample where the time goes: press to the driver's event (the poll phase
plus the read), the queue hop to the supervisor, the core's decision with the journal's commit
(an fsync: the record is on disk before the lock is sent, ARCHITECTURE.md 4), and the lock's
write. ``--journal-dir`` puts the journal elsewhere, e.g. on /dev/shm, to see what the storage's
flush costs: tmpfs is not durable, so that run is a diagnosis, never the figure.

    .venv/bin/python bench/appliance_start_game.py [--presses 1000] [--journal-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pymodbus.client import AsyncModbusTcpClient

from controller.journal import Classification, Journal
from controller.supervisor import logs
from controller.supervisor import supervisor as supervisor_module
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import TABLES
from controller.supervisor.supervisor import Supervisor
from devices.config import load_devices
from devices.drivers.base import Driver
from devices.events import Key
from sim.table import SimTable

POLL_S = 0.05


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

        Driver.emit = timed_emit  # type: ignore[method-assign]
        assert sup.jt is not None
        handle, send = sup.jt.handle, sup._send_device

        def timed_handle(inp: Any, now: float) -> Any:
            t = time.perf_counter()
            step = handle(inp, now)
            if any(e.kind == "round_started" for e in step.events):
                marks.step.append((t, time.perf_counter()))
            return step

        async def timed_send(kind: Any, command: Any) -> bool:
            t = time.perf_counter()
            ok = await send(kind, command)
            if type(command).__name__ == "LockSensors":
                marks.lock.append((t, time.perf_counter()))
            return ok

        sup.jt.handle = timed_handle  # type: ignore[method-assign]
        sup._send_device = timed_send  # type: ignore[method-assign]

    def split(self, pressed: list[float]) -> dict[str, dict[str, float]]:
        n = min(len(pressed), len(self.emitted), len(self.step), len(self.lock))
        parts = {
            "press_to_event": [self.emitted[i] - pressed[i] for i in range(n)],
            "event_to_step": [self.step[i][0] - self.emitted[i] for i in range(n)],
            "core_and_journal_commit": [self.step[i][1] - self.step[i][0] for i in range(n)],
            "step_to_lock_sent": [self.lock[i][0] - self.step[i][1] for i in range(n)],
            "lock_write": [self.lock[i][1] - self.lock[i][0] for i in range(n)],
        }
        return {k: {"p50": round(pct(v, 50), 3), "p99": round(pct(v, 99), 3)} for k, v in parts.items()}


_ = supervisor_module  # the class the marks wrap lives there


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


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000


async def bench(presses: int, journal_dir: Path | None = None) -> dict[str, Any]:
    cfg = load_table_config(TABLES / "double-back-jack.toml")
    keypad = load_devices(
        {"keypad": {"kind": "keypad", "profile": "../devices/ref-keypad.toml", "transport": "modbus-tcp",
                    "host": "127.0.0.1", "port": 0, "device_id": 3, "poll_interval_s": POLL_S}},
        TABLES, source="bench",
    )[0]  # fmt: skip
    others = [replace(d, sim={**d.sim, "cycle_s": 0.2}) for d in cfg.devices if d.name != "keypad"]
    devices = [*others, keypad]
    sim = SimTable(devices, cfg.options.spec, seed=1, decks=cfg.options.decks)
    await sim.start()
    model = sim.devices["keypad"].model
    changed = asyncio.Event()
    locked_at: list[float] = []

    def on_command(name: str, _: Any) -> None:
        if name == "lock":
            locked_at.append(time.perf_counter())
        changed.set()

    reg = sim.devices["keypad"].register_sim
    assert reg is not None
    reg.on_command = on_command
    rng = random.Random(1)
    latencies: list[float] = []
    bare: list[float] = []
    paced: list[float] = []
    pressed: list[float] = []
    marks = Marks()
    with tempfile.TemporaryDirectory(dir=journal_dir) as tmp:
        sup = Supervisor(cfg, Path(tmp) / "j.db", devices=sim.driver_configs())
        await sup.start()
        marks.install(sup)
        try:
            async with asyncio.timeout(30):
                await sup.ready.wait()
                for back in sup.table.batches:
                    await sup.command("inspection_verified", {"back": back, "dealer": "d"}, "f", "floor")
                await sup.wait_for(lambda: sup.table.shoe_back is not None)
            for box in range(1, 7):
                model.place_bet(box, 1)
            for _ in range(presses):
                # A dealer presses at any moment of the poll cycle, not just after a poll.
                await asyncio.sleep(rng.uniform(0, POLL_S))
                changed.clear()
                before = len(locked_at)
                t0 = time.perf_counter()
                pressed.append(t0)
                model.press(Key.START_GAME)
                async with asyncio.timeout(5):
                    while len(locked_at) == before:
                        await changed.wait()
                        changed.clear()
                latencies.append(locked_at[-1] - t0)
                result = await sup.command("void_round", {"section": "bench"}, "floor-1", "floor")
                assert result["ok"], result
                async with asyncio.timeout(5):
                    while model.locked:
                        await changed.wait()
                        changed.clear()
            server = sim.devices["keypad"].server
            async with AsyncModbusTcpClient("127.0.0.1", port=server.port) as client:  # type: ignore[union-attr]
                for _ in range(presses):
                    t0 = time.perf_counter()
                    rr = await client.read_holding_registers(0, count=33, device_id=3)
                    bare.append(time.perf_counter() - t0)
                    assert not rr.isError()
                for _ in range(presses):  # the same read, paced like the polls: the cold path
                    await asyncio.sleep(rng.uniform(0, POLL_S))
                    t0 = time.perf_counter()
                    rr = await client.read_holding_registers(0, count=33, device_id=3)
                    paced.append(time.perf_counter() - t0)
                    assert not rr.isError()
        finally:
            await sup.stop()
            await sim.stop()
        commits = bare_commits(Path(tmp) / "bare.db", presses, rng)  # the table stopped: nothing waits
    return {
        "presses": len(latencies), "poll_interval_ms": POLL_S * 1000,
        "start_to_locked_ms": {"p50": round(pct(latencies, 50), 2), "p99": round(pct(latencies, 99), 2),
                               "max": round(max(latencies) * 1000, 2),
                               "mean": round(statistics.mean(latencies) * 1000, 2)},
        "bare_modbus_rtt_ms": {"p50": round(pct(bare, 50), 3), "p99": round(pct(bare, 99), 3)},
        # The target counts back-to-back round trips, the stricter reading; the paced ones (a
        # read after a pause, as each poll is) are printed beside them.
        "target_p99_ms": round(POLL_S * 1000 + 3 * pct(bare, 99), 2),
        "paced_modbus_rtt_ms": {"p50": round(pct(paced, 50), 3), "p99": round(pct(paced, 99), 3)},
        "bare_journal_commit_ms": {"p50": round(pct(commits, 50), 3), "p99": round(pct(commits, 99), 3)},
        "journal_dir": str(journal_dir or Path(tempfile.gettempdir())),
        "split_ms": marks.split(pressed),
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--presses", type=int, default=1000)
    p.add_argument("--journal-dir", type=Path, default=None, help="where the journal goes (default: $TMPDIR)")
    args = p.parse_args()
    logs.configure(logging.ERROR)
    print(json.dumps(asyncio.run(bench(args.presses, args.journal_dir)), indent=1))


if __name__ == "__main__":
    main()
