"""Hypothesis fuzzing: garbled, truncated and out-of-range input to every driver.

No crash, no hang past the timeout, a one-line error, and the next good frame is parsed.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.cards import parse_card
from controller.games import GAMES, GameId
from devices.config import DeviceConfig
from devices.drivers.factory import build_driver
from devices.drivers.registers import RegisterDriver, SeqGuard
from devices.drivers.shoe import Counters, ShoeDriver
from devices.errors import FrameDecodeError
from devices.events import (
    BetSensed,
    CardDrawn,
    DeviceGlitch,
    DeviceOnline,
    Health,
    MasqueRange,
    ReaderResult,
    ShuffleStarted,
    Slot,
    StubCounted,
)
from devices.framing import Frame, LineDecoder, encode_frame
from devices.profiles import load_profile
from devices.transport.modbus import BusRegistry
from sim.clock import VirtualClock
from sim.models import DealtCard, KeypadModel, ReaderModel, ShoeModel, ShufflerModel
from sim.variants import simulator_of
from tests.devices.conftest import DEVICES, Rig, device_config, drain, of_type, poll_until

WORD = st.integers(0, 0xFFFF)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
WIRE_FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))


def _words(driver: RegisterDriver, model: Any) -> list[int]:
    start, count = driver.profile.poll_span()
    words = [0] * count
    rendered = simulator_of(driver.profile).render(model, driver.profile)
    for spec, enc in driver.profile.encode_all(rendered):
        words[spec.address - start : spec.address - start + len(enc)] = enc
    return words


def _driver(kind: str, profile: str, **extra: Any) -> RegisterDriver:
    cfg: DeviceConfig = device_config(
        kind, kind=kind, profile=f"../devices/{profile}", transport="modbus-tcp", **extra
    )
    d = build_driver(cfg, buses=BusRegistry(), clock=VirtualClock())
    assert isinstance(d, RegisterDriver)
    return d


def _shuffler() -> tuple[Any, ...]:
    m = ShufflerModel(VirtualClock(), GAMES[GameId.DOUBLE_BACK_JACK], 6)
    return "shuffler", "ref-shuffler.toml", m, lambda: m.start(Slot.A), ShuffleStarted


def _shoe() -> tuple[Any, ...]:
    m = ShoeModel()
    m.load([DealtCard(c) for c in GAMES[GameId.DOUBLE_BACK_JACK].batch(1, "red")], "red")
    return "shoe", "ref-shoe.toml", m, m.draw, CardDrawn


def _peek() -> tuple[Any, ...]:
    m = ReaderModel("peek")
    m.set_up("A")
    return "reader", "ref-reader-peek.toml", m, lambda: m.insert(parse_card("KS")), ReaderResult


def _masque() -> tuple[Any, ...]:
    m = ReaderModel("masque")
    return "reader", "ref-reader-masque.toml", m, lambda: m.insert(parse_card("4S")), MasqueRange


def _keypad() -> tuple[Any, ...]:
    m = KeypadModel(7, 2)
    return "keypad", "ref-keypad.toml", m, lambda: m.place_bet(2, 2), BetSensed


CASES = [_shuffler, _shoe, _peek, _masque, _keypad]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__.strip("_") for c in CASES])
@FUZZ
@given(data=st.data())
def test_register_drivers_survive_any_block(case: Any, data: st.DataObject) -> None:
    kind, profile, model, change, expected = case()
    d = _driver(kind, profile)
    good = _words(d, model)
    d.ingest(good)
    drain(d)
    bad = data.draw(
        st.one_of(
            st.lists(WORD, min_size=len(good), max_size=len(good)),  # anything at all
            st.lists(WORD, max_size=len(good) - 1),  # truncated
            st.builds(  # one word out of range
                lambda i, v: [*good[:i], v, *good[i + 1 :]],
                st.integers(0, len(good) - 1),
                WORD,
            ),
        )
    )
    try:
        d.ingest(bad)
    except FrameDecodeError as exc:
        assert "\n" not in str(exc) and str(exc)
    drain(d)
    # Whatever the bad block did, a good block after a real change is understood.
    d._prev = d.profile.decode_block(d._span[0], good)  # as if the bad block had not come
    _trust(d, d._prev)
    change()
    d.ingest(_words(d, model))
    assert of_type(drain(d), expected)


def _trust(d: RegisterDriver, snap: dict[str, list[int]]) -> None:
    """Forget a held-back poll too: the counters trusted are the good block's."""
    if isinstance(d, ShoeDriver):
        d._trusted, d._held = Counters.of(snap), None
    for guard, reg in ((getattr(d, "_keys", None), "key_seq"), (getattr(d, "_inserts", None), "insert_seq")):
        if isinstance(guard, SeqGuard):
            guard.trusted, guard.held = snap[reg][0], None


