"""The registry of device variants (devices/variants/): every registered variant is whole (its
driver of its kind, its simulator and check steps resolve, its page exists, a shipped profile
and a shipped table use it), every shipped profile's variant is registered, and every variant's
simulator passes `tablectl device check` with the control port, so a new variant is tested by
being registered."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.devcheck.frame_check import FrameCheck
from controller.devcheck.steps import CheckSteps
from controller.shipped import shipped_names, table_file
from controller.supervisor.config import load_table_config
from devices.profiles import load_profile
from devices.variants import DeviceVariant, variant_of, variants
from sim.variants import Simulator
from tests.devices.conftest import DEVICES, ROOT
from tests.devices.test_device_check import run_check

VARIANTS = variants()


def _shipped_device(v: DeviceVariant) -> tuple[str, str] | None:
    """(a shipped table, its device) of the variant: the first table, by name, that has one."""
    for table in shipped_names("tables"):
        for d in load_table_config(table_file(table), side="both").devices:
            if variant_of(d.profile) is v:
                return table, d.name
    return None


def test_every_shipped_profile_is_a_registered_variant() -> None:
    for path in sorted(DEVICES.glob("*.toml")):
        prof = load_profile(path)
        assert variant_of(prof).kind is prof.kind, path.name


@pytest.mark.parametrize("v", VARIANTS, ids=[v.name for v in VARIANTS])
def test_a_registered_variant_is_whole(v: DeviceVariant) -> None:
    assert v.driver.kind is v.kind
    assert isinstance(v.load_simulator(), Simulator)
    check = v.load_check()
    assert isinstance(check, CheckSteps) or (isinstance(check, type) and issubclass(check, FrameCheck))
    assert (ROOT / "docs" / "devices" / v.page).is_file()
    assert any(variant_of(load_profile(p)) is v for p in DEVICES.glob("*.toml")), "no shipped profile"
    assert _shipped_device(v) is not None, "no shipped table uses it"


@pytest.mark.parametrize("v", VARIANTS, ids=[v.name for v in VARIANTS])
async def test_every_variants_simulator_passes_its_device_check(v: DeviceVariant, tmp_path: Path) -> None:
    found = _shipped_device(v)
    assert found is not None
    rc, doc, _ = await run_check(*found, tmp_path, control=True)
    failed = [r for r in doc["results"] if r["status"] == "fail"]
    assert (rc, failed) == (0, []), doc
