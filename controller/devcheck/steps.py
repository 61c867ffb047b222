"""Per variant of a Modbus device (devices/variants/): naming the state it reads, bringing it to
a state a row of its command table starts from (without harm), the physical steps a person does
while the check watches, and what leaves it as a table expects it. A card or a reader answer is
checked for its shape, never named. Each variant names its :class:`CheckSteps`; these are the
standard variants'."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.devcheck.report import Unreachable
from controller.devcheck.sim_port import BY_HAND
from devices import spec
from devices.errors import FrameDecodeError
from devices.profiles import LATCHES, Profile
from devices.spec import CommandRow

if TYPE_CHECKING:
    from controller.devcheck.modbus_check import ModbusCheck

Snapshot = dict[str, list[int]]


async def _nothing(c: ModbusCheck) -> None:
    return None


@dataclass(frozen=True)
class CheckSteps:
    """What ``tablectl device check`` does with one variant beyond the Modbus rules:
    ``state_of`` names the state a read shows (the vocabulary of its command table ``rows``,
    devices/spec.py), ``reach`` brings the device to a row's state or raises Unreachable,
    ``physical`` asks a person for the steps only hands can do and reports each, ``leave``
    leaves it as a table expects it after the check."""

    state_of: Callable[[Profile, Snapshot], str]
    reach: Callable[[ModbusCheck, str], Awaitable[None]]
    physical: Callable[[ModbusCheck], Awaitable[None]]
    rows: tuple[CommandRow, ...] = ()
    leave: Callable[[ModbusCheck], Awaitable[None]] = _nothing


def counted(c: ModbusCheck, name: str, before: int, after: int) -> int:
    """How far the counter register ``name`` moved, in the width its profile declares."""
    return (after - before) % (1 << c.profile.reg(name).bits)


JAM_CODE = 11  # shuffler.md: fault_code 11 while a jam is uncleared
VENDOR_FAULT = 13  # a vendor fault code the simulator is told to report (any non-jam code)


def _shuffler_state(p: Profile, s: dict[str, list[int]]) -> str:
    whole = p.enum_name("shuffler_state", s["state"][0])
    if whole in ("out_of_order", "fault"):
        return whole
    return f"A {p.enum_name('shuffler_state', s['slot_a_state'][0])}"


def _reader_state(p: Profile, s: dict[str, list[int]]) -> str:
    if s["health"][0]:
        return "failed"
    rank = s["up_rank"][0]
    return "no up card" if rank == 0 else f"up card {p.enum_name('rank', rank)}"


def _keypad_state(p: Profile, s: dict[str, list[int]]) -> str:
    out = "locked" if s["locked"][0] else "unlocked"
    if not s["locked"][0]:
        out += "".join(
            f", light {box}/{spot} on"
            for box, word in enumerate(s["lights"], start=1)
            for spot in range(1, 17)
            if word & (1 << (spot - 1))
        )
    return out + (f", meter {s['meter'][0]}" if s["meter"][0] else "")


def _shoe_state(p: Profile, s: dict[str, list[int]]) -> str:
    return "empty" if s["remaining"][0] == 0 else "loaded"


async def _reach_shuffler(c: ModbusCheck, state: str) -> None:
    now = await c.state()
    if now in ("fault", "A jammed") and c.sim is not None and state != now:
        await c.sim.mend()  # a state the check caused through the simulator's control port
        now = await c.state()
    if now in ("out_of_order", "fault") or now == "A jammed":
        raise Unreachable(f"the shuffler reads {now}; a power cycle or repair comes first")
    if state == "fault":
        if c.sim is None:
            raise Unreachable(f"{state} cannot be caused safely from outside ({BY_HAND})")
        await c.sim.fault("shuffler_fault", code=VENDOR_FAULT)
        return
    if state == "A jammed":
        await _jam(c)
        return
    if state == "out_of_order":
        await _reach_shuffler(c, "A idle")
        await c.command("mark_out_of_order")
        return
    if now == "A empty" or (state != now and now == "A empty"):
        ok = await c.person("load_slot_a", "load a batch into shuffler slot A", lambda: c._is("A idle"))
        if not ok:
            raise Unreachable("slot A was not loaded in time")
        now = "A idle"
    if state == "A idle":
        if now == "A ready":
            await c.command("start_shuffle", 1)
            now = "A shuffling"
        if now == "A shuffling":
            await c.command("abort_shuffle", 1)
        return
    if state == "A shuffling":
        if now != "A shuffling":
            await _reach_shuffler(c, "A idle")
            await c.command("start_shuffle", 1)
        return
    if state in ("A ready", "A empty"):
        if now == "A idle":
            await c.command("start_shuffle", 1)
        max_cycle = float(c.cfg.options.get("max_cycle_s", 120.0))
        if not await c.wait_for("ready", lambda: c._is("A ready"), max_cycle):
            raise Unreachable(f"slot A was not ready within max_cycle_s ({max_cycle:g} s)")
        if state == "A empty":
            await c.command("eject_to_shoe", 1)
        return
    raise Unreachable(f"no way to {state!r}")


async def _jam(c: ModbusCheck) -> None:
    """Slot A jammed: its batch loaded, the simulator told to jam at the first card, a cycle
    started; the jam is seen within the profile's max_cycle_s."""
    if c.sim is None:
        raise Unreachable(f"a jam cannot be caused safely from outside ({BY_HAND})")
    await _reach_shuffler(c, "A idle")
    await c.sim.fault("jam", at_card=1)
    await c.command("start_shuffle", 1)
    max_cycle = float(c.cfg.options.get("max_cycle_s", 120.0))
    if not await c.wait_for("jammed", lambda: c._is("A jammed"), max_cycle):
        raise Unreachable(f"slot A did not jam within max_cycle_s ({max_cycle:g} s)")


