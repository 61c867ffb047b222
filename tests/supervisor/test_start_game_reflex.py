"""The bet sensors at Start Game (687a.9(b)). The shipped keypad latches them itself at the press:
a chip placed after it is never sensed, whatever the poll. A keypad that does not latch (the
shipped profile with the option off, tests/support/keypads.py) gets the same from its driver,
which locks them the moment it reads the press, before the table decides and the journal
commits. Either way the journal records the lock with the decision; a refused Start Game unlocks
them and says why; a kill -9 between the lock and the commit restarts with the sensors as the
journal has them, and no chip placed meanwhile is wagered.

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
from tests.support.keypads import not_latching_run_config, not_latching_table

MakeRig = Callable[..., Awaitable[Rig]]

GAME = "down-under"  # its keypad shares an RTU line: the reflex of the full poll, no watch
LATCHING = "double-back-jack"  # the shipped table the issue names: its keypad latches, on RTU too
# (game, whether its keypad latches): the shipped keypad, and the one that does not.
# The shipped keypad, which latches; one that does not, on the RS-485 line (the full poll's reflex)
# or on Modbus TCP with a key watch, whose own process makes the reflex's write
# (devices/transport/watch_process.py).
ON_TCP = {"transport": "modbus-tcp", "host": "127.0.0.1", "path": None, "baudrate": None, "gap_ms": None,
          "watch_interval_s": 0.002}  # fmt: skip
KEYPADS = [pytest.param(LATCHING, True, id="latching"), pytest.param(GAME, False, id="not-latching")]
KILLED_WITH = [
    pytest.param(LATCHING, True, None, id="latching"),
    pytest.param(GAME, False, None, id="not-latching"),
    pytest.param(GAME, False, ON_TCP, id="not-latching-tcp-watch"),
]


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


def read_after(sim: SimTable) -> asyncio.Event:
    """Set when the simulated keypad next answers a read (its registers rendered for the wire)."""
    seen = asyncio.Event()
    model = sim.devices["keypad"].model
    update = model.update

    def updated() -> None:
        update()
        seen.set()

    model.update = updated
    return seen


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


async def _bets_on_boxes_1_and_2(rig: Rig) -> int:
    """Between rounds, chips on boxes 1 and 2, seen by the table: the journal's length then."""
    await _between_rounds(rig)
    for box in (1, 2):
        rig.dealer.keypad.place_bet(box, 1)
    await rig.supervisor.settle("keypad")
    return len(journal_kinds(rig.supervisor.journal_path))


async def test_a_latching_keypad_takes_no_chip_after_the_press_whatever_the_poll(table_rig: MakeRig) -> None:
    """The shipped Double Back Jack table, its keypad on the RS-485 line: the press freezes the
    sensors in the device, so a chip put down after it, before the controller has read anything,
    is never sensed. The driver writes no lock of its own: the first is the table's, after the
    journalled decision."""
    rig = await table_rig(LATCHING)
    sup, keypad = rig.supervisor, rig.dealer.keypad
    before = await _bets_on_boxes_1_and_2(rig)
    reg = rig.sim.devices["keypad"].register_sim
    assert reg is not None
    locks: list[int] = []  # the journal's length as the keypad carries out each lock

    def on_command(name: str, _: Any) -> None:
        if name == "lock":
            locks.append(len(journal_kinds(sup.journal_path)))

    reg.on_command = on_command
    keypad.press(Key.START_GAME)
    keypad.place_bet(3, 1)  # past-posting: after the press, before any poll
    await sup.settle("keypad")
    assert keypad.latched_at[-1] == keypad.key_seq and keypad.sensed() == {(1, 1), (2, 1)}
    added = journal_kinds(sup.journal_path)[before:]
    assert [k for k, _ in added[:2]] == ["sensors_locked", "round_started"]
    assert added[0][1]["key_seq"] == keypad.key_seq
    assert [w["seat"] for w in added[1][1]["wagers"]] == [1, 2]
    assert (3, 1) not in sup.translator.bets
    assert locks and min(locks) >= before + 2  # only the table's own, after the decision's commit


