"""Irregularities that touch one player's hand, and the per-player Rules Submission keys, through
the table core. Each case is worked out by hand from the section it names: which card goes where,
and what each wager settles at."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import time
from typing import Any

import pytest

from controller.errors import RuleViolation
from controller.game_config import default_options
from controller.gaming_day import GamingDay
from controller.rules.requests import CardFor, Decision, MasqueRange
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.asking import asking
from controller.table.core import Table
from controller.table.events import REVEALING_KINDS
from tests.core.conftest import Desk, make

DBJ, DA, DU = "double-back-jack", "double-attack", "down-under"


def settled(d: Desk) -> dict[str, Any]:
    return [e for e in d.events if e.kind == "round_settled"][-1].payload


def lines(d: Desk, seat: int) -> list[tuple[str, int, int, str]]:
    return [
        (s["wager"], s["stake"], s["halves"], s["section"])
        for s in settled(d)["settlements"]
        if s["seat"] == seat
    ]


def hands(d: Desk, seat: int) -> list[list[str]]:
    box = next(b for b in settled(d)["boxes"] if b["seat"] == seat)
    return [h["cards"] for h in box["hands"]]


def refused(d: Desk, inp: I.Input, section: str) -> None:
    before = d.table.fingerprint()
    with pytest.raises(RuleViolation, match="^" + re.escape(section)):
        d.feed(inp)
    assert d.table.fingerprint() == before


def replays(d: Desk) -> None:
    """The journal's events rebuild the same table (the new event kinds replay)."""
    assert Table.replay(d.table.options, d.events).fingerprint() == d.table.fingerprint()


def open_two_boxes(game: str) -> Desk:
    """Boxes 1 and 2 (Bet 10), dealt so that box 1 holds 9H 6C (15) and box 2 8S 5H (13), the up
    card 7D (no insurance, no reader in 673a and 665a) and the hole card 4S (dealer 11); the
    Masque light for a 4 is blue."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    if game == DA:
        d.draw("7D")
        d.feed(I.KeyPressed(key="insurance_closed"))  # no Double Attack wagers
        d.deal("9H 8S 6C 5H 4S")
    else:
        d.deal("9H 8S 7D 6C 5H 4S")
    if game == DU:
        d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    return d


# -- 673a.13(c), 665a.13(c), 685a.12(c): an exposed card drawn in error ----------------------------
def test_673a_13c_an_exposed_card_refused_by_one_player_goes_to_the_next() -> None:
    """673a.13(c): a card drawn in error and exposed is dealt as though it were the next card; a
    player who refuses it takes no more cards this round. Box 1 (15) refuses the 3D drawn while it
    decided and stands; box 2 (13) hits and takes it: 16. The dealer's 11 draws 10C = 21."""
    d = open_two_boxes(DBJ)
    d.draw("3D")  # drawn while box 1 decides: held face down (673a.13(b))
    assert d.kinds()[-1] == "card_held"
    d.feed(I.HeldCardExposed(by="dealer-1"))
    exposed = d.events[-1]
    assert exposed.kind == "held_card_exposed" and exposed.payload["card"] == "3D"
    assert exposed.kind in REVEALING_KINDS  # the players saw it: public from now on
    refused(d, I.ExposedCardRefused(seat=2), "673a.13(c)")  # box 1 is deciding
    d.feed(I.ExposedCardRefused(seat=1))
    assert [e.kind for e in d.events[-2:]] == ["exposed_card_refused", "decision"]
    assert d.events[-1].payload == {"round": 1, "seat": 1, "hand": 0, "action": "stand"}
    d.feed(I.KeyPressed(key="hit"))  # box 2 takes the exposed card
    d.feed(I.KeyPressed(key="stand"))
    d.draw("10C")
    assert hands(d, 1) == [["9H", "6C"]] and hands(d, 2) == [["8S", "5H", "3D"]]
    assert settled(d)["dealer"]["cards"] == ["7D", "4S", "10C"]
    assert all(b.conserved() for b in d.table.batches.values())
    replays(d)


