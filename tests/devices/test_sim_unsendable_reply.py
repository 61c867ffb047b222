"""A reply whose connection is gone is dropped without a word by a simulated device, as by a real
one: pymodbus's ERROR line for it ("Cancel send, because not connected!") came after the last line
of `tablectl sim` when it stopped while the table was still polling. Other pymodbus errors still
reach the log."""

from __future__ import annotations

import logging

import pytest

from devices.profiles import DeviceKind, load_profile
from sim.modbus_server import ModbusTcpSim, RegisterSim
from sim.models import ShoeModel
from tests.devices.conftest import DEVICES


async def test_only_the_unsendable_reply_line_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    sim = ModbusTcpSim(
        [RegisterSim(DeviceKind.SHOE, ShoeModel(), load_profile(DEVICES / "ref-shoe.toml"), 1)]
    )
    await sim.start()
    try:
        pymodbus = logging.getLogger("pymodbus.logging")
        with caplog.at_level(logging.WARNING):
            pymodbus.error("Cancel send, because not connected!")
            pymodbus.error("some other failure")
    finally:
        await sim.stop()
    assert [
        r.getMessage() for r in caplog.records if r.name == "pymodbus.logging" and r.levelno >= logging.ERROR
    ] == ["some other failure"]