@FUZZ
@given(data=st.data())
def test_a_bad_shoe_block_never_invents_a_card(data: st.DataObject) -> None:
    """Issue 11: one bad poll of the shoe (any one word changed, counters included) followed by
    good polls: no card is reported that was not drawn, none twice; the drawn card is reported or,
    when the bad block looked like a reset that held, accounted for by one glitch."""
    kind, profile, model, _, _ = _shoe()
    d = _driver(kind, profile)
    for _ in range(3):
        model.draw()
    good = _words(d, model)
    d.ingest(good)
    drain(d)
    i, v = data.draw(st.integers(0, len(good) - 1)), data.draw(WORD)
    with contextlib.suppress(FrameDecodeError):
        d.ingest([*good[:i], v, *good[i + 1 :]])
    bad_events = drain(d)
    drawn = model.draw()
    after = []
    for _ in range(3):
        d.ingest(_words(d, model))
        after += drain(d)
    cards = [e for e in [*bad_events, *after] if isinstance(e, CardDrawn)]
    assert all(e.card == drawn.card for e in cards) and len(cards) <= 1
    glitches = [e for e in after if isinstance(e, DeviceGlitch)]
    assert len(cards) == 1 or glitches
    assert len(glitches) <= 1


def test_register_driver_state_is_kept_after_a_bad_block() -> None:
    kind, profile, model, change, expected = _shoe()
    d = _driver(kind, profile)
    d.ingest(_words(d, model))
    with pytest.raises(FrameDecodeError, match="block too short"):
        d.ingest([1, 2, 3])
    change()
    d.ingest(_words(d, model))
    assert len(of_type(drain(d), expected)) == 1


# -- frames ---------------------------------------------------------------------------------------

STUB = load_profile(DEVICES / "ref-stub-counter.toml")


@FUZZ
@given(junk=st.binary(max_size=300), seq=st.integers(0, 65535), count=st.integers(0, 120))
def test_line_decoder_survives_junk_and_reads_the_next_frame(junk: bytes, seq: int, count: int) -> None:
    dec = LineDecoder(STUB)
    good = encode_frame(STUB, "count", {"seq": seq, "count": count, "verified": 1})
    out = dec.feed(junk) + dec.feed(good)
    for item in out[:-1]:
        assert isinstance(item, Frame | FrameDecodeError)
        if isinstance(item, FrameDecodeError):
            assert "\n" not in str(item)
    assert out[-1] == Frame("count", {"seq": seq, "count": count, "verified": 1})


@FUZZ
@given(
    fields=st.lists(st.text(alphabet="0123456789-,x ", max_size=8), max_size=5),
    cut=st.integers(0, 40),
)
def test_line_decoder_rejects_malformed_and_truncated_frames(fields: list[str], cut: int) -> None:
    from devices.framing import encode_raw

    assert STUB.line is not None
    dec = LineDecoder(STUB)
    raw = encode_raw(STUB.line, "SC", fields)
    items = dec.feed(raw[: max(1, len(raw) - cut)] if cut else raw)
    for item in items:
        if isinstance(item, Frame):
            assert 0 <= item.values["count"] <= 120
        else:
            assert "\n" not in str(item)


# -- on the wire ----------------------------------------------------------------------------------


@pytest.fixture
async def wire_rig(rig_factory: Any) -> Rig:
    rig: Rig = await rig_factory("dj-wild")
    return rig


@pytest.mark.parametrize("name", ["shuffler", "keypad"])
@WIRE_FUZZ
@given(reply=st.binary(min_size=0, max_size=40))
async def test_modbus_drivers_survive_any_reply_on_the_wire(wire_rig: Rig, name: str, reply: bytes) -> None:
    rig = wire_rig
    d = rig.driver(name, timeout_s=0.05)
    faults = rig.sim(name).faults
    faults.replace_with.append(reply)
    await d.poll_once()  # whatever the reply, this returns within the timeout
    if d.last_error:
        assert "\n" not in d.last_error
    faults.clear()
    for _ in range(20):
        rig.clock.advance(1.0)
        if await d.poll_once():
            break
    else:
        raise AssertionError(f"{name} did not recover: {d.last_error}")


@WIRE_FUZZ
@given(junk=st.binary(max_size=120))
async def test_stub_driver_survives_junk_on_the_line(wire_rig: Rig, junk: bytes) -> None:
    rig = wire_rig
    d = rig.driver("stub", options={"expected": 53, "heartbeat_timeout_s": 0.2})
    sim = rig.sim("stub")
    if d.health is not Health.ONLINE:  # the port is open (opening it flushes what came before)
        await poll_until(d, DeviceOnline, before_poll=lambda: rig.clock.advance(1.0))
    await sim.send_raw(junk)
    await sim.count(53)
    got, seen = await poll_until(d, StubCounted, max_polls=20)
    assert got.count == 53 and got.ok
    for ev in seen:
        assert "\n" not in repr(ev)
