"""Shuffler driver against the simulated shuffler over Modbus TCP."""

from __future__ import annotations

import pytest

from devices.commands import AbortShuffle, ClearFault, EjectToShoe, MarkOutOfOrder, StartShuffle
from devices.errors import CommandRejected
from devices.events import (
    BatchLoaded,
    BatchSlotChanged,
    DeviceOnline,
    EjectedToShoe,
    ShuffleDone,
    ShuffleIncomplete,
    ShufflerCleared,
    ShufflerFault,
    ShufflerJammed,
    ShufflerOutOfOrder,
    ShufflerState,
    ShuffleStarted,
    Slot,
)
from sim.models import JAM_CODE
from sim.registers import shuffler as render_shuffler
from tests.devices.conftest import Rig, drain, of_type, poll_until


async def _start(rig: Rig, slot: Slot = Slot.A) -> None:
    d = rig.driver("shuffler")
    await d.send(StartShuffle(slot))
    await poll_until(d, ShuffleStarted)


async def test_first_poll_reports_both_slots_and_online(rig: Rig) -> None:
    d = rig.driver("shuffler")
    assert await d.poll_once()
    events = drain(d)
    slots = of_type(events, BatchSlotChanged)
    assert [(s.slot, s.state, s.back, s.decks) for s in slots] == [
        (Slot.A, ShufflerState.IDLE, "red", 6),
        (Slot.B, ShufflerState.IDLE, "blue", 6),
    ]
    assert of_type(events, DeviceOnline)


async def test_full_cycle_counts_every_card(rig: Rig) -> None:
    await _start(rig)
    rig.clock.advance(30)
    done, _ = await poll_until(rig.driver("shuffler"), ShuffleDone)
    assert (done.slot, done.cards_counted, done.cycle) == (Slot.A, 312, 1)


async def test_eject_moves_the_batch_into_the_shoe(rig: Rig) -> None:
    await _start(rig)
    rig.clock.advance(30)
    shuffler, shoe = rig.driver("shuffler"), rig.driver("shoe")
    await poll_until(shuffler, ShuffleDone)
    await shoe.poll_once()
    await shuffler.send(EjectToShoe(Slot.A))
    await poll_until(shuffler, EjectedToShoe)
    loaded, _ = await poll_until(shoe, BatchLoaded)
    assert (loaded.back, loaded.cards) == ("red", 312)


async def test_a_cycle_done_and_ejected_between_two_polls_is_done_not_incomplete(rig: Rig) -> None:
    """A direct-insert shuffler may put the batch into the shoe the moment its cycle ends: read
    shuffling, then empty. The cycle counter moved, so the shuffle completed (and was ejected);
    it is no incomplete shuffle (673a.13(k)) with the batch lost to the table."""
    await _start(rig)
    rig.clock.advance(30)
    model = rig.model("shuffler")
    model.update()
    model.eject(Slot.A)  # out of the slot before the driver reads it ready
    d = rig.driver("shuffler")
    _, seen = await poll_until(d, EjectedToShoe)
    done = of_type(seen, ShuffleDone)
    assert [(e.slot, e.cycle) for e in done] == [(Slot.A, 1)]
    assert not of_type(seen, ShuffleIncomplete)


async def test_an_emptied_slot_reads_no_back_colour_and_no_decks(rig: Rig) -> None:
    """docs/devices/shuffler.md: slot_a_back and slot_a_decks are 0 when the slot is empty."""
    await _start(rig)
    rig.clock.advance(30)
    shuffler = rig.driver("shuffler")
    await poll_until(shuffler, ShuffleDone)
    await shuffler.send(EjectToShoe(Slot.A))
    _, events = await poll_until(shuffler, EjectedToShoe)
    (slot_a,) = [e for e in of_type(events, BatchSlotChanged) if e.slot is Slot.A]
    assert (slot_a.state, slot_a.back, slot_a.decks) == (ShufflerState.EMPTY, None, 0)


async def test_jam_at_card_n_then_clear_and_recover(rig: Rig) -> None:
    rig.model("shuffler").faults.jam_at_card = 100
    await _start(rig)
    rig.clock.advance(15)  # past card 100 of 312 in a 30 s cycle
    jam, _ = await poll_until(rig.driver("shuffler"), ShufflerJammed)
    assert (jam.slot, jam.code) == (Slot.A, JAM_CODE)
    with pytest.raises(CommandRejected, match=r"start_shuffle not carried out.*exception code 3"):
        await rig.driver("shuffler").send(StartShuffle(Slot.B))
    await rig.driver("shuffler").send(ClearFault())
    await poll_until(rig.driver("shuffler"), ShufflerCleared)
    # 673a.13(k): the jammed batch is reshuffled from the start.
    await _start(rig)
    rig.clock.advance(30)
    done, _ = await poll_until(rig.driver("shuffler"), ShuffleDone)
    assert done.cards_counted == 312


