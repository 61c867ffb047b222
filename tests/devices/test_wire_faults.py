"""Wire faults on Modbus TCP and RTU: each gives the right event or a clear error, and the driver
recovers once the fault clears."""

from __future__ import annotations

import pytest

from devices.events import (
    BatchSlotChanged,
    BetSensed,
    DeviceDegraded,
    DeviceOffline,
    DeviceOnline,
    FrameError,
    Health,
)
from tests.devices.conftest import ANSWERING_TIMEOUT_S, Rig, drain, of_type, poll_until

# The shuffler is on Modbus TCP; the keypad shares an RTU line (pty) with the reader.
DEVICES = ["shuffler", "keypad"]
# The faults here are silences, cut lines and half frames: a poll ends at its reply limit, so the
# limit is short. Every wait for an answer is poll_until (a poll the machine's load held past the
# limit is followed by the next), never one poll that must answer in time.
FAULT_TIMEOUT_S = 0.3


@pytest.fixture
def rig(rig: Rig) -> Rig:
    rig.timeout_s = FAULT_TIMEOUT_S
    return rig


async def _online(rig: Rig, name: str) -> None:
    d = rig.driver(name)
    await poll_until(d, DeviceOnline)
    drain(d)


async def _recovers(rig: Rig, name: str) -> None:
    rig.sim(name).faults.clear()
    d = rig.driver(name)
    await poll_until(d, DeviceOnline, before_poll=lambda: rig.clock.advance(1.0))
    assert d.health is Health.ONLINE


@pytest.mark.parametrize("name", DEVICES)
async def test_garbled_responses(rig: Rig, name: str) -> None:
    await _online(rig, name)
    rig.sim(name).faults.garble = 1000
    ev, _ = await poll_until(rig.driver(name), DeviceDegraded)
    assert "\n" not in ev.reason and ev.reason
    await _recovers(rig, name)


@pytest.mark.parametrize("name", DEVICES)
async def test_truncated_responses(rig: Rig, name: str) -> None:
    await _online(rig, name)
    rig.sim(name).faults.truncate = 1000
    ev, _ = await poll_until(rig.driver(name), DeviceDegraded)
    assert "no answer" in ev.reason or "read" in ev.reason
    await _recovers(rig, name)


@pytest.mark.parametrize("name", DEVICES)
async def test_missing_responses_go_offline_then_online(rig: Rig, name: str) -> None:
    await _online(rig, name)
    rig.sim(name).faults.silent = True
    ev, seen = await poll_until(rig.driver(name), DeviceOffline)
    assert of_type(seen, DeviceDegraded)  # degraded first, offline after offline_after misses
    assert "no answer" in ev.reason
    await _recovers(rig, name)


@pytest.mark.parametrize("name", DEVICES)
async def test_late_responses_are_discarded_and_polling_resumes(rig: Rig, name: str) -> None:
    await _online(rig, name)
    faults = rig.sim(name).faults
    faults.hold()
    d = rig.driver(name)
    assert not await d.poll_once()
    faults.release()  # the held answer now arrives, late, for a request already given up
    await _recovers(rig, name)  # polls answered again: the late answer was not taken for theirs


@pytest.mark.parametrize(
    ("name", "register", "value"),
    [
        ("shuffler", "cards_counted", 5000),
        ("shuffler", "state", 99),
        ("keypad", "sensors", 0xFF),
        ("keypad", "locked", 7),
    ],
)
async def test_out_of_range_register_values(rig: Rig, name: str, register: str, value: int) -> None:
    await _online(rig, name)
    rig.sim(name).faults.out_of_range[register] = value
    ev, seen = await poll_until(rig.driver(name), FrameError)
    assert register in ev.reason and "\n" not in ev.reason
    assert not [e for e in seen if isinstance(e, BatchSlotChanged | BetSensed)]
    await _recovers(rig, name)


async def test_tcp_link_dropped_and_restored(rig: Rig) -> None:
    await _online(rig, "shuffler")
    d = rig.driver("shuffler")
    server = rig.server("shuffler")
    await server.drop_link()
    await poll_until(d, DeviceOffline)
    await server.restore_link()
    await poll_until(d, DeviceOnline, before_poll=lambda: rig.clock.advance(1.0))


async def test_rtu_line_cut_and_restored(rig: Rig) -> None:
    await _online(rig, "keypad")
    d = rig.driver("keypad")
    rig.server("keypad").drop_link()
    await poll_until(d, DeviceOffline)
    rig.server("keypad").restore_link()
    await poll_until(d, DeviceOnline)


async def test_a_silent_device_does_not_stall_its_bus_neighbour(rig: Rig) -> None:
    # The keypad answers, each poll at once: its limit is long, so only the line being free counts.
    reader, keypad = rig.driver("reader"), rig.driver("keypad", timeout_s=ANSWERING_TIMEOUT_S)
    await _online(rig, "reader")
    await _online(rig, "keypad")
    rig.sim("reader").faults.silent = True
    for box in range(1, 4):
        rig.model("keypad").place_bet(box, 1)
        assert not await reader.poll_once()  # times out after its own FAULT_TIMEOUT_S
        assert await keypad.poll_once()  # the line is free again straight after
        assert [e.box for e in of_type(drain(keypad), BetSensed)] == [box]
    assert reader.health is Health.OFFLINE
    await _recovers(rig, "reader")


async def test_noise_before_responses_is_survived(rig: Rig) -> None:
    await _online(rig, "keypad")
    rig.sim("keypad").faults.noise = 3
    d = rig.driver("keypad")
    for _ in range(6):
        await d.poll_once()
    await _recovers(rig, "keypad")
