"""Models as register maps: render a model into the registers its profile names, and carry out
commands written to the profile's command block. Shared by the TCP and RTU servers; each
variant's simulator (sim/variants.py) names the rendering and the commands it uses."""

from __future__ import annotations

from typing import Any

from devices.events import ShufflerState, Slot
from devices.profiles import Profile
from sim.models import (
    KeypadModel,
    ReaderModel,
    ShoeModel,
    ShufflerModel,
    SimRefused,
)

Registers = dict[str, list[int]]


def _code(profile: Profile, enum: str, name: str | None) -> int:
    return 0 if name is None else profile.enum_value(enum, name)


def shuffler(m: ShufflerModel, p: Profile) -> Registers:
    state = m.state  # brings the cycle up to date first
    out: Registers = {
        "state": [p.enum_value("shuffler_state", state.value)],
        "cycle": [m.cycle & 0xFFFF],
        "cards_counted": [m.cards_counted],
        "fault_code": [m.fault_code or m.faults.device_fault],
    }
    for slot, s in m.slots.items():
        pre = f"slot_{slot.value.lower()}_"
        out[pre + "state"] = [p.enum_value("shuffler_state", s.state.value)]
        # shuffler.md: an empty slot (its batch ejected) holds no batch, so it reads back colour 0
        # and 0 decks; the model keeps the colour and size the slot is set up for, for the batch
        # that comes back to it.
        empty = s.state is ShufflerState.EMPTY
        out[pre + "back"] = [0 if empty else _code(p, "back", s.back)]
        out[pre + "decks"] = [0 if empty else s.decks]
    return out


def shoe(m: ShoeModel, p: Profile) -> Registers:
    ring = [
        0 if dc is None else p.card_word(dc.card.rank, dc.card.suit, dc.card.back, dc.face_up)
        for dc in m.ring
    ]
    return {
        "draw_seq": [m.draw_seq],
        "draw_ring": ring,
        "remaining": [m.remaining],
        "cover": [int(m.cover)],
        "batch_seq": [m.batch_seq],
        "batch_size": [m.batch_size],
        "batch_back": [_code(p, "back", m.batch_back)],
    }


def reader(m: ReaderModel, p: Profile) -> Registers:
    m.update()  # a hole card whose reading is done
    return {
        "health": [m.health],
        "insert_seq": [m.insert_seq],
        "result": [p.enum_value("result", m.result)],
        "up_rank": [_code(p, "rank", m.up_rank)],
    }


def keypad(m: KeypadModel, p: Profile) -> Registers:
    def mask(cells: set[tuple[int, int]]) -> list[int]:
        words = [0] * m.boxes
        for box, spot in cells:
            words[box - 1] |= 1 << (spot - 1)
        return words

    m.update()  # keys whose press has reached the registers
    out = {
        "sensors": mask(m.sensed()),
        "sensor_faults": mask(m.faults.stuck),
        "locked": [int(m.locked)],
        "lights": mask(m.lights),
        "meter": [m.meter],
        "key_seq": [m.key_seq],
        "key_ring": [_code(p, "key", None if k is None else k.value) for k in m.key_ring],
    }
    if "key_amount" in p.registers:  # optional: a keypad that takes no amounts has none
        out["key_amount"] = list(m.key_amount)
    return out


_SLOTS = {1: Slot.A, 2: Slot.B}


def command_name(profile: Profile, values: list[int]) -> tuple[str, list[int]]:
    """The command a block names and its arguments (padded); SimRefused for an unknown code."""
    names = {v: k for k, v in profile.commands.items()}
    name = names.get(values[0])
    if name is None:
        raise SimRefused("unknown command code")
    return name, [*values[1:], 0, 0, 0]


def shuffler_command(m: ShufflerModel, profile: Profile, name: str, args: list[int]) -> Any:
    if name in ("start_shuffle", "abort_shuffle", "eject_to_shoe"):
        slot = _SLOTS.get(args[0])
        if slot is None:
            raise SimRefused("no such slot")
        return {"start_shuffle": m.start, "abort_shuffle": m.abort, "eject_to_shoe": m.eject}[name](slot)
    if name == "clear_fault":
        return m.clear_fault()
    if name == "mark_out_of_order":
        return m.mark_out_of_order()
    raise SimRefused(f"command {name} not supported")


def reader_command(model: ReaderModel, profile: Profile, name: str, args: list[int]) -> Any:
    if name == "set_up_card":
        ranks = {v: k for k, v in profile.enums.get("rank", {}).items()}
        if args[0] not in ranks:
            raise SimRefused("unknown rank code")
        return model.set_up(None if args[0] == 0 else ranks[args[0]])
    if name == "reset":
        return model.reset()
    raise SimRefused(f"command {name} not supported")


def keypad_command(model: KeypadModel, profile: Profile, name: str, args: list[int]) -> Any:
    if name == "lock":
        return model.lock()
    if name == "unlock":
        return model.unlock()
    if name == "set_light":
        if args[2] not in (0, 1) and not model.faults.any_light_value:  # keypad.md: 0 off, 1 on; else 03
            raise SimRefused("a light is 0 (off) or 1 (on)")
        return model.set_light(args[0], args[1], bool(args[2]))
    if name == "show_meter":
        return model.show_meter((args[0] << 16) | args[1])
    raise SimRefused(f"command {name} not supported")


def no_command(model: Any, profile: Profile, name: str, args: list[int]) -> Any:
    raise SimRefused(f"command {name} not supported")
