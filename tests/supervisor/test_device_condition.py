"""A device condition (devices/profiles.py, ``[conditions]``): a named bit of a status word becomes
the alarm its profile describes, through the one DeviceCondition event, the mapping's one case and
the core's one handler, with no code of the device's own. Here a shoe profile written in the
test (the reference shoe with a status word: the cover flag and a tilt switch) plays rounds; the
tilt raises one alarm that does not halt and cites no section, once while it stands."""

from __future__ import annotations

import asyncio
from pathlib import Path

from controller.shipped import shipped_file, table_file
from controller.supervisor.rig import virtual_table
from tests.supervisor.conftest import GUARD_S, assert_journal_sound
from tests.support.flat_table import flat_text

PROFILE = """
[registers.status]
address = 6
type = "bits"
units = "flags"

[bits]
cover = { register = "status", bit = 0 }
tilt = { register = "status", bit = 5 }

[conditions.tilt]
message = "the shoe is tilted"
action = "set the shoe level"
halts = "never"
"""


def _table(folder: Path) -> Path:
    ref = shipped_file("devices", "ref-shoe")
    assert ref is not None
    text = ref.read_text(encoding="utf-8").replace('name = "ref-shoe"', 'name = "tilting-shoe"')
    cover = text[text.index("[registers.cover]") : text.index("[registers.batch_seq]")]
    (folder / "tilting-shoe.toml").write_text(text.replace(cover, "") + PROFILE, encoding="utf-8")
    table = flat_text(table_file("double-back-jack"))
    table = table.replace('profile = "../devices/ref-shoe.toml"', f'profile = "{folder}/tilting-shoe.toml"')
    path = folder / "dbj-tilting.toml"
    path.write_text(table, encoding="utf-8")
    return path


async def test_a_condition_bit_is_the_alarm_its_profile_describes(tmp_path: Path) -> None:
    async with asyncio.timeout(GUARD_S), virtual_table(_table(tmp_path), tmp_path / "day.db", seed=5) as rig:
        sup, shoe = rig.supervisor, rig.sim.devices["shoe"]
        assert shoe.config.profile.name == "tilting-shoe" and shoe.register_sim is not None
        await rig.dealer.open_table()
        for _ in range(2):
            await rig.dealer.play_round()
        assert not sup.table.alarms
        shoe.register_sim.conditions["tilt"] = True
        await sup.settle("shoe")
        [alarm] = sup.table.alarms.values()
        assert (alarm.message, alarm.floor_action, alarm.section, alarm.halts) == (
            "shoe: the shoe is tilted", "set the shoe level", "", False,
        )  # fmt: skip
        await sup.settle("shoe")
        shoe.register_sim.conditions["tilt"] = False
        await sup.settle("shoe")
        assert len(sup.table.alarms) == 1  # once while it stands
        await rig.dealer.play_round()  # dealing goes on
        assert_journal_sound(rig)
