"""Secrets stay in: no card, reader answer, stub contents or shuffle order in logs or errors."""

from __future__ import annotations

import logging
import re

import pytest
import structlog
from structlog.testing import capture_logs

from controller.cards import parse_card
from devices.commands import SetUpCard
from devices.events import CardDrawn, DeviceEvent, MasqueRange, ReaderResult, Slot
from tests.devices.conftest import Rig, drain, of_type

# A card as text: rank and suit, or the joker. Not a bare "10": the drivers' own words carry numbers
# ("read 10 at 0" is the shuffler's register block, logged when a read is retried on a loaded
# machine), and a bare rank of one character was never matched either.
CARD_TEXT = re.compile(r"(?<![A-Za-z0-9])((?:10|[2-9AJQK])[SHDC]|JK)(?![A-Za-z0-9])")
SECRET_WORDS = re.compile(
    r"blackjack|yellow|\bblue\b|\bsmall\b|\bmedium\b|\blarge\b|face_up|\bcard=", re.IGNORECASE
)


def _leaks(text: str) -> list[str]:
    return [m.group(0) for m in CARD_TEXT.finditer(text)] + SECRET_WORDS.findall(text)


async def _play(rig: Rig, reader_up: str | None) -> list[DeviceEvent]:
    events: list[DeviceEvent] = []
    shuffler, shoe, reader = rig.driver("shuffler"), rig.driver("shoe"), rig.driver("reader")
    for d in (shuffler, shoe, reader):
        await d.poll_once()
    from devices.commands import EjectToShoe, StartShuffle

    await shuffler.send(StartShuffle(Slot.A))
    rig.clock.advance(30)
    await shuffler.poll_once()
    await shuffler.send(EjectToShoe(Slot.A))
    await shoe.poll_once()
    model = rig.model("shoe")
    while model.remaining:
        for _ in range(min(4, model.remaining)):
            hole = model.draw().card
        await shoe.poll_once()
        if reader_up is not None:
            await reader.send(SetUpCard(reader_up))
        rig.model("reader").insert(hole)
        await reader.poll_once()
    for d in (shuffler, shoe, reader):
        events += drain(d)
    return events


@pytest.mark.parametrize(("table", "up"), [("double-back-jack", "A"), ("down-under", None)])
async def test_no_secret_in_logs_through_a_full_shoe_and_reader_use(
    rig_factory,
    table: str,
    up: str | None,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    structlog.configure(cache_logger_on_first_use=False)
    caplog.set_level(logging.DEBUG)
    rig: Rig = await rig_factory(table)
    with capture_logs() as logs:
        events = await _play(rig, up)
    drawn = of_type(events, CardDrawn)
    assert len(drawn) == 312
    answers = of_type(events, ReaderResult) + of_type(events, MasqueRange)
    assert answers
    assert logs, "the drivers log (kinds of events, health), so the capture is live"
    for entry in logs:
        text = " ".join(f"{k}={v}" for k, v in entry.items())
        assert not _leaks(text), entry
    for record in caplog.records:
        assert not _leaks(record.getMessage()), record.getMessage()


def test_event_reprs_hide_cards_and_answers() -> None:
    drawn = CardDrawn("shoe", parse_card("10H", "red"), True, 7, 100)
    assert "10H" not in repr(drawn) and "True" not in repr(drawn)
    assert "True" not in repr(ReaderResult("reader", True, 3))
    from devices.events import MasqueLight

    assert "large" not in repr(MasqueRange("reader", MasqueLight.LARGE, 3)).lower()


async def test_errors_about_card_words_do_not_carry_the_word(rig: Rig) -> None:
    shoe = rig.driver("shoe")
    await shoe.poll_once()
    rig.model("shoe").load([], None)
    from sim.models import DealtCard

    rig.model("shoe").load([DealtCard(parse_card("QS", "red"))], "red")
    rig.model("shoe").draw()
    rig.sim("shoe").faults.out_of_range["draw_ring"] = 0x000F  # rank code 15: no such rank
    await shoe.poll_once()
    errors = [str(getattr(e, "reason", "")) for e in drain(shoe)]
    assert any("unknown rank code" in e for e in errors)
    assert not any(_leaks(e) for e in errors)