async def test_the_sensors_lock_before_the_journal_commits(table_rig: MakeRig, tmp_path: Path) -> None:
    """The keypad that does not latch: its driver's reflex."""
    rig = await table_rig(GAME, table=not_latching_table(GAME, tmp_path))
    sup, keypad = rig.supervisor, rig.dealer.keypad
    before = await _bets_on_boxes_1_and_2(rig)
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


@pytest.mark.parametrize(("game", "latches"), KEYPADS)
async def test_a_refused_start_game_unlocks_and_says_why(
    table_rig: MakeRig, tmp_path: Path, game: str, latches: bool
) -> None:
    rig = await table_rig(game, table=None if latches else not_latching_table(game, tmp_path))
    sup, keypad = rig.supervisor, rig.dealer.keypad
    await _between_rounds(rig)
    rig.dealer.reader.faults.dead = True  # 673a.13(j): no round till the reader is replaced
    await sup.settle("reader")
    keypad.place_bet(1, 1)
    await sup.settle("keypad")
    keypad.press(Key.START_GAME)
    await sup.settle("keypad")
    assert (keypad.key_seq in keypad.latched_at) is latches  # the device's own latch, or none
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


@pytest.mark.parametrize(("game", "latches", "tcp"), KILLED_WITH)
async def test_a_kill_between_the_lock_and_the_commit_restarts_as_the_journal_says(
    tmp_path: Path, game: str, latches: bool, tcp: dict[str, object] | None
) -> None:
    """Latching: the device locked at the press, the kill comes once the controller has read it;
    not latching: once the driver's lock is on the device. Either way its step waits for the disk."""
    cfg = load_table_config(table_file(game) if latches else not_latching_table(game, tmp_path))
    fast = [replace(d, sim={**d.sim, "cycle_s": 0.3}) for d in cfg.devices]
    if tcp is not None:
        fast = [_on_tcp(d) if d.name == "keypad" else d for d in fast]
    sim = SimTable(fast, cfg.options.spec, seed=5, decks=cfg.options.decks, direct_insert=True)
    await sim.start()
    journal = tmp_path / "table.db"
    _opened_journal(game, journal)
    changes = {"keypad": tcp} if tcp is not None else None
    run_config = concrete_config(game, sim, tmp_path / "table.toml", changes=changes)
    ctl = Controller(run_config if latches else not_latching_run_config(run_config, tmp_path), journal)
    keypad, shoe = sim.devices["keypad"].model, sim.devices["shoe"].model
    try:
        await ctl.start()
        await ctl.until(lambda line: line["event"] == "step" and "batch_to_shoe" in line["kinds"])
        await ctl.until(lambda line: line["event"] == "step" and "batch_to_shuffler" in line["kinds"])
        shoe.draw()  # 673a.7(c): the burn card
        await ctl.step_from("shoe")
        for box in (1, 2):
            keypad.place_bet(box, 1)
        with commit_held(journal):
            before = journal_kinds(journal)  # read under the hold: a shuffler's step may commit until it
            # Latching: locked by the press itself; the kill once the controller has read it.
            locked = read_after(sim) if latches else lock_written(sim)
            keypad.press(Key.START_GAME)
            async with asyncio.timeout(GUARD_S):
                await locked.wait()  # the lock is on the device; the controller's step waits for the disk
            assert keypad.locked
            await ctl.kill9()
        assert journal_kinds(journal) == before  # neither the lock nor the round: one transaction
        assert not replayed(journal).in_round
        keypad.place_bet(3, 1)  # while no controller runs: the locked sensors do not take it
        keypad.place_bet(4, 2)
        watches = [line["pid"] for line in ctl.lines if line["event"] == "watch_started"]
        assert len(watches) == (tcp is not None)
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
