"""No device can delay another (issue: the past-posting window, 687a.9(b)): a device stuck in its
timeout holds up its own commands only. Shown with events on the virtual table: the shuffler's
wire is held (no answer until released, its timeout the longest allowed, 30 s) while a command to
it is outstanding, and the keypad's Start Game is still journalled and its sensors locked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from controller.supervisor.rig import Rig
from devices import commands as dc
from devices.events import Key, Slot
from devices.profiles import DeviceKind

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
        async with sup._lock:
            stuck = sup._send_device(DeviceKind.SHUFFLER, dc.StartShuffle(Slot.A))
        for box in (1, 2):
            dealer.keypad.place_bet(box, 1)
        dealer.keypad.press(Key.START_GAME)
        sup._poke["keypad"].set()  # the keypad's next poll, as its schedule would make it
        await sup.wait_for(lambda: sup.table.in_round and dealer.keypad.locked)
        # The round is journalled and the keypad locked while the shuffler still has not answered.
        assert not stuck.done()
        assert not sup.idle()  # the outstanding command is still the supervisor's business
    finally:
        wire.faults.release()
    assert await stuck in (True, False)  # it ends (carried out or refused) once the device answers
