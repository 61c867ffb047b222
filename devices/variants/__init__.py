"""The device variants: one registered object per variant of a device kind, bundling its driver
class, its simulator, its device-check steps and its docs page.

A profile says which variant it is with its ``driver`` option (``[options] driver = "acme-cs2"``);
without one it is its kind's standard variant. The driver factory, the simulators and
``tablectl device check`` all find what they need here, from the profile, never from a table
keyed by kind.

A variant is registered by a module of its own in this package (``devices/variants/<name>.py``)
calling :func:`register`; every module here is imported when the registry is first asked, so
adding a variant touches no other file. The simulator and the check steps live in the layers
above devices/ (sim/, controller/devcheck/), which devices/ may not import: the variant names
them as ``"module:attribute"`` references, resolved (and cached) by the layer that uses them,
the way a plug-in names its entry points.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devices.profiles import DeviceKind, Profile

if TYPE_CHECKING:
    from devices.drivers.base import Driver

DRIVER_OPTION = "driver"  # the profile option that names the variant


class UnknownVariant(LookupError):
    """A profile names a variant that is not registered, or one of another kind (one line)."""


@dataclass(frozen=True)
class DeviceVariant:
    """One variant of a device kind. ``name`` is what a profile's ``driver`` option says;
    ``standard`` marks the variant a profile of the kind gets without one (one per kind)."""

    name: str
    kind: DeviceKind
    driver: type[Driver]
    simulator: str  # "module:attribute" of its simulator (sim/), see sim/variants.py
    check: str  # "module:attribute" of its device-check steps (controller/devcheck/)
    page: str  # its page, relative to docs/devices/
    standard: bool = False

    def load_simulator(self) -> Any:
        return resolve(self.simulator)

    def load_check(self) -> Any:
        return resolve(self.check)


_REGISTRY: dict[str, DeviceVariant] = {}
_discovered = False


def register(variant: DeviceVariant) -> DeviceVariant:
    """Add ``variant`` (its module calls this once, at import); returns it."""
    old = _REGISTRY.get(variant.name)
    if old is not None and old != variant:
        raise ValueError(f"device variant {variant.name!r} is registered twice")
    if variant.driver.kind is not variant.kind:
        raise ValueError(f"device variant {variant.name!r}: its driver is a {variant.driver.kind} driver")
    if variant.standard:
        taken = next((v for v in _REGISTRY.values() if v.standard and v.kind is variant.kind), None)
        if taken is not None and taken.name != variant.name:
            raise ValueError(f"{variant.kind} has two standard variants: {taken.name}, {variant.name}")
    _REGISTRY[variant.name] = variant
    return variant


def _discover() -> None:
    """Import every module of this package once: each registers its variants."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{mod.name}")


def variants() -> list[DeviceVariant]:
    """Every registered variant, by name."""
    _discover()
    return sorted(_REGISTRY.values(), key=lambda v: v.name)


def variant(name: str) -> DeviceVariant:
    _discover()
    found = _REGISTRY.get(name)
    if found is None:
        raise UnknownVariant(f"no device variant {name!r} (registered: {', '.join(sorted(_REGISTRY))})")
    return found


def standard(kind: DeviceKind) -> DeviceVariant:
    """The variant a profile of ``kind`` is without a ``driver`` option."""
    found = next((v for v in variants() if v.standard and v.kind is kind), None)
    if found is None:
        raise UnknownVariant(f"no standard {kind} variant is registered")
    return found


def variant_of(profile: Profile) -> DeviceVariant:
    """The variant a profile is: its ``driver`` option's, or its kind's standard one.
    UnknownVariant (one line) for a name not registered or a variant of another kind."""
    name = profile.options.get(DRIVER_OPTION)
    if name is None:
        return standard(profile.kind)
    if not isinstance(name, str):
        raise UnknownVariant(f"options.{DRIVER_OPTION}: must be the name of a device variant")
    found = variant(name)
    if found.kind is not profile.kind:
        raise UnknownVariant(f"options.{DRIVER_OPTION}: {name} is a {found.kind} variant, not {profile.kind}")
    return found


_RESOLVED: dict[str, Any] = {}


def resolve(ref: str) -> Any:
    """The object a ``"module:attribute"`` reference names (imported once)."""
    if ref not in _RESOLVED:
        module, _, attr = ref.partition(":")
        _RESOLVED[ref] = getattr(importlib.import_module(module), attr)
    return _RESOLVED[ref]
