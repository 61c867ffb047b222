"""The Acme CS-2 shoe (docs/devices/acme-cs2.md), a device variant added in files of its own: its
32-bit draw counter passes 65,535 and 65,536 without a wrap in the driver's events, in the
journal of a table playing rounds and in the device check's draw step; its door, a bit of the
status word, halts a round in play with the floor's action and raises nothing between rounds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from controller.cards import parse_card
from controller.shipped import shipped_file, table_file
from controller.supervisor.rig import virtual_table
from controller.table.recorder import SEEN_KEY
from devices.drivers.factory import build_driver
from devices.drivers.registers import RegisterDriver
from devices.events import CardDrawn, DeviceCondition, Key
from devices.profiles import load_profile
from devices.transport.modbus import BusRegistry
from devices.variants import variant, variant_of
from sim.clock import VirtualClock
from sim.models import DealtCard, ShoeModel
from sim.variants import simulator_of
from tests.devices.conftest import device_config
from tests.devices.test_device_check import _by_id, run_check
from tests.supervisor.conftest import GUARD_S, assert_journal_sound, journal_kinds
from tests.support.flat_table import flat_text

START = 65_530


def _profile() -> Any:
    path = shipped_file("devices", "acme-cs2")
    assert path is not None
    return load_profile(path)


def test_the_profile_is_the_acme_variant_with_a_32_bit_counter_and_named_bits() -> None:
    prof = _profile()
    assert variant_of(prof) is variant("acme-cs2")
    assert prof.reg("draw_seq").bits == 32 and prof.reg("draw_ring").count == 16
    assert {(b.name, b.register, b.bit) for b in prof.bits.values()} == {
        ("cover", "status", 0), ("door_open", "status", 3),
    }  # fmt: skip
    assert prof.conditions["door_open"].section == "7(b)"


def _words(driver: RegisterDriver, model: ShoeModel, door: bool = False) -> list[int]:
    start, count = driver.profile.poll_span()
    words = [0] * count
    values = simulator_of(driver.profile).render(model, driver.profile) | {"door_open": [int(door)]}
    for spec, enc in driver.profile.encode_all(values):
        words[spec.address - start : spec.address - start + len(enc)] = enc
    return words


def test_the_driver_reads_draws_past_65535_without_a_wrap_and_reports_the_door() -> None:
    cfg = device_config("shoe", kind="shoe", profile="../devices/acme-cs2.toml", transport="modbus-tcp")
    driver = build_driver(cfg, buses=BusRegistry(), clock=VirtualClock())
    assert isinstance(driver, RegisterDriver)
    model = ShoeModel(ring=16, counter_bits=32)
    model.load([DealtCard(parse_card(c).with_back("red")) for c in ["AS", "KH", "7D", "2C"] * 10], "red")
    model.draw_seq = START
    assert driver.decode(_words(driver, model)) is not None  # the first reading: the baseline
    drawn: list[int] = []
    for _ in range(10):
        model.draw()
        drawn += [e.sequence for e in driver.decode(_words(driver, model)) if isinstance(e, CardDrawn)]
    assert drawn == list(range(START + 1, START + 11))  # 65,531 ... 65,540: no wrap at 65,536
    opened = driver.decode(_words(driver, model, door=True))
    assert [(e.name, e.active, e.halts) for e in opened if isinstance(e, DeviceCondition)] == [
        ("door_open", True, "in_round")
    ]


def acme_table(folder: Path, first_draw: int = 65_500) -> Path:
    """The example table written out whole in ``folder``, its shoe's counter starting at
    ``first_draw`` (the simulator's setting, docs/devices/acme-cs2.md)."""
    text = flat_text(table_file("acme-cs2"))
    head = "[devices.shoe.sim]\n"
    assert head in text
    path = folder / "acme-cs2.toml"
    path.write_text(text.replace(head, f"{head}first_draw = {first_draw}\n", 1), encoding="utf-8")
    return path


async def test_a_table_plays_past_draw_65536_and_the_door_halts_only_a_round_in_play(tmp_path: Path) -> None:
    path = acme_table(tmp_path)
    async with asyncio.timeout(GUARD_S), virtual_table(path, tmp_path / "day.db", seed=5, boxes=6) as rig:
        sup, shoe = rig.supervisor, rig.sim.devices["shoe"]
        assert shoe.model.draw_seq == 65_500  # sim.first_draw
        await rig.dealer.open_table()
        while shoe.model.draw_seq <= 65_540:
            await rig.dealer.play_round()
        records = journal_kinds(sup.journal_path)
        # The shoe's counters as journalled: a record of their own, or folded into the record of
        # the step they caused (controller/table/recorder.py, SEEN_KEY).
        counters = [p if k == SEEN_KEY else p.get(SEEN_KEY) for k, p in records]
        seen = [c["counters"]["draw_seq"] for c in counters if c and c["device"] == "shoe"]
        assert seen == sorted(seen) and 65_535 in seen and 65_536 in seen, seen  # draws, in order
        assert min(seen) == 65_500 and seen[-1] > 65_540
        assert "alarm_raised" not in [k for k, _ in records]
        assert_journal_sound(rig)

        # Between rounds the door is the dealer's: nothing is raised.
        assert shoe.register_sim is not None and not sup.table.in_round
        shoe.register_sim.conditions["door_open"] = True
        await sup.settle("shoe")
        shoe.register_sim.conditions["door_open"] = False
        await sup.settle("shoe")
        assert not sup.table.alarms

        # In a round it halts dealing, with the floor's action and the section it rests on.
        keypad = rig.sim.devices["keypad"].model
        keypad.place_bet(1, 1)
        keypad.press(Key.START_GAME)
        await sup.settle("keypad")
        assert sup.table.in_round
        shoe.register_sim.conditions["door_open"] = True
        await sup.settle("shoe")
        [alarm] = sup.table.alarms.values()
        assert (alarm.section, alarm.halts) == ("673a.7(b)", True)
        assert alarm.message == "shoe: the shoe's door is open" and "void the round" in alarm.floor_action
        assert sup.table.halted == [alarm]
        await sup.settle("shoe")
        assert len(sup.table.alarms) == 1  # once while it stands
        assert_journal_sound(rig)


async def test_the_device_check_passes_across_65536_and_checks_the_door(tmp_path: Path) -> None:
    def at_65535(model: ShoeModel) -> None:
        model.draw_seq = 65_535

    rc, doc, asked = await run_check("acme-cs2", "shoe", tmp_path, break_it=at_65535, control=True)
    results = _by_id(doc)
    assert rc == 0, [r for r in doc["results"] if r["status"] != "pass"]
    assert results["step.draw"]["status"] == "pass"
    assert results["step.door"]["status"] == "pass"
    assert "draw_card" in asked and "open_door" not in asked  # the door through the control port
