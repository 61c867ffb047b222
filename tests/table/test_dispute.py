"""`tablectl journal show`: the round told in words a floorperson reads out (673a.7(u), 665a.7(q),
685a.7(s)): who had which cards, the offers and decisions, the results in words and money; hands
numbered from 1 as the console numbers them; DJ Wild's ordinary steps not called irregularities;
no Python data in the text; ``--json`` the same account as data."""

from __future__ import annotations

from typing import Any

from controller.journal import Classification, Record
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.dispute import format_round, reconstruct, round_records
from controller.table.events import DomainEvent
from tests.core.conftest import make
from tests.table.helpers import WILD, ready


def records(events: list[DomainEvent], at: float | None = None) -> list[Record]:
    """The events as a journal holds them, a device's counters folded in as the recorder does;
    ``at``: the first record's instant, each next one a second later (else the events' own)."""
    seen = {"device": "keypad", "counters": {"key_seq": 7}}
    return [
        Record(
            i,
            e.at if at is None else at + i - 1,
            e.kind,
            Classification.PUBLIC,
            {**e.payload, "device_seen": seen},
            "",
            "",
        )
        for i, e in enumerate(events, start=1)
    ]


def told(
    events: list[DomainEvent], round_no: int = 1, at: float | None = None, time_zone: str = "America/New_York"
) -> tuple[str, dict[str, Any]]:
    rnd = reconstruct(*round_records(records(events, at), round_no), time_zone)
    return format_round(rnd, "t1 (Test)"), rnd


def test_each_line_has_its_time_of_day_and_the_round_its_batch_colour() -> None:
    """Surveillance footage is matched to a round by the batch's colour and the time of day: the
    header names the batch in the shoe and the day and times on the casino's wall clock with
    its UTC offset; each line its time; ``--json`` gives ``at`` and ``time`` for every entry."""
    d = make("double-back-jack")
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("8S 9H 6D KS")  # box 1 8-6, up 9, hole K
    d.feed(I.KeyPressed(key="stand"))
    # 2025-11-29 07:06:40 UTC is 02:06:40 in New York (EST, UTC-05:00).
    text, rnd = told(d.events, at=1_764_400_000.0)
    start = next(i for i, e in enumerate(d.events, start=1) if e.kind == "round_started")
    first_card = next(i for i, e in enumerate(d.events, start=1) if e.kind == "card_dealt")
    header = text.splitlines()[1]
    assert header.startswith("blue batch; 2025-11-29 from 02:06:")
    assert header.endswith("America/New_York (UTC-05:00)")
    assert f"{first_card:>6}  02:06:{40 + first_card - 1:02d}  Box 1 dealt 8S" in text, text
    assert rnd["batches"] == ["blue"] and rnd["time_zone"] == "America/New_York"
    assert rnd["started"]["time"] == f"2025-11-29T02:06:{40 + start - 1:02d}.000-05:00"
    card = next(e for e in rnd["happened"] if e["event"] == "card_dealt")
    assert card["at"] == 1_764_400_000.0 + first_card - 1 and card["time"].endswith("-05:00")
    # Another zone, another wall clock; the same instants.
    text, rnd = told(d.events, at=1_764_400_000.0, time_zone="UTC")
    assert rnd["started"]["time"].endswith("+00:00") and "UTC (UTC+00:00)" in text


def test_a_split_and_a_double_for_less_told_in_words_and_money() -> None:
    d = make("double-back-jack")
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    d.deal("8S 4C 9H 8H 6D KS")  # box 1 8-8, box 2 4-6, up 9, hole K
    d.feed(I.KeyPressed(key="split"))
    d.draw("3D")  # hand 1: 8-3
    d.feed(I.KeyPressed(key="double", amount=5))
    d.draw("9C")  # 20
    d.draw("10C")  # hand 2: 8-10 = 18
    d.feed(I.KeyPressed(key="stand"))
    d.feed(I.KeyPressed(key="double"))
    d.draw("7C")  # box 2: 17
    text, rnd = told(d.events)
    assert "{" not in text and "device_seen" not in text
    for line in (
        "Box 1: Bet 10",
        "Box 1 hand 1 splits",
        "Box 1 hand 1 doubles down for 5",
        "Box 1 hand 2 dealt 10C (to the split hand)",
        "Box 2 doubles down for the most allowed",
        "Dealer's hole card dealt face down (it was KS)",
        "Dealer: 9H KS = 19",
        "Box 1 hand 1: 8S 3D 9C = 20, won",
        "Box 1 hand 2: 8H 10C = 18, lost",
        "Box 1 hand 1 Double Down 5: paid +5",
        "Box 2 Double Down 10: lost -10",
        "In all: Box 1 +5; Box 2 -20",
    ):
        assert line in text, f"{line!r} not in:\n{text}"
    assert "hand 0" not in text and "Irregularities" not in text
    # --json: the same account as data, hands from 1, the keyed amount, no device counters.
    box1 = rnd["boxes"][1]
    assert [d["hand"] for d in box1["decisions"]] == [1, 1, 2]
    assert box1["decisions"][1] == {
        "seq": box1["decisions"][1]["seq"],
        "hand": 1,
        "action": "double",
        "amount": 5,
    }
    assert {line["hand"] for line in rnd["settlement"]["settlements"]} == {1, 2}
    assert all("device_seen" not in e for e in rnd["happened"])


def test_dj_wild_ordinary_steps_are_not_irregularities() -> None:
    rig = ready(WILD)
    rig.feed(I.WildRoundOpened(boxes=(1, 3)))
    rig.feed(I.BetSensed(box=3, present=True))
    rig.feed(I.StartGame())
    rig.feed(I.WildHandsDealt())
    rig.feed(I.StubCounted(count=53 - 16))
    text, rnd = told(rig.events)
    assert not rnd["irregularities"] and "rregularit" not in text
    for line in (
        "Box 1: Ante and Blind",
        "Box 3: Ante and Blind, Progressive Bonus",
        "Box 3 Progressive Bonus wager placed",
        "Start Game: Progressive Bonus wagers locked (boxes 3)",
        "Hands dealt from the hand (16 cards)",
        "Stub counted: 37 cards, as expected",
    ):
        assert line in text, f"{line!r} not in:\n{text}"
    assert "wagers -" not in text and "{" not in text


def test_a_missed_card_taken_later_is_told() -> None:
    """673a.13(g): the missed card, the player's option and the card dealt after the others."""
    d = make("double-back-jack")
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    d.deal("9H 8S 7D")
    d.feed(I.PlayerCardMissed(seat=1, by="dealer-1"))
    d.feed(I.KeyPressed(key="hit"))
    d.deal("5H 6C 4S")
    text, rnd = told(d.events)
    for line in (
        "Box 1: the dealer missed its card (673a.13(g), reported by dealer-1)",
        "Box 1 offered the card the dealer missed, after the others: took it",
        "Box 1 dealt 6C (the card missed, dealt after the others)",
    ):
        assert line in text, f"{line!r} not in:\n{text}"
    assert [e["event"] for e in rnd["irregularities"]] == ["card_missed"]