@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.13(c)"), (DA, "665a.13(c)"), (DU, "685a.12(c)")])
def test_an_exposed_card_nobody_takes_goes_to_the_discard_rack(game: str, section: str) -> None:
    """673a.13(c), 665a.13(c), 685a.12(c): refused by the players and not usable by the dealer, the
    card goes to the discard rack. Box 1 holds 9H 6C (3D 6C in 665a, where the 3D drawn during the
    Double Attack offer, before the boxes' cards, is simply the next card); the dealer 7D KS stands
    on 17."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    if game == DA:
        d.draw("7D")
        d.draw("3D")  # drawn before the first cards to the boxes: it cannot be refused there
        refused(d, I.HeldCardExposed(by="dealer-1"), section)
        d.feed(I.KeyPressed(key="next"))  # no Double Attack; 3D is then used as the next card
        d.deal("6C KS")
        assert d.table.round is not None and d.table.round.state.boxes[0].first.cards[0].rank == "3"
        d.draw("9D")  # drawn in error while box 1 decides
    else:
        d.deal("9H 7D 6C KS")
        if game == DU:
            d.feed(I.ReaderReport(light=MasqueRange.LARGE))
        d.draw("3D")
    d.feed(I.HeldCardExposed(by="dealer-1"))
    d.feed(I.ExposedCardRefused(seat=1))
    assert d.kinds()[-3:] == ["hole_card_turned", "exposed_card_discarded", "round_settled"]
    assert settled(d)["dealer"]["total"] == 17
    assert all(b.conserved() for b in d.table.batches.values())
    replays(d)


# -- 673a.13(e): the dealer misses his first card --------------------------------------------------
def test_673a_13e_the_dealer_missed_his_first_card() -> None:
    """673a.13(e): the dealer goes on with the players' second cards, then deals himself two."""
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    d.deal("9H 8S")
    d.feed(I.DealerCardMissed(by="dealer-1"))
    d.deal("6C 5H")
    assert isinstance(d.table.round.request, CardFor) and d.table.round.request.seat == 0  # type: ignore[union-attr]
    refused(d, I.DealerCardMissed(by="dealer-1"), "673a.13(e)")  # now he deals his own
    d.deal("7D 4S")
    dealt = [
        (e.payload["seat"], e.payload["card"])
        for e in d.events
        if e.kind in ("card_dealt", "hole_card_dealt")
    ]
    assert dealt == [(1, "9H"), (2, "8S"), (1, "6C"), (2, "5H"), (0, "7D"), (0, "4S")]
    assert isinstance(d.table.round.request, Decision)  # type: ignore[union-attr]
    replays(d)


@pytest.mark.parametrize(("game", "section"), [(DA, "665a.7(f)"), (DU, "685a.7(e)")])
def test_only_673a_has_a_remedy_for_the_dealers_missed_card(game: str, section: str) -> None:
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    refused(d, I.DealerCardMissed(by="dealer-1"), section)


# -- a hand called dead, one player at a time ---------------------------------------------------
@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.13(g)"), (DA, "665a.13(f)"), (DU, "685a.12(f)")])
def test_a_box_the_deal_passed_by_is_dead_and_its_wagers_returned(game: str, section: str) -> None:
    """673a.13(g), 665a.13(f), 685a.12(f): no cards dealt to a box: its hand is dead, the player is
    in the next deal. Box 1 is passed by; box 2 gets 8S 5H (13), the dealer 7D 4S (11) draws KC."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    if game == DA:
        d.draw("7D")
        d.feed(I.KeyPressed(key="insurance_closed"))
    refused(d, I.HandCalledDead(seat=2, by="dealer-1"), section)  # box 2 is not being dealt to
    d.feed(I.HandCalledDead(seat=1, by="dealer-1"))
    d.deal("8S 5H 4S" if game == DA else "8S 7D 5H 4S")
    if game == DU:
        d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    d.feed(I.KeyPressed(key="stand"))
    d.draw("KC")
    assert hands(d, 1) == [[]] and hands(d, 2) == [["8S", "5H"]]
    assert lines(d, 1) == [("bet", 10, 0, section)]
    assert lines(d, 2)[0][:3] == ("bet", 10, -2)  # 13 against 21
    replays(d)


@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.13(h)"), (DA, "665a.13(g)"), (DU, "685a.12(g)")])
def test_a_requested_card_not_dealt_the_player_takes_a_dead_hand(game: str, section: str) -> None:
    """673a.13(h), 665a.13(g), 685a.12(g): box 1 (15) asks for a card the dealer does not deal it and
    takes the dead hand: its wager comes back; box 2 (13) plays on and loses to the dealer's 21."""
    d = open_two_boxes(game)
    refused(d, I.HandCalledDead(seat=1, by="floor-1"), section)  # box 1 has not asked for a card
    d.feed(I.KeyPressed(key="hit"))
    refused(d, I.HandCalledDead(seat=2, by="floor-1"), section)
    d.feed(I.HandCalledDead(seat=1, by="floor-1"))
    assert isinstance(d.table.round.request, Decision) and d.table.round.request.seat == 2  # type: ignore[union-attr]
    d.feed(I.KeyPressed(key="stand"))
    d.draw("KC")
    assert lines(d, 1) == [("bet", 10, 0, section)]
    assert hands(d, 1) == [["9H", "6C"]]
    assert lines(d, 2)[0][:3] == ("bet", 10, -2)


