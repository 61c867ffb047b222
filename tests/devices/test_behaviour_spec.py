"""The device pages' "Commands by state" tables are the spec (devices/spec.py holds their rows):
each page shows exactly those rows, and every row is walked through the reference models in
sim/models.py, carried out as the command block the simulator's Modbus server writes. So the doc
and the reference implementation cannot drift."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from controller.cards import parse_card
from controller.devcheck.steps import CheckSteps
from controller.games import GAMES, GameId
from devices.events import Key, ShufflerState, Slot
from devices.profiles import DeviceKind, load_profile
from devices.spec import COMMAND_ROWS, HEADER, CommandRow, markdown_table
from devices.variants import variant_of, variants
from sim.clock import VirtualClock
from sim.models import KeypadModel, ReaderModel, ShufflerModel, SimRefused
from sim.registers import command_name
from sim.table import SimTable
from sim.variants import standard_simulator
from tests.devices.conftest import DEVICES, ROOT

PAGES = {
    DeviceKind.SHUFFLER: ("shuffler.md", "ref-shuffler.toml"),
    DeviceKind.READER: ("reader.md", "ref-reader-peek.toml"),
    DeviceKind.KEYPAD: ("keypad.md", "ref-keypad.toml"),
}
CYCLE_S = 30.0


def command(kind: DeviceKind, model: Any, profile: Any, values: list[int]) -> Any:
    """One command block carried out by the kind's standard simulator (sim/variants.py)."""
    name, args = command_name(profile, values)
    return standard_simulator(kind).command(model, profile, name, args)


def _page_rows(page: str) -> list[list[str]]:
    """The rows of the table whose header is HEADER in ``page``."""
    text = (ROOT / "docs" / "devices" / page).read_text(encoding="utf-8")
    head = "| " + " | ".join(HEADER) + " |"
    assert head in text, f"{page} has no Commands by state table"
    lines = text[text.index(head) :].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _variants_with_rows() -> list[tuple[str, str, tuple[CommandRow, ...]]]:
    """(page, a shipped profile of the variant, its rows) of every registered variant whose
    check steps drive a command table."""
    out = []
    for v in variants():
        steps = v.load_check()
        profiles = [p for p in sorted(DEVICES.glob("*.toml")) if variant_of(load_profile(p)) is v]
        if isinstance(steps, CheckSteps) and steps.rows and profiles:
            out.append((v.page, profiles[0].name, steps.rows))
    return out


@pytest.mark.parametrize(("page", "profile", "rows"), _variants_with_rows(), ids=lambda x: str(x)[:20])
def test_the_page_shows_exactly_the_spec_rows(page: str, profile: str, rows: tuple[CommandRow, ...]) -> None:
    codes = dict(load_profile(DEVICES / profile).commands)
    expected = [r.cells(codes) for r in rows]
    assert _page_rows(page) == expected, "regenerate with devices.spec.markdown_table:\n" + markdown_table(
        rows, codes
    )


# -- reaching a state on the model, and naming the state a model is in ------------------------
def _shuffler(state: str) -> tuple[ShufflerModel, VirtualClock]:
    clock = VirtualClock()
    m = ShufflerModel(clock, GAMES[GameId.DOUBLE_BACK_JACK], 6, cycle_s=CYCLE_S)
    if state in ("A shuffling", "A ready", "A empty"):
        m.start(Slot.A)
    if state in ("A ready", "A empty"):
        clock.advance(CYCLE_S)
    if state == "A empty":
        m.eject(Slot.A)
    if state == "A jammed":
        m.faults.jam_at_card = 1
        m.start(Slot.A)
        clock.advance(CYCLE_S)
    if state == "fault":
        m.faults.device_fault = 13
    if state == "out_of_order":
        m.mark_out_of_order()
    return m, clock


def _shuffler_is(m: ShufflerModel) -> str:
    if m.state in (ShufflerState.OUT_OF_ORDER, ShufflerState.FAULT):
        return m.state.value
    return f"A {m.slots[Slot.A].state.value}"


def _reader(state: str) -> ReaderModel:
    m = ReaderModel("peek")
    if state == "up card A":
        m.set_up("A")
    if state == "failed":
        m.faults.dead = True
    return m


def _reader_is(m: ReaderModel) -> str:
    if m.health:
        return "failed"
    return "no up card" if m.up_rank is None else f"up card {m.up_rank}"


def _keypad(state: str) -> KeypadModel:
    m = KeypadModel(7, 2)
    if state == "locked":
        m.lock()
    if state == "unlocked, light 1/1 on":
        m.set_light(1, 1, True)
    return m


def _keypad_is(m: KeypadModel) -> str:
    out = "locked" if m.locked else "unlocked"
    out += "".join(f", light {b}/{s} on" for b, s in sorted(m.lights) if not m.locked)
    return out + (f", meter {m.meter}" if m.meter else "")


