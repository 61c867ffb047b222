"""53-card stub counter: checksummed frames over a pty serial line and over MQTT (mosquitto)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from devices.commands import RequestStubCount
from devices.drivers.base import Driver
from devices.drivers.factory import build_driver
from devices.drivers.stub import StubCounterDriver
from devices.events import DeviceDegraded, DeviceOffline, DeviceOnline, FrameError, StubCounted
from devices.transport.links import MAX_BUFFERED_BYTES, MqttLink
from devices.transport.modbus import BusRegistry
from sim.clock import VirtualClock
from sim.frame_server import MqttSink, StubCounterSim
from sim.models import STUB_FAULT_CODE, StubCounterModel
from tests.devices.conftest import Rig, device_config, drain, fast, of_type, poll_until

OPTIONS = {"expected": 53, "heartbeat_timeout_s": 0.2}


async def _stub(rig_factory) -> tuple[Rig, StubCounterSim, Driver]:  # type: ignore[no-untyped-def]
    rig: Rig = await rig_factory("dj-wild")
    d = rig.driver("stub", options=OPTIONS)
    await poll_until(d, DeviceOnline, before_poll=lambda: rig.clock.advance(1.0))
    drain(d)
    return rig, rig.sim("stub"), d


async def test_a_stub_of_53_minus_the_dealt_cards_is_verified_and_ok_is_the_devices_word(rig_factory) -> None:  # type: ignore[no-untyped-def]
    """stub-counter.md: the device counts the stub (53 minus the cards dealt, e.g. 37 after three
    hands, the dealer's and the layout card) and says whether it counted every card cleanly; it
    never compares with 53. A miscount it does not notice is still verified (the table catches
    it, 687a.9(h)); a count it could not make cleanly is not."""
    _rig, sim, d = await _stub(rig_factory)
    await sim.count(37)
    ok, _ = await poll_until(d, StubCounted)
    assert (ok.count, ok.ok) == (37, True)
    sim.model.faults.miscount = -1
    await sim.count(37)
    missed, _ = await poll_until(d, StubCounted)
    assert (missed.count, missed.ok) == (36, True)
    sim.model.faults.unverified = True
    await sim.count(37)
    unsure, _ = await poll_until(d, StubCounted)
    assert (unsure.count, unsure.ok) == (36, False)


@pytest.mark.parametrize("fault", ["garble", "truncate", "noise"])
async def test_broken_frame_is_an_error_and_the_next_frame_is_read(rig_factory, fault: str) -> None:  # type: ignore[no-untyped-def]
    _rig, sim, d = await _stub(rig_factory)
    setattr(sim.faults, fault, 1)
    await sim.count(53)
    await sim.count(53)
    got, seen = await poll_until(d, StubCounted)
    assert got.sequence == 2 or fault == "noise"
    if fault != "noise":
        err = of_type(seen, FrameError)[0]
        assert "\n" not in err.reason


async def test_a_lost_count_is_asked_for_again(rig_factory) -> None:  # type: ignore[no-untyped-def]
    _rig, sim, d = await _stub(rig_factory)
    sim.faults.garble = 1
    await sim.count(53)
    await poll_until(d, FrameError)
    await d.send(RequestStubCount())
    got, _ = await poll_until(d, StubCounted)
    assert (got.count, got.sequence) == (53, 1)


async def test_silent_line_goes_offline_then_recovers(rig_factory) -> None:  # type: ignore[no-untyped-def]
    rig, sim, d = await _stub(rig_factory)
    sim.faults.silent = True
    await poll_until(d, DeviceOffline, before_poll=lambda: rig.clock.advance(1.0))
    sim.faults.clear()
    await poll_until(d, DeviceOnline, before_poll=lambda: rig.clock.advance(1.0))


async def test_a_power_cycled_counter_s_first_count_is_news(rig_factory) -> None:  # type: ignore[no-untyped-def]
    """stub-counter.md: a power cycle starts ``seq`` again from 0, so a counter that comes back
    after a lost line counts with seq 1 again; that count is read, not taken for a repeat of the
    count before the loss (issue: it was dropped without a trace and the round waited for it)."""
    rig, sim, d = await _stub(rig_factory)
    await sim.count(53)
    first, _ = await poll_until(d, StubCounted)
    sim.faults.silent = True  # the counter goes away
    await poll_until(d, DeviceOffline, before_poll=lambda: rig.clock.advance(1.0))
    sim.model = StubCounterModel(53)  # and comes back power-cycled
    sim.faults.clear()
    await poll_until(d, DeviceOnline, before_poll=lambda: rig.clock.advance(1.0))
    await sim.count(37)
    again, _ = await poll_until(d, StubCounted)
    assert (first.sequence, again.sequence, again.count) == (1, 1, 37)


async def test_device_fault_in_heartbeat_degrades(rig_factory) -> None:  # type: ignore[no-untyped-def]
    rig, sim, d = await _stub(rig_factory)
    sim.model.faults.sensor_fault = True
    ev, _ = await poll_until(d, DeviceDegraded, before_poll=lambda: rig.clock.advance(1.0))
    assert str(STUB_FAULT_CODE) in ev.reason


# -- MQTT ---------------------------------------------------------------------------------------


@pytest.fixture
async def mqtt_stub(mosquitto: int, clock: VirtualClock) -> AsyncIterator[tuple[StubCounterSim, Driver]]:
    cfg = fast(
        device_config(
            "stub",
            kind="stub_counter",
            profile="../devices/ref-stub-counter.toml",
            transport="mqtt",
            host="127.0.0.1",
            port=mosquitto,
            topic="test/table1/stub",
            expected=53,
            heartbeat_timeout_s=0.3,
        )
    )
    sim = StubCounterSim(
        StubCounterModel(53),
        cfg.profile,
        MqttSink("127.0.0.1", mosquitto, cfg.endpoint.topic),
        clock=clock,
    )
    await sim.start()
    d = build_driver(cfg, buses=BusRegistry(clock), clock=clock)
    try:
        yield sim, d
    finally:
        await d.close()
        await sim.stop()


async def test_mqtt_stub_counter_counts_and_survives_bad_frames(
    mqtt_stub: tuple[StubCounterSim, Driver], clock: VirtualClock
) -> None:
    sim, d = mqtt_stub
    await poll_until(d, DeviceOnline, before_poll=lambda: clock.advance(1.0))
    await sim.send_raw(b"$SC,1,53,1*00\r\n")  # bad checksum
    await sim.send_raw(b"\xff\xfe garbage")
    await sim.count(53)
    got, seen = await poll_until(d, StubCounted)
    assert (got.count, got.ok) == (53, True)
    assert len(of_type(seen, FrameError)) == 2


async def test_a_flood_on_the_mqtt_topic_is_bounded_and_coalesced(
    mqtt_stub: tuple[StubCounterSim, Driver], clock: VirtualClock
) -> None:
    """Issue 11: 1 MiB of '$' over MQTT kept the process busy for about 50 s. Now one message is
    cut to what the link keeps, a burst is at most two events, and the next count is read."""
    sim, d = mqtt_stub
    assert isinstance(d, StubCounterDriver)
    await poll_until(d, DeviceOnline, before_poll=lambda: clock.advance(1.0))
    await sim.send_raw(b"$" * (256 << 10))  # one message larger than the link keeps
    for _ in range(192):  # and 768 KiB more in frame-sized messages: 1 MiB in all
        await sim.send_raw(b"$" * 4096)
    await sim.count(53)
    got, seen = await poll_until(d, StubCounted, max_polls=400)
    errors = of_type(seen, FrameError)
    assert got.ok and 1 <= len(errors) <= 2, errors
    assert sum(e.count for e in errors) > 10_000
    assert isinstance(d.link, MqttLink) and d.link.overrun_bytes == (256 << 10) - MAX_BUFFERED_BYTES


async def test_mqtt_device_drops_off_and_comes_back(
    mqtt_stub: tuple[StubCounterSim, Driver], clock: VirtualClock
) -> None:
    sim, d = mqtt_stub
    await poll_until(d, DeviceOnline, before_poll=lambda: clock.advance(1.0))
    await sim.sink.close()  # the device's link to the broker drops
    await poll_until(d, DeviceOffline)
    await sim.sink.open(lambda data: None)
    await poll_until(d, DeviceOnline, before_poll=lambda: clock.advance(1.0))
    await sim.count(53)
    got, _ = await poll_until(d, StubCounted)
    assert got.ok


async def test_mqtt_driver_reports_an_unreachable_broker(clock: VirtualClock) -> None:
    cfg = fast(
        device_config(
            "stub",
            kind="stub_counter",
            profile="../devices/ref-stub-counter.toml",
            transport="mqtt",
            host="127.0.0.1",
            port=1,
            topic="t/x",
        )
    )
    d = build_driver(cfg, buses=BusRegistry(clock), clock=clock)
    try:
        async with asyncio.timeout(10):
            ev, _ = await poll_until(d, DeviceOffline, before_poll=lambda: clock.advance(1.0))
        assert "cannot connect" in ev.reason
    finally:
        await d.close()