async def test_stalled_cycle_is_reported_incomplete(rig: Rig) -> None:
    rig.model("shuffler").faults.stall = True
    await _start(rig)
    d = rig.driver("shuffler")
    rig.clock.advance(121)  # max_cycle_s = 120 in the example table
    inc, _ = await poll_until(d, ShuffleIncomplete)
    assert inc.slot is Slot.A and "120" in inc.reason
    await d.send(AbortShuffle(Slot.A))
    stopped, _ = await poll_until(d, BatchSlotChanged)
    assert stopped.state is ShufflerState.IDLE
    rig.model("shuffler").faults.stall = False
    await _start(rig)
    rig.clock.advance(30)
    await poll_until(d, ShuffleDone)


async def test_slow_cycle_finishes_late_but_finishes(rig: Rig) -> None:
    rig.model("shuffler").faults.slow_factor = 2.0
    await _start(rig)
    d = rig.driver("shuffler")
    rig.clock.advance(30)
    await d.poll_once()
    assert not of_type(drain(d), ShuffleDone)
    rig.clock.advance(30)
    await poll_until(d, ShuffleDone)


async def test_miscount_is_reported_as_counted(rig: Rig) -> None:
    rig.model("shuffler").faults.miscount = -1
    await _start(rig)
    rig.clock.advance(30)
    done, _ = await poll_until(rig.driver("shuffler"), ShuffleDone)
    assert done.cards_counted == 311


async def test_device_fault_and_out_of_order(rig: Rig) -> None:
    d = rig.driver("shuffler")
    await d.poll_once()
    rig.model("shuffler").faults.device_fault = 42
    fault, _ = await poll_until(d, ShufflerFault)
    assert fault.code == 42
    await d.send(ClearFault())
    await poll_until(d, ShufflerCleared)
    await d.send(MarkOutOfOrder())
    await poll_until(d, ShufflerOutOfOrder)
    with pytest.raises(CommandRejected):
        await d.send(StartShuffle(Slot.A))


async def test_driver_refuses_commands_of_other_devices(rig: Rig) -> None:
    from devices.commands import LockSensors

    with pytest.raises(CommandRejected, match="a shuffler does not take LockSensors"):
        await rig.driver("shuffler").send(LockSensors())


async def test_the_overall_state_shows_the_first_condition_that_holds(rig: Rig) -> None:
    """docs/devices/shuffler.md, 'The overall state': out of order, fault, jammed, shuffling,
    ready, idle, in that order; read from the `state` register as a master sees it."""
    model, profile = rig.model("shuffler"), rig.table.devices["shuffler"].config.profile
    names = {code: name for name, code in profile.enums["shuffler_state"].items()}

    def state() -> str:
        return names[render_shuffler(model, profile)["state"][0]]

    assert state() == "idle"  # both slots loaded, unshuffled
    model.start(Slot.A)
    rig.clock.advance(30)
    assert state() == "ready"  # A ready, B idle
    model.start(Slot.B)
    assert state() == "shuffling"  # B shuffling hides A's ready
    model.faults.jam_at_card = 1
    rig.clock.advance(1)
    assert state() == "jammed"  # B jammed, A ready
    model.faults.device_fault = 7
    assert state() == "fault"
    model.mark_out_of_order()
    assert state() == "out_of_order"
    model.clear_fault()  # clears the jam and the fault, not the out-of-order mark
    assert (state(), model.slots[Slot.B].state) == ("out_of_order", ShufflerState.IDLE)


async def test_an_empty_slot_leaves_the_overall_state_idle(rig: Rig) -> None:
    model, profile = rig.model("shuffler"), rig.table.devices["shuffler"].config.profile
    model.start(Slot.A)
    rig.clock.advance(30)
    model.eject(Slot.A)
    regs = render_shuffler(model, profile)
    idle, empty = (profile.enum_value("shuffler_state", s) for s in ("idle", "empty"))
    assert (regs["state"], regs["slot_a_state"], regs["slot_b_state"]) == ([idle], [empty], [idle])
