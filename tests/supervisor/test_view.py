"""Issue 12: the demo's live view showed `●` marks but no cards, hands or results, labelled the
batch being dealt `unshuffled`, and showed DJ Wild's deck as a shoe. The view is drawn here at
every action of the virtual dealer over whole rounds, and checked against the table itself."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable

from rich.console import Console

from controller.appliance.view import LiveView, layout_rows, round_line
from controller.supervisor.rig import Rig

MakeRig = Callable[..., Awaitable[Rig]]


def _text(view: LiveView, width: int = 240) -> str:
    out = io.StringIO()
    Console(file=out, width=width, height=24, force_terminal=False).print(view.render())
    return out.getvalue()


async def test_the_view_fits_a_standard_terminal(table_rig: MakeRig) -> None:
    """80 columns by 24 lines, all six boxes, at every action of three rounds (issue 26)."""
    rig = await table_rig("down-under", boxes=6)
    view = LiveView(rig, "mqtt://127.0.0.1:1883")
    frames: list[str] = []

    async def look() -> None:
        frames.append(_text(view, width=80))

    rig.link.pace = look
    await rig.dealer.open_table()
    await rig.dealer.play(3)
    frames.append(_text(view, width=80))
    for frame in frames:
        lines = frame.rstrip("\n").split("\n")
        assert len(lines) <= 23 and max(len(line) for line in lines) <= 80, frame  # a line for the cursor
    last = frames[-1]
    assert "round 3, house " in last and " units: dealer " in last and "box 6" in last
    # A blackjack table has no stub to count; the keypad's presses say what they are.
    assert "stub" not in last and "keypad presses " in last and "cards from the shoe " in last


async def test_the_view_shows_the_layout_as_the_players_see_it(table_rig: MakeRig) -> None:
    rig = await table_rig("down-under", boxes=3)
    table, view = rig.supervisor.table, LiveView(rig, "mqtt://127.0.0.1:1883")
    frames: list[str] = []
    hidden = shown = 0

    async def look() -> None:  # at every action of the dealer, as the view would draw it then
        nonlocal hidden, shown
        frames.append(_text(view))
        rows = layout_rows(table, rig.supervisor.translator.bets, 6)
        rnd = table.round
        if rnd is None:
            return
        dealer = rnd.state.dealer
        assert rows[0][0] == "dealer"
        if len(dealer) >= 2 and not (rnd.state.hole_turned or rnd.state.hole_exposed):
            # 685a.7(h),(l): the hole card is not the players' to see until it is turned.
            assert rows[0][2].split() == [str(dealer[0]), "hole"] and rows[0][3] == ""
            hidden += 1
        elif len(dealer) >= 2:
            assert rows[0][2].split() == [str(c) for c in dealer] and rows[0][3]
            shown += 1
        for box in rnd.state.boxes:
            hand_rows = [r for r in rows if r[0].split(".")[0] == f"box {box.seat}"]
            for row, hand in zip(hand_rows, box.hands, strict=True):
                assert row[2].split() == [str(c) for c in hand.cards]
                assert row[3] == (str(hand.total) if hand.cards else "")
                assert row[4].plain == hand.result

    rig.link.pace = look
    await rig.dealer.open_table()
    await rig.dealer.play(3)
    assert hidden and shown
    last = _text(view)
    # Each settled round in the view, as the journal's public record has it.
    assert [line for line in last.splitlines() if "round 1, house " in line]
    assert "round 3, house " in last
    # The batch being dealt is not 'unshuffled' (its shuffler state is reset as it leaves).
    assert any("in the shoe, being dealt (" in f for f in frames)
    assert not any("unshuffled" in f for f in frames)


async def test_the_view_shows_dj_wild_as_dealt_by_hand(table_rig: MakeRig) -> None:
    rig = await table_rig("dj-wild", boxes=2)
    view = LiveView(rig, "mqtt://127.0.0.1:1883")
    frames: list[str] = []

    async def look() -> None:
        frames.append(_text(view))

    rig.link.pace = look
    await rig.dealer.open_table()
    await rig.dealer.play(2)
    frames.append(_text(view))
    assert all("Decks (dealt by hand) and stub" in f for f in frames)
    assert not any("Shoe and batches" in f or "in the shoe" in f for f in frames)
    assert any("the deck in play, dealt by hand" in f for f in frames)
    assert "round 2: hands dealt by hand; stub" in frames[-1]
    assert "stubs counted 2" in frames[-1] and "cards from the shoe" not in frames[-1]


def test_a_settled_round_in_one_line() -> None:
    settled = {
        "round": 7,
        "dealer": {"cards": ["10H", "7C"], "total": 17, "blackjack": False},
        "boxes": [
            {"seat": 1, "hands": [{"cards": ["9S", "9D"], "total": 18, "result": "win"}]},
            {
                "seat": 2,
                "hands": [
                    {"cards": ["8S", "KD"], "total": 18, "result": "lose"},
                    {"cards": ["8H", "2D", "5C"], "total": 15, "result": "lose"},
                ],
            },
        ],
        "settlements": [
            {"seat": 1, "hand": 0, "wager": "bet", "stake": 10, "halves": 2},
            {"seat": 2, "hand": 0, "wager": "bet", "stake": 10, "halves": -2},
            {"seat": 2, "hand": 1, "wager": "bet", "stake": 10, "halves": -2},
            {"seat": 1, "hand": 0, "wager": "match_the_dealer", "stake": 10, "halves": 3},
        ],
    }
    assert round_line(settled) == (
        "round 7: dealer 10H 7C (17); box 1 9S 9D (18) win; box 2.1 8S KD (18) lose;"
        " box 2.2 8H 2D 5C (15) lose; side: box 1 match the dealer won 15; house -5 units"
    )
    assert round_line(settled, house_first=True).startswith("round 7, house -5 units: dealer 10H 7C (17);")
    wild = {"round": 3, "wild": True}
    assert round_line({**wild, "stub": None}) == "round 3: hands dealt by hand; stub put away uncounted"
    assert round_line({**wild, "stub": {"count": 32, "ok": False}}) == (
        "round 3: hands dealt by hand; stub counted 32, WRONG (687a.9(h))"
    )