# -- 673a.13(g),(h), 665a.13(f),(g), 685a.12(f),(g): the player's card dealt after the others -----
def ask(d: Desk) -> dict[str, Any]:
    return asking(d.table)


@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.13(g)"), (DA, "665a.13(f)"), (DU, "685a.12(f)")])
def test_a_second_card_missed_is_dealt_after_all_other_players_at_the_players_option(
    game: str, section: str
) -> None:
    """673a.13(g), 665a.13(f), 685a.12(f): only one card was dealt to box 1 (9H); at the player's
    option the dealer deals him the second card after all other players have received a second
    card. The table offers it (``card_later``); `hit` takes it: box 2 gets 5H first, then box 1
    its 6C, then the dealer his hole card. Box 1 (15) and box 2 (13) stand; the dealer's 11 draws
    KC (21)."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    if game == DA:
        d.draw("7D")
        d.feed(I.KeyPressed(key="insurance_closed"))
        d.deal("9H 8S")
    else:
        d.deal("9H 8S 7D")
    refused(d, I.PlayerCardMissed(seat=2, by="dealer-1"), section.replace("(g)", "(h)").replace("(f)", "(g)"))
    d.feed(I.PlayerCardMissed(seat=1, by="dealer-1"))
    offer = ask(d)
    assert (offer["what"], offer["offer"], offer["seat"], offer["section"]) == (
        "offer",
        "card_later",
        1,
        section,
    )
    assert offer["answers"] == [{"key": "hit", "answer": "take"}, {"key": "next", "answer": "decline"}]
    refused(d, I.KeyPressed(key="stand"), section)
    d.feed(I.KeyPressed(key="hit"))
    assert (ask(d)["what"], ask(d)["seat"]) == ("card", 2)  # box 2's second card comes first
    d.draw("5H")
    assert (ask(d)["seat"], ask(d)["purpose"]) == (1, "later")
    d.draw("6C")
    assert (ask(d)["seat"], ask(d)["face_up"]) == (0, False)  # then the hole card
    d.draw("4S")
    if game == DU:
        d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    d.feed(I.KeyPressed(key="stand"))
    d.feed(I.KeyPressed(key="stand"))
    d.draw("KC")
    assert hands(d, 1) == [["9H", "6C"]] and hands(d, 2) == [["8S", "5H"]]
    assert lines(d, 1)[0][:3] == ("bet", 10, -2)  # 15 against 21
    missed = [e.payload for e in d.events if e.kind == "card_missed"]
    assert missed == [{"round": 1, "seat": 1, "hand": 0, "section": section, "by": "dealer-1"}]
    answered = [e.payload for e in d.events if e.kind == "offer_answered"]
    assert {"offer": "card_later", "seat": 1, "value": True, "taken": True}.items() <= answered[-1].items()
    replays(d)


@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.13(h)"), (DA, "665a.13(g)"), (DU, "685a.12(g)")])
def test_a_requested_card_missed_is_dealt_after_the_others_before_the_hole_card_is_turned(
    game: str, section: str
) -> None:
    """673a.13(h), 665a.13(g), 685a.12(g): box 1 (9H 6C, 15) hits and the dealer fails to deal
    the card; the player takes it after all other players have received their additional cards
    but before the hole card is turned: box 2 (8S 5H) hits 2D and stands, then box 1 gets 3S
    (18) and stands; the dealer (7D 4S) turns the hole card and draws KC (21)."""
    d = open_two_boxes(game)
    refused(d, I.PlayerCardMissed(seat=1, by="dealer-1"), section)  # no card asked for yet
    d.feed(I.KeyPressed(key="hit"))
    d.feed(I.PlayerCardMissed(seat=1, by="dealer-1"))
    assert (ask(d)["offer"], ask(d)["section"], ask(d)["cards"]) == ("card_later", section, ["9H", "6C"])
    d.feed(I.KeyPressed(key="hit"))
    assert (ask(d)["what"], ask(d)["seat"]) == ("decision", 2)
    d.feed(I.KeyPressed(key="hit"))
    d.draw("2D")  # box 2: 15
    d.feed(I.KeyPressed(key="stand"))
    assert (ask(d)["what"], ask(d)["seat"], ask(d)["purpose"]) == ("card", 1, "later")
    assert not d.table.round.state.hole_turned  # type: ignore[union-attr]
    d.draw("3S")  # box 1: 18, and his turn goes on
    assert (ask(d)["what"], ask(d)["seat"]) == ("decision", 1)
    d.feed(I.KeyPressed(key="stand"))
    d.draw("KC")
    assert hands(d, 1) == [["9H", "6C", "3S"]] and hands(d, 2) == [["8S", "5H", "2D"]]
    replays(d)


@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.13(h)"), (DA, "665a.13(g)"), (DU, "685a.12(g)")])
def test_a_requested_card_missed_the_player_may_take_the_dead_hand_instead(game: str, section: str) -> None:
    """The other option of 673a.13(h), 665a.13(g), 685a.12(g): `next` at the offer calls the hand
    dead and returns the wager, as ``hand_called_dead`` does."""
    d = open_two_boxes(game)
    d.feed(I.KeyPressed(key="hit"))
    d.feed(I.PlayerCardMissed(seat=1, by="dealer-1"))
    refused(d, I.HandCalledDead(seat=1, by="floor-1"), section)  # the player is answering the offer
    d.feed(I.KeyPressed(key="next"))
    assert (ask(d)["what"], ask(d)["seat"]) == ("decision", 2)
    d.feed(I.KeyPressed(key="stand"))
    d.draw("KC")
    assert lines(d, 1) == [("bet", 10, 0, section)] and hands(d, 1) == [["9H", "6C"]]
    replays(d)


def test_685a_12g_no_card_later_once_the_hole_card_is_exposed() -> None:
    """685a.12(g): the card after the others is offered "unless that hole card has been exposed in
    accordance with 685a.7(h)" (both dealer cards Large): then the dead hand is the only option."""
    d = make(DU)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    d.deal("9H 8S KD 6C 5H QS")  # the dealer KD QS: both Large, the hole card exposed
    d.feed(I.ReaderReport(light=MasqueRange.LARGE))
    assert d.table.round.state.hole_exposed  # type: ignore[union-attr]
    d.feed(I.KeyPressed(key="hit"))
    refused(d, I.PlayerCardMissed(seat=1, by="dealer-1"), "685a.12(g)")
    d.feed(I.HandCalledDead(seat=1, by="dealer-1"))
    d.feed(I.KeyPressed(key="stand"))  # box 2's 13 against the dealer's 20
    assert lines(d, 1) == [("bet", 10, 0, "685a.12(g)")]


