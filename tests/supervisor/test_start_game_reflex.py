"""The bet sensors at Start Game (687a.9(b)): the keypad's driver locks them the moment it reads
the press, before the table decides and the journal commits; the journal records the lock with
the decision; a refused Start Game unlocks them and says why; a kill -9 between the lock and the
commit restarts with the sensors as the journal has them, and no chip placed meanwhile is wagered.

The journal's commit is held by the test the way a slow disk holds it: another connection keeps
SQLite's write lock (a real file, a real lock), so "before the commit" is a state the test waits
in, not a race it times.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.shipped import table_file
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import TABLES, Rig, concrete_config
from devices.config import DeviceConfig
from devices.config_file import load_devices
from devices.events import Key
from sim.table import SimTable
from tests.supervisor.conftest import GUARD_S, journal_kinds, replayed
from tests.supervisor.test_kill9 import Controller, _opened_journal

MakeRig = Callable[..., Awaitable[Rig]]

GAME = "down-under"  # its keypad shares an RTU line: the reflex of the full poll, no watch


@contextmanager
def commit_held(journal: Path) -> Iterator[None]:
    """The journal's writes wait while inside (SQLite's write lock, held by another connection)."""
    conn = sqlite3.connect(journal, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def lock_written(sim: SimTable) -> asyncio.Event:
    """Set when the simulated keypad carries out ``lock`` (its command block, as on the wire)."""
    seen = asyncio.Event()
    reg = sim.devices["keypad"].register_sim
    assert reg is not None

    def on_command(name: str, _: Any) -> None:
        if name == "lock":
            seen.set()

    reg.on_command = on_command
    return seen


async def _between_rounds(rig: Rig) -> None:
    await rig.dealer.open_table()
    await rig.dealer.play_round()  # the burn card and a first round: the table waits for bets


async def test_the_sensors_lock_before_the_journal_commits(table_rig: MakeRig) -> None:
    rig = await table_rig(GAME)
    sup, keypad = rig.supervisor, rig.dealer.keypad
    await _between_rounds(rig)
    for box in (1, 2):
        keypad.place_bet(box, 1)
    await sup.settle("keypad")
    before = len(journal_kinds(sup.journal_path))
    locked = lock_written(rig.sim)
    with commit_held(sup.journal_path):
        keypad.press(Key.START_GAME)
        sup.drivers["keypad"].wake.set()  # the keypad's next poll; its commit waits on the lock
        async with asyncio.timeout(GUARD_S):
            await locked.wait()
        assert keypad.locked and len(journal_kinds(sup.journal_path)) == before  # nothing committed yet
        keypad.place_bet(3, 1)  # past-posting: too late, the sensors are locked
    await sup.settle("keypad")  # the step's commit, once the disk is free
    added = journal_kinds(sup.journal_path)[before:]
    assert [k for k, _ in added[:2]] == ["sensors_locked", "round_started"]  # in one transaction
    assert added[0][1]["device"] == "keypad" and added[0][1]["key_seq"] == keypad.key_seq
    assert [w["seat"] for w in added[1][1]["wagers"]] == [1, 2]
    assert keypad.locked


async def test_a_refused_start_game_unlocks_and_says_why(table_rig: MakeRig) -> None:
    rig = await table_rig(GAME)
    sup, keypad = rig.supervisor, rig.dealer.keypad
    await _between_rounds(rig)
    rig.dealer.reader.faults.dead = True  # 673a.13(j): no round till the reader is replaced
    await sup.settle("reader")
    keypad.place_bet(1, 1)
    await sup.settle("keypad")
    keypad.press(Key.START_GAME)
    await sup.settle("keypad")
    assert not sup.table.in_round and not keypad.locked
    kinds = journal_kinds(sup.journal_path)
    (lock, lk), (unlock, uk) = kinds[-2:]
    assert (lock, unlock) == ("sensors_locked", "sensors_unlocked")
    assert lk["key_seq"] == uk["key_seq"] == keypad.key_seq
    assert uk["section"] == sup.table.halted[0].section and "reader" in uk["reason"]
    assert uk["device_seen"]["counters"]["key_seq"] == keypad.key_seq  # not read again at a restart
    keypad.place_bet(2, 1)  # the sensors take chips again
    await sup.settle("keypad")
    assert (2, 1) in sup.translator.bets


# The keypad as the example has it (on the RS-485 line: the full poll's reflex), or on Modbus TCP
# with a key watch, whose process makes the reflex's write (devices/transport/watch_process.py).
KEYPADS = {
    "rtu-poll": None,
    "tcp-watch": {"transport": "modbus-tcp", "host": "127.0.0.1", "path": None, "baudrate": None,
                  "gap_ms": None, "watch_interval_s": 0.002},
}  # fmt: skip


@pytest.mark.parametrize("keypad_on", sorted(KEYPADS))
async def test_a_kill_between_the_lock_and_the_commit_restarts_as_the_journal_says(
    tmp_path: Path, keypad_on: str
) -> None:
    cfg = load_table_config(table_file(GAME))
    fast = [replace(d, sim={**d.sim, "cycle_s": 0.3}) for d in cfg.devices]
    change = KEYPADS[keypad_on]
    if change is not None:
        fast = [_on_tcp(d) if d.name == "keypad" else d for d in fast]
    sim = SimTable(fast, cfg.options.spec, seed=5, decks=cfg.options.decks, direct_insert=True)
    await sim.start()
    journal = tmp_path / "table.db"
    _opened_journal(GAME, journal)
    changes = {"keypad": change} if change is not None else None
    ctl = Controller(concrete_config(GAME, sim, tmp_path / "table.toml", changes=changes), journal)
    keypad, shoe = sim.devices["keypad"].model, sim.devices["shoe"].model
    try:
        await ctl.start()
        await ctl.until(lambda line: line["event"] == "step" and "batch_to_shoe" in line["kinds"])
        await ctl.until(lambda line: line["event"] == "step" and "batch_to_shuffler" in line["kinds"])
        shoe.draw()  # 673a.7(c): the burn card
        await ctl.step_from("shoe")
        for box in (1, 2):
            keypad.place_bet(box, 1)
        before = journal_kinds(journal)
        locked = lock_written(sim)
        with commit_held(journal):
            keypad.press(Key.START_GAME)
            async with asyncio.timeout(GUARD_S):
                await locked.wait()  # the driver's lock is on the device; its step waits for the disk
            await ctl.kill9()
        assert journal_kinds(journal) == before  # neither the lock nor the round: one transaction
        assert not replayed(journal).in_round
        keypad.place_bet(3, 1)  # while no controller runs: the locked sensors do not take it
        keypad.place_bet(4, 2)
        watches = [line["pid"] for line in ctl.lines if line["event"] == "watch_started"]
        assert len(watches) == (change is not None)
        for watch in watches:
            await _ended(watch)  # no orphan watch: its end of the socket pair closed with the table

        await ctl.start()  # the keypad holds the press: read again from the journal's key counter
        await ctl.until(lambda line: line["event"] == "step" and "round_started" in line["kinds"])
        added = journal_kinds(journal)[len(before) :]  # the shuffler's news while it was down, too
        at = [k for k, _ in added].index("sensors_locked")
        assert added[at + 1][0] == "round_started"
        assert [w["seat"] for w in added[at + 1][1]["wagers"]] == [1, 2]  # nothing wagered in between
        assert replayed(journal).in_round and keypad.locked  # as the journal says: a round in play
        assert await ctl.terminate() == 0
    finally:
        if ctl.proc is not None and ctl.proc.returncode is None:
            await ctl.kill9()
        await sim.stop()


def _on_tcp(keypad: DeviceConfig) -> DeviceConfig:
    """The example's keypad served on Modbus TCP instead (its profile, id and simulation kept)."""
    [tcp] = load_devices(
        {"keypad": {"kind": "keypad", "profile": str(keypad.profile.path), "transport": "modbus-tcp",
                    "host": "127.0.0.1", "port": 0, "device_id": keypad.device_id,
                    "watch_interval_s": 0.002}},
        TABLES, source="test",
    )  # fmt: skip
    return replace(tcp, sim=keypad.sim)


async def _ended(pid: int) -> None:
    """Until the process is gone: its pidfd becomes readable when it exits (it is not our child,
    so no wait). The watch notices its table's end at its next look, within ms."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(fd, ended.set)
    try:
        async with asyncio.timeout(GUARD_S):
            await ended.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)