BUILD: dict[DeviceKind, tuple[Callable[[str], Any], Callable[[Any], str]]] = {
    DeviceKind.SHUFFLER: (lambda s: _shuffler(s)[0], _shuffler_is),
    DeviceKind.READER: (_reader, _reader_is),
    DeviceKind.KEYPAD: (_keypad, _keypad_is),
}


def _rows() -> list[tuple[DeviceKind, CommandRow]]:
    return [(k, r) for k in PAGES for r in COMMAND_ROWS[k]]


@pytest.mark.parametrize(
    ("kind", "row"), _rows(), ids=lambda x: re.sub(r"\W+", "-", str(getattr(x, "command", x)))
)
def test_the_reference_model_keeps_each_row(kind: DeviceKind, row: CommandRow) -> None:
    build, name_of = BUILD[kind]
    profile = load_profile(DEVICES / PAGES[kind][1])
    model = build(row.state)
    assert name_of(model) == row.state, "the test cannot reach the row's state"
    try:
        command(kind, model, profile, list(row.words(dict(profile.commands))))
        answer = "ok"
    except SimRefused:
        answer = "03"
    assert (answer, name_of(model)) == (row.answer, row.then), row


def test_a_shuffle_cycle_takes_cycle_s_and_a_reader_result_follows_the_insert() -> None:
    """The timing rows of shuffler.md: ready after cycle_s of the device's clock, not before."""
    m, clock = _shuffler("A shuffling")
    clock.advance(CYCLE_S - 0.001)
    assert _shuffler_is(m) == "A shuffling"
    clock.advance(0.001)
    assert _shuffler_is(m) == "A ready" and m.cycle == 1
    r = _reader("up card A")
    r.insert(parse_card("KS"))
    assert (r.insert_seq, r.result) == (1, "yes")


def test_the_shoe_states_as_shoe_md_describes_them() -> None:
    """shoe.md "Behaviour": empty, loaded (batch_seq + 1, remaining = batch_size, cover 0), each
    draw one update (draw_seq + 1, remaining - 1, the card at ring[(n - 1) mod 8]), cover out
    once remaining is at or below the cover position."""
    from sim.models import DealtCard, ShoeModel

    shoe = ShoeModel(ring=8, cover_fraction=0.25)
    assert (shoe.remaining, shoe.batch_seq) == (0, 0)  # empty
    cards = [DealtCard(parse_card(c)) for c in ("AS", "2H", "3D", "4C", "5S", "6H", "7D", "8C")]
    shoe.load(cards, "red")
    assert (shoe.batch_seq, shoe.remaining, shoe.batch_size, shoe.cover) == (1, 8, 8, False)
    for n in range(1, 7):
        drawn = shoe.draw()
        assert (shoe.draw_seq, shoe.remaining, shoe.ring[(n - 1) % 8]) == (n, 8 - n, drawn)
        assert shoe.cover == (shoe.remaining <= 2)  # 0.25 of 8 cards


def test_the_stub_counter_rows_of_stub_counter_md() -> None:
    """stub-counter.md "Behaviour": a stub put in is counted with the next seq and verified when
    every card passed cleanly, never compared with 53; a power cycle restarts seq."""
    from sim.models import StubCounterModel

    stub = StubCounterModel()
    assert stub.seq == 0  # never counted
    stub.count_stub(37)
    assert (stub.seq, stub.count, stub.verified) == (1, 37, True)
    stub.count_stub(53)
    assert (stub.seq, stub.count, stub.verified) == (2, 53, True)


def test_a_power_cycle_looks_as_the_pages_say() -> None:
    """The "power cycle" lines of reader.md, keypad.md and shoe.md, as the simulators' power_off
    and power_on faults carry them out: the counters since power-up restart at 0, the rest is
    kept (the shoe keeps its cards, the reader its up card, the keypad its lock and meter)."""
    from controller.shipped import table_file
    from sim.actions import TableHands, inject
    from sim.models import DealtCard

    sim = SimTable.from_file(table_file("double-back-jack"), seed=1)
    hands = TableHands(sim)
    shoe, reader, keypad = (sim.devices[n].model for n in ("shoe", "reader", "keypad"))
    shoe.load([DealtCard(parse_card(c)) for c in ("AS", "2H", "3D", "4C")], "red")
    shoe.draw()
    reader.set_up("A")
    reader.insert(parse_card("KS"))
    keypad.press(Key.START_GAME)
    keypad.lock()
    keypad.show_meter(500)
    for name in ("shoe", "reader", "keypad"):
        inject(hands, "power_off", {"device": name})
        inject(hands, "power_on", {"device": name})
    assert (shoe.draw_seq, shoe.remaining, shoe.batch_seq) == (0, 3, 1)
    assert (reader.insert_seq, reader.up_rank, reader.health) == (0, "A", 0)
    assert (keypad.key_seq, keypad.locked, keypad.meter) == (0, True, 500)