async def _reach_reader(c: ModbusCheck, state: str) -> None:
    if state == "failed":
        if c.sim is None:
            raise Unreachable(f"a failed reader cannot be caused safely from outside ({BY_HAND})")
        await c.sim.fault("reader_failure")
        return
    if c.sim is not None and await c.state() == "failed":
        await c.sim.mend()  # the failure the check caused, mended: a reset is not a repair
    await c.command("reset")
    if state.startswith("up card "):
        await c.command("set_up_card", c.profile.enum_value("rank", state.removeprefix("up card ")))


async def _reach_keypad(c: ModbusCheck, state: str) -> None:
    await c.command("unlock")
    await c.command("show_meter", 0, 0)
    if state == "locked":
        await c.command("lock")
    elif state.startswith("unlocked, light "):
        box, spot = state.removeprefix("unlocked, light ").removesuffix(" on").split("/")
        await c.command("set_light", int(box), int(spot), 1)


async def _no_reach(c: ModbusCheck, state: str) -> None:
    raise Unreachable("the device takes no commands")


async def physical_shoe(c: ModbusCheck) -> None:
    """A batch loaded when the shoe is empty, then one card drawn: the counters and the ring."""
    before = await c.snapshot()
    assert before is not None
    if before["remaining"][0] == 0:
        seq = before["batch_seq"][0]

        async def loaded() -> bool:
            s = await c.snapshot()
            return s is not None and s["batch_seq"][0] != seq and s["remaining"][0] > 0

        if not await c.person("load_shoe", "load a shuffled batch into the shoe", loaded):
            c.report.skip(
                "step.draw",
                "a drawn card is counted and its card word is in the ring",
                "the shoe was not loaded in time",
            )
            return
        before = await c.snapshot()
        assert before is not None
        after_load = before
        c.report.add(
            "step.load",
            "a loaded batch shows batch_seq + 1 and remaining = batch_size",
            after_load["remaining"][0] == after_load["batch_size"][0],
            "remaining = batch_size",
            f"{after_load['remaining'][0]} of {after_load['batch_size'][0]}",
        )
    seq, left = before["draw_seq"][0], before["remaining"][0]

    async def drawn() -> bool:
        s = await c.snapshot()
        return s is not None and s["draw_seq"][0] != seq

    if not await c.person("draw_card", "draw one card from the shoe", drawn):
        c.report.skip(
            "step.draw",
            "a drawn card is counted and its card word is in the ring",
            "no card was drawn in time",
        )
        return
    after = await c.snapshot()
    assert after is not None
    n = after["draw_seq"][0]
    ring = after["draw_ring"]
    word = ring[(n - 1) % len(ring)]
    try:
        c.profile.card_fields(word) if word else None
        shape = "a card word" if word else "0 (no card)"
    except FrameDecodeError:
        shape = "a word that names no card"
    ok = counted(c, "draw_seq", seq, n) == 1 and after["remaining"][0] == left - 1 and shape == "a card word"
    c.report.add(
        "step.draw",
        "one draw: draw_seq + 1, remaining - 1, and the card word in draw_ring[(n - 1) mod its length]",
        ok,
        "draw_seq + 1, remaining - 1, a card word",
        f"draw_seq + {counted(c, 'draw_seq', seq, n)}, remaining {after['remaining'][0] - left:+d}, {shape}",
    )


