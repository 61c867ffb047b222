"""A device's health as the floor sees it, from the driver's health events and the device's own
reports (a jam, a fault, a dead reader) and from the floor marking it out of order; and whether
the table's shoe has failed, as the journal says."""

from __future__ import annotations

from enum import StrEnum

from controller.table.core import Table
from devices import events as dev


class DeviceHealth(StrEnum):
    CONNECTING = "connecting"  # not yet answered since the controller started
    ONLINE = "online"
    DEGRADED = "degraded"  # answering, with errors or missed data
    FAULT = "fault"  # not answering, or answering that it has failed (jam, dead reader)
    OUT_OF_ORDER = "out_of_order"  # 673a.13(l): marked by the floor; only the floor clears it


def health_after(current: DeviceHealth, event: dev.DeviceEvent) -> DeviceHealth:
    """The health after ``event``; out of order sticks until the floor restores the device."""
    if current is DeviceHealth.OUT_OF_ORDER and not isinstance(event, dev.ShufflerOutOfOrder):
        return current
    match event:
        case dev.ShufflerOutOfOrder():
            return DeviceHealth.OUT_OF_ORDER
        case dev.DeviceOffline() | dev.ShufflerJammed() | dev.ShufflerFault() | dev.ReaderFailed():
            return DeviceHealth.FAULT
        case dev.DeviceDegraded() | dev.FrameError() | dev.DrawsMissed() | dev.KeysMissed():
            return DeviceHealth.DEGRADED if current is not DeviceHealth.FAULT else current
        case dev.SensorFault(faulty=True):
            return DeviceHealth.DEGRADED
        case dev.DeviceOnline() | dev.ShufflerCleared() | dev.ReaderRestored():
            return DeviceHealth.ONLINE
        case _:
            return current


def shoe_failed(table: Table) -> bool:
    """A failed shoe stops dealing (no round opens till it is back or restored). Read from the
    table's journalled state, not from the driver's health: a shoe that went offline is a
    journalled ``device_failed`` with its alarm, one marked out of order a journalled mark with
    who, and a driver that crashed on a bug of ours is neither (the shoe's counters, read on
    from the journal once the driver restarts, lose no card meanwhile)."""
    return "shoe" in table.failed_devices or "shoe" in table.out_of_order