def test_a_box_that_got_no_card_is_dead_not_offered_a_card_later() -> None:
    """673a.13(g): "If no cards are dealt to a player's hand, the hand is dead": no option."""
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    refused(d, I.PlayerCardMissed(seat=1, by="dealer-1"), "673a.13(g)")


def test_685a_12h_a_wrong_light_each_hand_dead_or_played_on() -> None:
    """685a.12(h): after a wrong light the dealer calls a hand dead, "including those Bet Wagers for
    players who exceeded 21", or lets it play on. Box 1 10H 6C hits 9D (25); box 2 8S 5H stands on
    13. Hole KC, light blue (wrong). Box 1 is called dead: its 10 comes back; box 2 plays on and
    loses to the dealer's 17."""
    d = make(DU)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    d.deal("10H 8S 7D 6C 5H KC")
    d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    assert [e.payload["section"] for e in d.events if e.kind == "alarm_raised"] == ["685a.12(h)"]
    d.feed(I.KeyPressed(key="hit"))
    d.draw("9D")  # 25: box 1 is over 21
    d.feed(I.HandCalledDead(seat=1, by="floor-1"))
    d.feed(I.KeyPressed(key="stand"))
    assert settled(d)["dealer"]["cards"] == ["7D", "KC"]
    assert lines(d, 1) == [("bet", 10, 0, "685a.12(h)")]
    assert lines(d, 2) == [("bet", 10, -2, "685a.7(q)(2)")]
    replays(d)


