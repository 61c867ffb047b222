"""Build the right driver for a DeviceConfig, sharing one Modbus bus per physical line. The
driver class is the profile's variant's (devices/variants/)."""

from __future__ import annotations

import asyncio

from controller.clock import REAL_CLOCK, Clock
from devices.config import NETWORK_MODBUS, DeviceConfig, TransportKind
from devices.drivers.base import Driver
from devices.drivers.registers import RegisterDriver
from devices.drivers.stub import StubCounterDriver
from devices.events import DeviceEvent
from devices.transport.links import ByteLink, MqttLink, SerialLink
from devices.transport.modbus import BusRegistry
from devices.variants import variant_of


def build_driver(
    config: DeviceConfig,
    *,
    buses: BusRegistry,
    clock: Clock = REAL_CLOCK,
    events: asyncio.Queue[DeviceEvent] | None = None,
) -> Driver:
    ep = config.endpoint
    cls = variant_of(config.profile).driver
    if ep.transport in (*NETWORK_MODBUS, TransportKind.MODBUS_RTU):
        assert issubclass(cls, RegisterDriver), cls  # the profile's protocol matches its transport
        return cls(config, buses.bus(ep, config.backoff), clock=clock, events=events)
    assert issubclass(cls, StubCounterDriver), cls
    return cls(config, build_link(config, clock=clock), clock=clock, events=events)


def build_link(config: DeviceConfig, *, clock: Clock = REAL_CLOCK) -> ByteLink:
    """The byte link of a frame device (serial line or MQTT), as its section configures it."""
    ep = config.endpoint
    if ep.transport is TransportKind.SERIAL_LINE:
        return SerialLink(ep, backoff=config.backoff, clock=clock)
    access = config.mqtt
    return MqttLink(
        ep,
        backoff=config.backoff,
        clock=clock,
        tls=access.tls,
        ca_file=access.ca_file,
        username=access.username,
        password=access.password,
    )


def build_drivers(
    configs: list[DeviceConfig],
    *,
    clock: Clock = REAL_CLOCK,
    events: asyncio.Queue[DeviceEvent] | None = None,
) -> tuple[list[Driver], BusRegistry]:
    """Drivers for every device of a table, all feeding one event queue when one is given."""
    buses = BusRegistry(clock)
    return [build_driver(c, buses=buses, clock=clock, events=events) for c in configs], buses