async def _physical_reader(c: ModbusCheck) -> None:
    await c.command("reset")
    await c.command("set_up_card", c.profile.enum_value("rank", "A"))
    before = await c.snapshot()
    assert before is not None
    seq = before["insert_seq"][0]
    # reader.md: a card inserted in any state counts; a failed reader (health non-zero) answers
    # no result. A failed reader is judged by that, not by a healthy one's answer.
    failed = before["health"][0] != 0

    async def inserted() -> bool:
        s = await c.snapshot()
        return s is not None and s["insert_seq"][0] != seq

    if not await c.person("reader_card", "put the test card in the reader", inserted):
        c.report.skip("step.insert", "an insertion counts and gives a result", "no card was inserted in time")
        return
    after = await c.snapshot()
    assert after is not None
    answered = after["result"][0] != 0
    ok = counted(c, "insert_seq", seq, after["insert_seq"][0]) == 1 and answered != failed
    if failed:
        requirement = "an insertion into a failed reader: insert_seq + 1 and result none (no answer)"
        expected = "insert_seq + 1 and no result"
    else:
        requirement = "an insertion: insert_seq + 1 and a result code other than none, in one update"
        expected = "insert_seq + 1 and a result"
    c.report.add(
        "step.insert",
        requirement,
        ok,
        expected,
        f"insert_seq + {counted(c, 'insert_seq', seq, after['insert_seq'][0])}, "
        + ("a result" if answered else "no result"),
    )
    await c.command("reset")


async def _physical_keypad(c: ModbusCheck) -> None:
    await c.command("unlock")  # the press is looked at from unlocked sensors: a latch shows
    before = await c.snapshot()
    assert before is not None
    seq = before["key_seq"][0]

    async def pressed() -> bool:
        s = await c.snapshot()
        return s is not None and s["key_seq"][0] != seq

    if await c.person("start_game", "press Start Game on the keypad", pressed):
        after = await c.snapshot()
        assert after is not None
        n = after["key_seq"][0]
        key = after["key_ring"][(n - 1) % len(after["key_ring"])]
        want = c.profile.enum_value("key", "start_game")
        c.report.add(
            "step.key",
            "a key press: key_seq + 1 and the key in key_ring[(n - 1) mod 8]",
            counted(c, "key_seq", seq, n) == 1 and key == want,
            f"key_seq + 1, key code {want}",
            f"key_seq + {counted(c, 'key_seq', seq, n)}, key code {key}",
        )
        await _latch(c, after)
    else:
        c.report.skip(
            "step.key", "a key press: key_seq + 1 and the key in key_ring", "no key was pressed in time"
        )
        c.report.skip("step.latch", LATCH, "no key was pressed in time")

    async def chip() -> bool:
        s = await c.snapshot()
        return s is not None and bool(s["sensors"][0] & 1)

    await c.command("unlock")
    if await c.person("chip_1_1", "put a chip on box 1, spot 1", chip):
        c.report.add("step.sensor", "a chip on box 1 spot 1 sets bit 0 of the first sensors word", True)
    else:
        c.report.skip("step.sensor", "a chip on box 1 spot 1 is sensed", "no chip was sensed in time")


LATCH = "a Start Game press latches the sensors: locked = 1 in the same update (687a.9(b))"


async def _latch(c: ModbusCheck, after: dict[str, list[int]]) -> None:
    """keypad.md: a profile with latches_on_start_game is a keypad that freezes its own sensors
    at the press; the driver then trusts the latch, so one that does not latch fails here."""
    if not c.profile.options.get(LATCHES, False):
        c.report.skip("step.latch", LATCH, f"the profile says the keypad does not latch ({LATCHES} false)")
        return
    c.report.add("step.latch", LATCH, after["locked"][0] == 1, "locked 1", f"locked {after['locked'][0]}")


async def _physical_shuffler(c: ModbusCheck) -> None:
    text = "a jam reads jammed with fault_code 11"
    try:
        await _jam(c)
    except Unreachable as exc:
        c.report.skip("step.jam", text, str(exc))
        return
    snap = await c.snapshot()
    code = -1 if snap is None else snap["fault_code"][0]
    c.report.add(
        "step.jam",
        text,
        code == JAM_CODE,
        f"jammed, fault_code {JAM_CODE}",
        f"{await c.state()}, fault_code {code}",
    )
    await c.command("clear_fault")


async def _leave_reader(c: ModbusCheck) -> None:
    await c.command("reset")


async def _leave_keypad(c: ModbusCheck) -> None:
    await c.command("unlock")


SHUFFLER = CheckSteps(_shuffler_state, _reach_shuffler, _physical_shuffler, spec.SHUFFLER)
SHOE = CheckSteps(_shoe_state, _no_reach, physical_shoe, spec.SHOE)
READER = CheckSteps(_reader_state, _reach_reader, _physical_reader, spec.READER, _leave_reader)
KEYPAD = CheckSteps(_keypad_state, _reach_keypad, _physical_keypad, spec.KEYPAD, _leave_keypad)