# -- 673a.6(b): barring a patron who sat out a round until the reshuffle ------------------------
def test_673a_6b_a_box_that_sat_out_may_not_wager_until_the_reshuffle() -> None:
    desk = Desk(replace(default_options(DBJ), bar_non_wagering=True))

    def play(*seats: int) -> None:
        desk.feed(I.RoundOpened(wagers=tuple(SeatWagers(s, 10) for s in seats)))
        desk.deal(" ".join(["2S"] * len(seats) + ["9D"] + ["2H"] * len(seats) + ["8C"]))  # dealer 17
        for _ in seats:
            desk.feed(I.KeyPressed(key="stand"))
        assert desk.table.round is None

    play(1, 2)  # the first round of the shoe: anyone may wager
    refused(desk, I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(3, 10))), "673a.6(b)")  # 3 sat out
    play(1)  # box 2 sits this one out
    refused(desk, I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))), "673a.6(b)")
    refused(desk, I.PatronPermitted(seat=1, by="floor-1"), "673a.6(b)(1)")  # not barred
    desk.feed(I.PatronPermitted(seat=2, by="floor-1"))  # (b)(1): the house lets box 2 back in
    play(1, 2)
    desk.feed(I.ReshuffleOrdered(by="floor-1"))  # (b)(2): after a reshuffle anyone may wager
    assert desk.table.wagering_seats is None
    replays(desk)


def test_without_the_key_nobody_is_barred() -> None:
    d = make(DBJ)
    assert d.table.options.bar_non_wagering is False
    refused(d, I.PatronPermitted(seat=2, by="floor-1"), "673a.6(b)(1)")


# -- 673a.6(e), 665a.6(g), 685a.6(f): adjacent boxes per player ---------------------------------
@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.6(e)"), (DA, "665a.6(g)"), (DU, "685a.6(f)")])
def test_a_player_bets_on_at_most_the_submitted_number_of_adjacent_boxes(game: str, section: str) -> None:
    desk = Desk(replace(default_options(game), boxes_per_player=2))

    def wagers(*boxes: tuple[int, str]) -> I.RoundOpened:
        return I.RoundOpened(wagers=tuple(SeatWagers(s, 10, player=p) for s, p in boxes))

    refused(desk, wagers((1, "p1"), (2, "p1"), (3, "p1")), section)  # three boxes
    refused(desk, wagers((1, "p1"), (3, "p1")), section)  # not adjacent
    desk.feed(wagers((2, "p1"), (3, "p1"), (4, "p2")))
    started = [e for e in desk.events if e.kind == "round_started"][-1].payload
    assert [w.get("player") for w in started["wagers"]] == ["p1", "p1", "p2"]


# -- 673a.7(t), 685a.7(r): the Rules Submission's settlement procedure --------------------------
@pytest.mark.parametrize(
    ("procedure", "order"),
    [
        (1, [(2, "collect"), (3, "pay"), (1, "pay")]),  # 673a.7(t)(1): all losing, then all winning
        (2, [(3, "pay"), (2, "collect"), (1, "pay")]),  # 673a.7(t)(2): player by player
    ],
    ids=["673a.7(t)(1)", "673a.7(t)(2)"],
)
def test_673a_7t_the_dealer_is_told_to_collect_and_pay_in_the_submitted_order(
    procedure: int, order: list[tuple[int, str]]
) -> None:
    """Boxes 1 10H 9C (19), 2 10S 6D (16), 3 10D 8H (18) stand against the dealer's 10C 7S (17):
    box 1 and box 3 win, box 2 loses. Counterclockwise from the dealer's right: 3, 2, 1."""
    d = make(DBJ, settlement_procedure=procedure)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10), SeatWagers(3, 10))))
    d.deal("10H 10S 10D 10C 9C 6D 8H 7S")
    for _ in range(3):
        d.feed(I.KeyPressed(key="next"))  # 10 up: no early surrender (ruling D5)
    d.feed(I.ReaderReport(blackjack=False))
    for _ in range(3):
        d.feed(I.KeyPressed(key="stand"))
    told = settled(d)["dealer_order"]
    assert [(x["seat"], x["action"]) for x in told] == order
    assert all(x["amount"] == 10 and x["wager"] == "bet" for x in told)


