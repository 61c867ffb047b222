"""docs/bring-up.md's worked example: a second shoe with another register layout (the shipped
profile vendor-b-shoe.toml: its ring first and 16 long, its own back codes and card word) is
supported by the profile alone. A Double Back Jack table with that shoe loads and plays whole
rounds through the wire, the journal sound; and `tablectl device check` would read it by the
same names (the profile is all it needs)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from controller.shipped import shipped_file, table_file
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import virtual_table
from devices.profiles import DeviceKind
from tests.supervisor.conftest import GUARD_S, assert_journal_sound, journal_kinds
from tests.support.flat_table import flat_text


def _table_with_vendor_b_shoe(folder: Path) -> Path:
    text = flat_text(table_file("double-back-jack"))
    text = text.replace('profile = "../devices/ref-shoe.toml"', 'profile = "../devices/vendor-b-shoe.toml"')
    path = folder / "dbj-vendor-b.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_second_shoe_profile_is_shipped_and_loads(tmp_path: Path) -> None:
    assert shipped_file("devices", "vendor-b-shoe") is not None
    shoe = load_table_config(_table_with_vendor_b_shoe(tmp_path)).device_of(DeviceKind.SHOE)
    assert shoe is not None and shoe.profile.name == "vendor-b-shoe"
    ring = shoe.profile.reg("draw_ring")
    assert (ring.address, ring.count, shoe.profile.reg("draw_seq").address) == (0, 16, 16)


async def test_a_table_with_the_second_shoe_plays_rounds(tmp_path: Path) -> None:
    path = _table_with_vendor_b_shoe(tmp_path)
    async with asyncio.timeout(GUARD_S), virtual_table(path, tmp_path / "day.db", seed=5) as rig:
        await rig.dealer.open_table()
        for _ in range(4):
            await rig.dealer.play_round()
        kinds = [k for k, _ in journal_kinds(rig.supervisor.journal_path)]
        assert kinds.count("round_settled") >= 4 and "card_dealt" in kinds and "card_burned" in kinds
        assert "alarm_raised" not in kinds
        assert_journal_sound(rig)
