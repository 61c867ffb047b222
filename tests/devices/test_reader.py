"""Hole-card readers (peek and Masque) over Modbus RTU on a pty."""

from __future__ import annotations

from controller.cards import parse_card
from devices.commands import ResetReader, SetUpCard
from devices.events import (
    DeviceOnline,
    MasqueLight,
    MasqueRange,
    ReaderFailed,
    ReaderMisuse,
    ReaderRestored,
    ReaderResult,
)
from sim.models import READER_DEAD_CODE
from tests.devices.conftest import Rig, drain, of_type, poll_until


async def _peek(rig: Rig, up: str, hole: str) -> list:  # type: ignore[type-arg]
    d = rig.driver("reader")
    await d.send(SetUpCard(up))
    await d.poll_once()
    drain(d)
    rig.model("reader").insert(parse_card(hole))
    await d.poll_once()
    return drain(d)


async def test_peek_answers_blackjack_or_not(rig: Rig) -> None:
    d = rig.driver("reader")
    await poll_until(d, DeviceOnline)
    yes = await _peek(rig, "A", "KS")
    assert [r.blackjack for r in of_type(yes, ReaderResult)] == [True]
    no = await _peek(rig, "K", "9H")
    assert [r.blackjack for r in of_type(no, ReaderResult)] == [False]
    ten_ace = await _peek(rig, "10", "AD")
    assert [r.blackjack for r in of_type(ten_ace, ReaderResult)] == [True]
    assert not of_type(yes + no + ten_ace, ReaderMisuse)


async def test_peek_with_an_up_card_that_does_not_allow_it_is_misuse(rig: Rig) -> None:
    await rig.driver("reader").poll_once()
    events = await _peek(rig, "7", "AS")
    assert [m.up_rank for m in of_type(events, ReaderMisuse)] == ["7"]
    assert of_type(events, ReaderResult)  # 673a.13(i): play continues after notice


async def test_double_attack_reader_does_not_peek_under_a_ten(rig_factory) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await rig_factory("double-attack")
    await rig.driver("reader").poll_once()
    events = await _peek(rig, "10", "AS")
    assert [m.up_rank for m in of_type(events, ReaderMisuse)] == ["10"]


async def test_dead_reader_fails_then_recovers(rig: Rig) -> None:
    d = rig.driver("reader")
    await d.poll_once()
    model = rig.model("reader")
    model.faults.dead = True
    failed, _ = await poll_until(d, ReaderFailed)
    assert failed.code == READER_DEAD_CODE
    model.insert(parse_card("KS"))
    await d.poll_once()
    assert not of_type(drain(d), ReaderResult)  # a dead reader answers nothing
    model.faults.dead = False
    await poll_until(d, ReaderRestored)
    await d.send(ResetReader())
    assert of_type(await _peek(rig, "A", "QH"), ReaderResult)


async def test_masque_lights_by_range(rig_factory) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await rig_factory("down-under")
    d = rig.driver("reader")
    await d.poll_once()
    lights = []
    for hole in ("2C", "5D", "6H", "9S", "10C", "KD", "AH"):
        rig.model("reader").insert(parse_card(hole))
        await d.poll_once()
        lights += [e.light for e in of_type(drain(d), MasqueRange)]
    B, R, Y = MasqueLight.SMALL, MasqueLight.MEDIUM, MasqueLight.LARGE
    assert lights == [B, B, R, R, Y, Y, Y]


async def test_masque_wrong_light_is_reported_as_the_device_shows_it(rig_factory) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await rig_factory("down-under")
    d = rig.driver("reader")
    await d.poll_once()
    rig.model("reader").faults.wrong_light = True
    rig.model("reader").insert(parse_card("3C"))
    await d.poll_once()
    # 685a.13(h) is the table's call once the card is exposed; the driver reports the light.
    assert [e.light for e in of_type(drain(d), MasqueRange)] == [MasqueLight.MEDIUM]
    rig.model("reader").faults.wrong_light = False
    rig.model("reader").insert(parse_card("3C"))
    await d.poll_once()
    assert [e.light for e in of_type(drain(d), MasqueRange)] == [MasqueLight.SMALL]


async def test_reset_clears_the_round_not_the_count_nor_the_failure(rig: Rig) -> None:
    """docs/devices/reader.md, 'What reset clears': up_rank and result to none; insert_seq and
    health as they were; a card inserted before the next set_up_card is misuse."""
    d = rig.driver("reader")
    await poll_until(d, DeviceOnline)
    assert of_type(await _peek(rig, "A", "KS"), ReaderResult)
    model = rig.model("reader")
    model.faults.dead = True
    await poll_until(d, ReaderFailed)
    await d.send(ResetReader())
    await d.poll_once()
    assert drain(d) == []  # no event: a reset is not an insertion, nor a repair
    kept = (model.up_rank, model.result, model.insert_seq, model.health)
    assert kept == (None, "none", 1, READER_DEAD_CODE)
    model.faults.dead = False
    await poll_until(d, ReaderRestored)
    model.insert(parse_card("KS"))  # no up card written since the reset
    await d.poll_once()
    events = drain(d)
    assert of_type(events, ReaderMisuse) == [ReaderMisuse("reader", None)]
    assert [r.blackjack for r in of_type(events, ReaderResult)] == [False]
