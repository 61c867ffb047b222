"""`tablectl sim --timing-seed N`: device timing varied by a seed, the same every run of a seed
(a soak names its seeds), within the ranges docs/simulators.md gives; and each latency shows on
the device as a real one would, in the order things were done."""

from __future__ import annotations

from controller.cards import parse_card
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import table_file
from devices.events import Key, ShufflerState, Slot
from devices.profiles import DeviceKind
from sim.clock import VirtualClock
from sim.models import KeypadModel, ReaderModel
from sim.table import SimTable
from sim.table_file import read_table_file
from sim.timing import MAX_PHASE_S, MAX_REPLY_S, MAX_RETURN_S, TableTiming

NAMES = ["shuffler", "shoe", "reader", "keypad"]


def test_one_seed_draws_the_same_timing_and_another_seed_another() -> None:
    assert TableTiming.from_seed(7, NAMES) == TableTiming.from_seed(7, list(reversed(NAMES)))
    assert TableTiming.from_seed(7, NAMES) != TableTiming.from_seed(8, NAMES)


def test_every_draw_is_within_the_documented_ranges() -> None:
    for seed in range(200):
        t = TableTiming.from_seed(seed, NAMES)
        assert all(0 <= s <= MAX_PHASE_S for s in t.phase_s.values())
        assert all(0 <= s <= MAX_REPLY_S for s in t.reply_s.values())
        assert 0.5 <= t.cycle_factor <= 1.5 and 0 <= t.return_s <= MAX_RETURN_S
        assert 0.05 <= t.reader_s <= 0.25 and 0 <= t.keypad_s <= 0.04


def test_a_device_s_reply_delays_repeat_with_its_seed() -> None:
    a, b = TableTiming.from_seed(3, NAMES).latency("shoe"), TableTiming.from_seed(3, NAMES).latency("shoe")
    assert [a.rng.random() for _ in range(5)] == [b.rng.random() for _ in range(5)]


def test_the_keypad_shows_keys_after_its_latency_in_the_order_pressed() -> None:
    clock = VirtualClock()
    keypad = KeypadModel(6, 2, clock=clock, latency_s=0.03)
    keypad.press(Key.START_GAME)
    clock.advance(0.01)
    keypad.press(Key.HIT)
    keypad.update()
    assert keypad.key_seq == 0
    clock.advance(0.02)
    keypad.update()
    assert (keypad.key_seq, keypad.key_ring[0]) == (1, Key.START_GAME)
    clock.advance(0.01)
    keypad.update()
    assert (keypad.key_seq, keypad.key_ring[1]) == (2, Key.HIT)


def test_the_reader_reads_a_hole_card_after_its_latency() -> None:
    clock = VirtualClock()
    reader = ReaderModel("peek", clock=clock, latency_s=0.2)
    reader.set_up("A")
    reader.insert(parse_card("KS"))
    reader.update()
    assert (reader.insert_seq, reader.result) == (0, "none")
    clock.advance(0.2)
    reader.update()
    assert (reader.insert_seq, reader.result) == (1, "yes")


def test_the_shuffler_shows_a_used_batch_back_after_its_return_delay_and_cycles_by_the_seed() -> None:
    cfg = read_table_file(table_file("down-under"))
    clock = VirtualClock()
    sim = SimTable.from_config(cfg, seed=1, clock=clock, timing_seed=5)
    timing = TableTiming.from_seed(5, [d.name for d in cfg.devices])
    shuffler = sim.by_kind(DeviceKind.SHUFFLER)
    assert shuffler is not None
    model = shuffler.model
    assert model.cycle_s == 30 * timing.cycle_factor  # the table file's cycle_s, scaled
    model.slots[Slot.A].state = ShufflerState.READY
    first = model.eject(Slot.A)
    sim.load_shoe(first, "red")
    model.slots[Slot.B].state = ShufflerState.READY
    sim.load_shoe(model.eject(Slot.B), "blue")  # the red batch goes back to slot A
    assert model.slots[Slot.A].state is ShufflerState.EMPTY
    clock.advance(timing.return_s)
    model.update()
    assert model.slots[Slot.A].state is ShufflerState.IDLE and len(model.slots[Slot.A].cards) == len(first)


def test_without_a_seed_the_devices_keep_no_time_of_their_own() -> None:
    config = load_table_config(table_file("down-under"), side="both")
    sim = SimTable(list(config.devices), config.options.spec, seed=3, clock=VirtualClock())
    keypad = sim.by_kind(DeviceKind.KEYPAD)
    assert keypad is not None and keypad.register_sim is not None
    keypad.model.press(Key.START_GAME)
    assert keypad.model.key_seq == 1
    assert keypad.register_sim.latency.ceiling_s == 0 and keypad.register_sim.phase_s == 0
    shuffler = sim.by_kind(DeviceKind.SHUFFLER)
    assert shuffler is not None
    model = shuffler.model
    model.slots[Slot.A].state = ShufflerState.READY
    sim.load_shoe(model.eject(Slot.A), "red")
    model.slots[Slot.B].state = ShufflerState.READY
    sim.load_shoe(model.eject(Slot.B), "blue")
    assert model.slots[Slot.A].state is ShufflerState.IDLE  # back at once, as docs/simulators.md says
