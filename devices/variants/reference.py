"""The standard variant of each device kind: the reference devices of docs/devices/, which a
profile is when it names no ``driver``."""

from __future__ import annotations

from devices.drivers.keypad import KeypadDriver
from devices.drivers.reader import ReaderDriver
from devices.drivers.shoe import ShoeDriver
from devices.drivers.shuffler import ShufflerDriver
from devices.drivers.stub import StubCounterDriver
from devices.profiles import DeviceKind
from devices.variants import DeviceVariant, register

SHUFFLER = register(
    DeviceVariant(
        "shuffler", DeviceKind.SHUFFLER, ShufflerDriver, simulator="sim.variants:SHUFFLER",
        check="controller.devcheck.steps:SHUFFLER", page="shuffler.md", standard=True,
    )
)  # fmt: skip
SHOE = register(
    DeviceVariant(
        "shoe", DeviceKind.SHOE, ShoeDriver, simulator="sim.variants:SHOE",
        check="controller.devcheck.steps:SHOE", page="shoe.md", standard=True,
    )
)  # fmt: skip
READER = register(
    DeviceVariant(
        "reader", DeviceKind.READER, ReaderDriver, simulator="sim.variants:READER",
        check="controller.devcheck.steps:READER", page="reader.md", standard=True,
    )
)  # fmt: skip
KEYPAD = register(
    DeviceVariant(
        "keypad", DeviceKind.KEYPAD, KeypadDriver, simulator="sim.variants:KEYPAD",
        check="controller.devcheck.steps:KEYPAD", page="keypad.md", standard=True,
    )
)  # fmt: skip
STUB_COUNTER = register(
    DeviceVariant(
        "stub-counter", DeviceKind.STUB_COUNTER, StubCounterDriver, simulator="sim.variants:STUB_COUNTER",
        check="controller.devcheck.frame_check:FrameCheck", page="stub-counter.md", standard=True,
    )
)  # fmt: skip
