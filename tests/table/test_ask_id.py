"""Each ask the table publishes carries an ``id`` (controller/table/asking.py): the same while
the table asks the same thing, whatever else of it changes, and another as soon as it asks anything
new, so a dealer or a console answers each ask once however often the state is published.

Issue 21: DJ Wild's deal is asked before and after Start Game locks the Progressive wagers
(687a.9(b)); a dealer that took the second for a new ask pressed Next twice, and the second Next
put the stub away before it could be counted (687a.9(f))."""

from __future__ import annotations

import re
from pathlib import Path

from controller.rules.requests import DEALER, Action, CardFor, Decision
from controller.table import inputs as I
from controller.table.asking import ANSWERS, asking
from controller.table.core import Table
from tests.table.helpers import BJ, DA, WILD, manual, ready


def test_dj_wild_locking_the_wagers_is_the_sameasking() -> None:
    rig = ready(WILD, counted=False)
    bets = asking(rig.table)
    rig.feed(I.WildRoundOpened(boxes=(1, 3)))
    open_ = asking(rig.table)
    assert open_["what"] == "wild_deal" and open_["locked"] is False
    rig.feed(I.StartGame())  # 687a.9(b): the Progressive wagers locked, the deal still to come
    locked = asking(rig.table)
    assert locked["locked"] is True and locked["id"] == open_["id"]
    rig.feed(I.WildHandsDealt())
    stub = asking(rig.table)
    assert stub["what"] == "stub"
    assert len({bets["id"], open_["id"], stub["id"]}) == 3


def test_the_cut_offered_to_the_next_seat_is_a_newasking() -> None:
    """673a.5(c): after a refusal the cut is offered to the next seat; 5(e): a recut offered to
    the same person as before is asked again."""
    rig = manual()
    rig.feed(I.FirstPlayerSeated(seat=4))
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    first = asking(rig.table)
    assert first["what"] == "cut" and first["seat"] == 4
    assert asking(rig.table)["id"] == first["id"]  # the same ask, published again
    rig.feed(I.CutRefused(seat=4))
    dealer = asking(rig.table)
    assert dealer["what"] == "cut" and dealer["seat"] == 0 and dealer["id"] != first["id"]
    rig.feed(I.CutMade(at=20, by=0))
    cover = asking(rig.table)
    rig.feed(I.RecutOrdered(by="floor-1"))  # 673a.5(e): the dealer, the last cutter, cuts again
    recut = asking(rig.table)
    assert recut["what"] == "cut" and recut["seat"] == 0
    assert len({first["id"], dealer["id"], cover["id"], recut["id"]}) == 4
    rig.feed(I.CutMade(at=30, by=0))
    again = asking(rig.table)  # the cover card of the recut stack: asked as before, a new ask
    assert again["what"] == "cover_card" and again["id"] != cover["id"]


def test_a_replayed_table_asks_by_the_same_id() -> None:
    """The id is the journalled state's: a restart asks the ask it had not had answered by the
    same id, so a dealer who answered it before the restart does not answer it again."""
    rig = ready(WILD, counted=False)
    rig.feed(I.WildRoundOpened(boxes=(2,)))
    rig.feed(I.StartGame())
    replayed = Table.replay(rig.options, rig.events)
    assert asking(replayed) == asking(rig.table)


def test_a_resplit_asks_its_card_by_a_new_id() -> None:
    """665a.11(c): a box of 8-8 splits, draws an 8 to its first hand and splits again; the card
    asked for that hand then looks as it did after the first split (seat 2, hand 0, one card
    dealt, "split"). It is another ask: a dealer who answers each id once must be asked again.
    Every ask after an answer carries an id no earlier ask of the round carried."""
    rig = ready(DA, counted=False)
    while rig.table.burns_due:
        rig.draw()
    rig.open_round((2,))
    eights = iter(["8S", "8H", "8D", "8C", "8S", "8H", "8D", "8C"])
    seen: dict[str, dict[str, object]] = {}  # id -> the ask that carried it
    splits = 0
    guard = 0
    while rig.table.round is not None and guard < 60:
        guard += 1
        ask = asking(rig.table)
        body = {k: v for k, v in ask.items() if k != "id"}
        assert ask["id"] not in seen, f"{ask} reuses the id of {seen[ask['id']]}"
        seen[ask["id"]] = body
        req = rig.table.round.request
        if isinstance(req, CardFor) and req.seat == 2 and splits < 2:
            rig.draw(next(eights))
        elif isinstance(req, CardFor) and req.seat == DEALER:
            rig.draw("9C" if len(rig.table.round.state.dealer) == 0 else "7C")  # no offers, no reader
        elif isinstance(req, Decision) and Action.SPLIT in req.legal and splits < 2:
            splits += 1
            rig.feed(I.KeyPressed(key="split"))
        else:
            rig.answer()
    assert splits == 2 and rig.table.round is None


def test_no_bets_are_asked_for_that_start_game_would_refuse() -> None:
    """673a.2(d): before the floor has inspected the reader this gaming day Start Game is refused;
    the table says what it waits for instead of asking for bets, and asks for bets (a new ask)
    once the inspection is recorded, so a dealer who answers each ask once is asked again."""
    rig = ready(BJ, reader_inspection_required=True)
    while rig.table.burns_due:
        rig.draw()
    waiting = asking(rig.table)
    assert waiting["what"] == "wait" and waiting["section"] == "673a.2(d)"
    rig.refuse(I.RoundOpened(wagers=()), "673a.2(d)")
    rig.feed(I.ReaderInspected(floorperson="floor-1"))
    bets = asking(rig.table)
    assert bets["what"] == "bets" and bets["id"] != waiting["id"]


def test_the_card_asked_again_after_one_found_face_up_is_a_new_ask() -> None:
    """673a.13(a): a card that comes out of the shoe face up is discarded, not used; the table
    asks for the same card again, and a dealer who drew for the first ask must draw again."""
    rig = ready(BJ)
    while rig.table.burns_due:
        rig.draw()
    rig.open_round((1,))
    before = asking(rig.table)
    assert before["what"] == "card"
    step = rig.draw("KH", face_up_in_shoe=True)
    assert [e.kind for e in step.events] == ["card_discarded_face_up"]
    after = asking(rig.table)
    assert {k: v for k, v in after.items() if k != "id"} == {k: v for k, v in before.items() if k != "id"}
    assert after["id"] != before["id"]


def test_mqtt_md_lists_the_records_that_answer_an_ask() -> None:
    """docs/mqtt.md says exactly when a new id is issued: its list of answers is ANSWERS."""
    text = (Path(__file__).parents[2] / "docs" / "mqtt.md").read_text(encoding="utf-8")
    start = text.index("When a new `id` is issued, exactly:")
    paragraph = text[start : text.index("So a new `id` is issued", start)]
    assert set(re.findall(r"`([a-z_]+)`", paragraph)) - {"id", "locked"} == ANSWERS
