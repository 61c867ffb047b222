"""Acme CS-2 counting dealing shoe (docs/devices/acme-cs2.md; profile config/devices/acme-cs2.toml).

Everything that is not like the reference shoe is in its profile: the cover flag and the door as
bits of one status word, a 32-bit draw counter over two registers, a 16-card ring, its back codes
and card word. The standard shoe driver reads it by those names and in that width, and the door
becomes the alarm its profile's ``[conditions.door_open]`` describes. What the variant adds is
its simulator (sim/acme_cs2.py) and a device-check step for the door
(controller/devcheck/acme_cs2.py)."""

from __future__ import annotations

from devices.drivers.shoe import ShoeDriver
from devices.profiles import DeviceKind
from devices.variants import DeviceVariant, register

ACME_CS2 = register(
    DeviceVariant(
        "acme-cs2", DeviceKind.SHOE, ShoeDriver, simulator="sim.acme_cs2:SIMULATOR",
        check="controller.devcheck.acme_cs2:STEPS", page="acme-cs2.md",
    )
)  # fmt: skip
