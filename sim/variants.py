"""How each device variant is simulated: the model it builds for a device of a table, how that
model is rendered into its profile's registers and how a written command block is carried out.

A variant (devices/variants/) names its :class:`Simulator` as ``"module:attribute"``; these are
the standard variants'. A vendor's variant writes its own in a module of its own (often the
standard one with another model)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devices.config import DeviceConfig
from devices.profiles import LATCHES, DeviceKind, Profile
from devices.variants import standard, variant_of
from sim import registers
from sim.models import KeypadModel, ReaderModel, ShoeModel, ShufflerModel, StubCounterModel, make_rng

if TYPE_CHECKING:
    from sim.table import SimTable

Registers = dict[str, list[int]]


def _no_render(model: Any, profile: Profile) -> Registers:
    return {}  # a frame device: its frame server (sim/frame_server.py) speaks for it


@dataclass(frozen=True)
class Simulator:
    """``build(config, table)``: the model of one device of ``table`` (its clock, game, seed and
    timing). ``render(model, profile)``: the register values by name (a named bit too, see
    devices/profiles.py). ``command(model, profile, name, args)``: one command, SimRefused when
    the device refuses it; its result goes to the table's wiring (a shuffler's eject)."""

    build: Callable[[DeviceConfig, SimTable], Any]
    render: Callable[[Any, Profile], Registers] = _no_render
    command: Callable[[Any, Profile, str, list[int]], Any] = registers.no_command


def simulator_of(profile: Profile) -> Simulator:
    """The simulator of the profile's variant."""
    sim = variant_of(profile).load_simulator()
    assert isinstance(sim, Simulator), sim
    return sim


def standard_simulator(kind: DeviceKind) -> Simulator:
    sim = standard(kind).load_simulator()
    assert isinstance(sim, Simulator), sim
    return sim


def counter_bits(profile: Profile, name: str) -> int:
    """The width the profile declares for a counter register (16, or 32 for a u32)."""
    return profile.reg(name).bits


def _shuffler(cfg: DeviceConfig, table: SimTable) -> ShufflerModel:
    sim, timing = cfg.sim, table.timing
    decks = int(sim.get("decks", table.decks))
    backs = tuple(cfg.options.get("backs", ("red", "blue")))
    shuffler = ShufflerModel(
        table.clock, table.game, decks, (backs[0], backs[1]),
        cycle_s=float(sim.get("cycle_s", 30.0)) * timing.cycle_factor, rng=make_rng(table.seed),
        counts_cards=bool(cfg.options.get("counts_cards", True)),
    )  # fmt: skip
    shuffler.return_delay_s = timing.return_s
    return shuffler


def shoe_model(cfg: DeviceConfig, table: SimTable) -> ShoeModel:
    """A counting shoe with the profile's ring length and draw counter width."""
    prof = cfg.profile
    return ShoeModel(
        ring=prof.reg("draw_ring").count,
        cover_fraction=float(cfg.sim.get("cover_fraction", 0.25)),
        counter_bits=counter_bits(prof, "draw_seq"),
    )


def _reader(cfg: DeviceConfig, table: SimTable) -> ReaderModel:
    mode = str(cfg.profile.options.get("mode", "peek"))
    return ReaderModel(mode, clock=table.clock, latency_s=table.timing.reader_s)


def _keypad(cfg: DeviceConfig, table: SimTable) -> KeypadModel:
    prof = cfg.profile
    spots = int(cfg.options.get("spots", prof.options.get("spots", 1)))
    return KeypadModel(
        prof.reg("sensors").count, spots, ring=prof.reg("key_ring").count,
        latches=bool(prof.options.get(LATCHES, False)), clock=table.clock, latency_s=table.timing.keypad_s,
    )  # fmt: skip


def _stub_counter(cfg: DeviceConfig, table: SimTable) -> StubCounterModel:
    return StubCounterModel(int(cfg.options.get("expected", 53)))


SHUFFLER = Simulator(_shuffler, registers.shuffler, registers.shuffler_command)
SHOE = Simulator(shoe_model, registers.shoe)
READER = Simulator(_reader, registers.reader, registers.reader_command)
KEYPAD = Simulator(_keypad, registers.keypad, registers.keypad_command)
STUB_COUNTER = Simulator(_stub_counter)