@pytest.mark.parametrize(
    ("procedure", "order"),
    [(1, [(2, "collect"), (3, "pay"), (1, "pay")]), (2, [(3, "pay"), (2, "collect"), (1, "pay")])],
    ids=["685a.7(r)(1)", "685a.7(r)(2)"],
)
def test_685a_7r_the_dealer_is_told_to_collect_and_settle_in_the_submitted_order(
    procedure: int, order: list[tuple[int, str]]
) -> None:
    """685a.7(r)(1),(2): boxes 1 10H 9C (19), 2 8S 5H (13), 3 10D 8H (18) stand against the
    dealer's 7D KC (17, a yellow light): boxes 1 and 3 win, box 2 loses."""
    d = make(DU, settlement_procedure=procedure)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10), SeatWagers(3, 10))))
    d.deal("10H 8S 10D 7D 9C 5H 8H KC")
    d.feed(I.ReaderReport(light=MasqueRange.LARGE))
    for _ in range(3):
        d.feed(I.KeyPressed(key="stand"))
    assert [(x["seat"], x["action"]) for x in settled(d)["dealer_order"]] == order


def test_665a_7p_double_attack_pays_and_collects_player_by_player() -> None:
    """665a.7(p): one procedure, player by player from the dealer's right; no submission key."""
    d = open_two_boxes(DA)
    d.feed(I.KeyPressed(key="stand"))
    d.feed(I.KeyPressed(key="hit"))
    d.draw("6D")  # box 2: 19
    d.feed(I.KeyPressed(key="stand"))
    d.draw("6H")  # dealer 11 + 6 = 17
    told = settled(d)["dealer_order"]
    assert [(x["seat"], x["action"]) for x in told] == [(2, "pay"), (1, "collect")]


# -- 673a.2(d), 665a.2(d), 685a.2(d): the reader's daily inspection -----------------------------
@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.2(d)"), (DA, "665a.2(d)"), (DU, "685a.2(d)")])
def test_the_reader_is_inspected_each_gaming_day(game: str, section: str) -> None:
    """The floorperson inspects the reader at the beginning of each gaming day; it is recorded like
    the deck inspection. The gaming day runs from 6 a.m. Pennsylvania time: the table starts at
    2027-01-15 03:00 EST, still the gaming day of 14 January; 07:00 EST is the next one."""
    desk = Desk(replace(default_options(game), reader_inspection_required=True))
    refused(desk, I.RoundOpened(wagers=(SeatWagers(1, 10),)), section)
    refused(desk, I.ReaderInspected(floorperson=" "), section)
    desk.feed(I.ReaderInspected(floorperson="floor-1"))
    assert desk.events[-1].payload == {"floorperson": "floor-1", "gaming_day": "2027-01-14"}
    assert desk.table.snapshot()["reader_inspected_for"] == "2027-01-14"
    desk.now = 1_800_000_000 + 4 * 3600  # 07:00 EST on 15 January
    refused(desk, I.RoundOpened(wagers=(SeatWagers(1, 10),)), section)
    desk.feed(I.ReaderInspected(floorperson="floor-2"))
    desk.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    replays(desk)


def test_the_readers_gaming_day_is_the_table_files() -> None:
    """A casino whose gaming day starts at 02:00 (its table file's gaming_day_starts): at 03:00 EST
    on 15 January it is already the 15th's (issue 26)."""
    desk = Desk(replace(default_options(DBJ), reader_inspection_required=True))
    desk.table.calendar = GamingDay("America/New_York", time(2, 0))
    desk.feed(I.ReaderInspected(floorperson="floor-1"))
    assert desk.events[-1].payload == {"floorperson": "floor-1", "gaming_day": "2027-01-15"}
