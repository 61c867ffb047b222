"""No device can delay another, nor the journal's flush (issue: the past-posting window,
687a.9(b)): a device stuck in its timeout holds up its own commands only, a slow commit its own
step only. Shown with events on the virtual table: the shuffler's wire is held (no answer until
released, its timeout the longest allowed, 30 s) while a command to it is outstanding, and the
keypad's Start Game is still journalled and its sensors locked."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from controller.supervisor.rig import Rig
from devices import commands as dc
from devices.events import Key, Slot
from devices.profiles import DeviceKind
from tests.supervisor.conftest import journal_kinds

GUARD_S = 60.0  # failure guard only: a passing test never gets near it (a start under load takes 10 s+)

MakeRig = Callable[..., Awaitable[Rig]]


async def test_a_device_stuck_in_its_timeout_does_not_delay_the_keypads_lock(table_rig: MakeRig) -> None:
    rig = await table_rig("double-back-jack")
    sup, dealer = rig.supervisor, rig.dealer
    await dealer.open_table()
    shuffler = sup.drivers["shuffler"]
    shuffler.config = replace(shuffler.config, timeout_s=30.0)  # the longest a profile may allow
    wire = rig.sim.devices["shuffler"].register_sim
    assert wire is not None
    wire.faults.hold()  # every request to the shuffler waits, unanswered, until released
    try:
        # A command to the stuck shuffler, queued as a step queues it (under the supervisor's lock).
        async with sup.lock:
            stuck = sup.outbox.send(DeviceKind.SHUFFLER, dc.StartShuffle(Slot.A))
        for box in (1, 2):
            dealer.keypad.place_bet(box, 1)
        dealer.keypad.press(Key.START_GAME)
        sup.progress.poke["keypad"].set()  # the keypad's next poll, as its schedule would make it
        await sup.wait_for(lambda: sup.table.in_round and dealer.keypad.locked)
        # The round is journalled and the keypad locked while the shuffler still has not answered.
        assert not stuck.done()
        assert not sup.idle()  # the outstanding command is still the supervisor's business
    finally:
        wire.faults.release()
    assert await stuck in (True, False)  # it ends (carried out or refused) once the device answers


async def test_a_slow_journal_flush_holds_up_its_own_step_only(table_rig: MakeRig) -> None:
    """The journal commits in a thread of its own: while a step's commit (its fsync) is held, the
    event loop polls the other devices, and the step's effect (the keypad's lock) still waits
    for the commit (ARCHITECTURE 4: the journal before every effect)."""
    rig = await table_rig("double-back-jack")
    sup, dealer = rig.supervisor, rig.dealer
    await dealer.open_table()
    assert sup.jt is not None
    journal = sup.jt.journal
    append_many = journal.append_many
    entered, release = threading.Event(), threading.Event()

    def slow_flush(rows: Any) -> Any:  # in the journal's thread: a disk that takes its time
        entered.set()
        release.wait(GUARD_S)
        return append_many(rows)

    journal.append_many = slow_flush  # type: ignore[method-assign,assignment]
    try:
        for box in (1, 2):
            dealer.keypad.place_bet(box, 1)
        dealer.keypad.press(Key.START_GAME)
        sup.progress.poke["keypad"].set()
        assert await asyncio.get_running_loop().run_in_executor(None, entered.wait, GUARD_S)
        # The round's commit is held in the journal's thread; the loop goes on with the shoe.
        polls = sup.progress.polls_done["shoe"]
        sup.progress.poke["shoe"].set()
        await sup.wait_for(lambda: sup.progress.polls_done["shoe"] > polls)
        # No effect of the step before its record is on disk; the sensors' lock is the keypad
        # driver's, made as it read the press (687a.9(b): locking only stops wagers).
        assert dealer.keypad.locked
        assert "round_started" not in [k for k, _ in journal_kinds(sup.journal_path)]
    finally:
        release.set()
    await sup.wait_for(lambda: sup.table.in_round and sup.idle())
    assert "round_started" in [k for k, _ in journal_kinds(sup.journal_path)]
