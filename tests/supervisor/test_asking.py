"""The table's public snapshot says what it asks for next (controller/table/asking.py): it follows
the round request by request and shows only what is face up at the table."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from controller.console.display import now as display_now
from controller.rules.requests import DEALER, CardFor, Decision, ReaderUse
from controller.supervisor.rig import Rig
from devices.events import Key
from tests.supervisor.conftest import BLACKJACK, journal_kinds


@pytest.mark.parametrize("game", BLACKJACK)
async def test_asking_follows_each_request_of_a_round(
    game: str, table_rig: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await table_rig(game, seed=4, boxes=2)
    await rig.dealer.open_table()
    t = rig.supervisor.table
    assert rig.supervisor.snapshot()["asking"]["what"] in ("bets", "burn")
    seen: list[dict[str, Any]] = []
    answer = rig.dealer._act

    async def watching(ask: dict[str, Any], snap: dict[str, Any]) -> bool:
        asked = rig.supervisor.snapshot()["asking"]
        assert asked == ask  # the dealer acts on the table's public ask, as it stands
        json.dumps(asked)  # goes over MQTT as it is
        if t.round is None:
            return await answer(ask, snap)
        req, state = t.round.request, t.round.state
        if isinstance(req, CardFor):
            assert asked["what"] == "card" and asked["face_up"] == req.face_up
            assert asked["seat"] == req.seat and (req.seat != DEALER or asked["seat"] == 0)
        elif isinstance(req, Decision):
            box = next(b for b in state.boxes if b.seat == req.seat)
            assert asked["what"] == "decision" and asked["seat"] == req.seat
            assert asked["cards"] == [str(c) for c in box.hands[req.hand].cards]
            assert asked["up_card"] == str(state.dealer[0]) and set(asked["legal"]) == {
                a.value for a in req.legal
            }
        elif isinstance(req, ReaderUse):
            assert asked == {
                "id": asked["id"],
                "what": "reader",
                "up_card": str(state.dealer[0]),
                "masque": req.masque,
                "round": t.round_no,
            }
        if len(state.dealer) >= 2 and not state.hole_turned and not state.hole_exposed:
            assert "hole" not in asked  # never the hole card's identity; only the up card shows
        seen.append(asked)
        return await answer(ask, snap)

    rig.dealer._act = watching  # type: ignore[method-assign]
    for _ in range(3):
        await rig.dealer.play_round()
    whats = {a["what"] for a in seen}
    assert {"card", "decision"} <= whats
    assert rig.supervisor.snapshot()["asking"]["what"] in ("bets", "burn", "batch")


async def test_asking_for_dj_wild_is_the_deal_then_the_stub(table_rig: Callable[..., Awaitable[Rig]]) -> None:
    rig = await table_rig("dj-wild", seed=4, boxes=2)
    await rig.dealer.open_table()
    sup = rig.supervisor
    assert _without_id(sup.snapshot()["asking"]) == {"what": "bets", "round": 0}
    rig.dealer.hands.take_deck()
    rig.dealer.hands.place_bets(2, side=True)
    await rig.dealer.press(Key.START_GAME)
    assert _without_id(sup.snapshot()["asking"]) == {
        "what": "wild_deal",
        "boxes": [1, 2],
        "locked": True,
        "round": 1,
    }
    await rig.dealer.press(Key.NEXT)  # the hands are dealt
    assert _without_id(sup.snapshot()["asking"]) == {
        "what": "stub",
        "cards": 53 - (5 * 2 + 5 + 1),
        "round": 1,
    }


def _without_id(ask: dict[str, Any]) -> dict[str, Any]:
    assert isinstance(ask.pop("id"), str)  # which ask it is (tests/table/test_ask_id.py)
    return ask


async def test_an_answer_to_an_ask_no_longer_asked_is_refused(
    table_rig: Callable[..., Awaitable[Rig]],
) -> None:
    """Issue 21: an answer sent with the id of the ask it answers (the display's buttons do) is
    refused once the table asks something else: Next pressed on the keypad and then on the
    display must not answer the stub count that came next (687a.9(f))."""
    rig = await table_rig("dj-wild", seed=4, boxes=2)
    await rig.dealer.open_table()
    sup = rig.supervisor
    rig.dealer.hands.take_deck()
    rig.dealer.hands.place_bets(2, side=True)
    await rig.dealer.press(Key.START_GAME)
    deal = sup.snapshot()["asking"]
    assert deal["what"] == "wild_deal"
    buttons = display_now(deal, sup.snapshot(), False)
    assert buttons and all(b["args"]["ask"] == deal["id"] for b in buttons)
    hands_dealt = {"key": "next", "ask": deal["id"]}
    first = await sup.command("key", hands_dealt, "dealer-1", "dealer")
    assert first["ok"], first
    assert sup.snapshot()["asking"]["what"] == "stub"
    again = await sup.command("key", hands_dealt, "dealer-1", "dealer")
    assert not again["ok"] and "no longer asks" in again["error"]
    assert sup.snapshot()["asking"]["what"] == "stub" and sup.table.in_round  # the stub still to count


@pytest.mark.parametrize("game", BLACKJACK)
async def test_a_missed_card_is_offered_over_the_command_and_the_dealer_takes_it_later(
    game: str, table_rig: Callable[..., Awaitable[Rig]]
) -> None:
    """673a.13(g), 665a.13(f), 685a.12(f) end to end: the dealer misses box 1's second card and
    says so with the command `card_missed` (the ask's id with it); the table's public ask becomes
    the offer `card_later`, which the virtual dealer answers from the ask alone (`hit`); box 1's
    card is asked again with purpose `later` once box 2 has its second card, and the round ends."""
    rig = await table_rig(game, seed=4, boxes=2)
    await rig.dealer.open_table()
    answer = rig.dealer._act
    missed: list[dict[str, Any]] = []
    asked: list[dict[str, Any]] = []

    async def missing(ask: dict[str, Any], snap: dict[str, Any]) -> bool:
        asked.append(ask)
        if ask.get("what") == "card" and ask.get("seat") == 1 and ask.get("dealt") == 1 and not missed:
            result = await rig.supervisor.command(
                "card_missed", {"seat": 1, "ask": ask["id"]}, "dealer-1", "dealer"
            )
            assert result["ok"], result
            missed.append(ask)
            return False
        return await answer(ask, snap)

    rig.dealer._act = missing  # type: ignore[method-assign]
    await rig.dealer.play_round()
    assert missed
    after = asked[asked.index(missed[0]) + 1 :]
    offer = after[0]
    assert (offer["what"], offer["offer"], offer["seat"]) == ("offer", "card_later", 1)
    assert [(a["seat"], a.get("purpose")) for a in after[1:3]] == [(2, ""), (1, "later")]
    kinds = [
        (k, p)
        for k, p in journal_kinds(rig.supervisor.journal_path)
        if k in ("card_missed", "offer_answered")
    ]
    at = next(i for i, (k, _) in enumerate(kinds) if k == "card_missed")
    assert kinds[at][1]["seat"] == 1 and kinds[at][1]["section"] in ("673a.13(g)", "665a.13(f)", "685a.12(f)")
    assert kinds[at + 1][0] == "offer_answered" and kinds[at + 1][1]["offer"] == "card_later"
    assert kinds[at + 1][1]["taken"] is True
    settled = [p for k, p in journal_kinds(rig.supervisor.journal_path) if k == "round_settled"][-1]
    box1 = next(b for b in settled["boxes"] if b["seat"] == 1)
    assert len(box1["hands"][0]["cards"]) >= 2
