"""The alternative readings in docs/rulings.md, each selected by its config key, and the rules
that only a misreading reader can reach. Defaults are covered by tests/scripts/."""

from __future__ import annotations

import pytest

from controller.cards import parse_card
from controller.errors import RuleViolation
from controller.games import blackjack_games
from controller.rules.requests import CardFor, MasqueRange, ReaderUse
from controller.rules.round import Round
from controller.rules.state import SeatWagers
from controller.script import ScriptedRound
from tests.rules.conftest import net, options, play, seat

DBJ, DA, DU = "double-back-jack", "double-attack", "down-under"


def test_d1_busted_hand_pushes_on_dealer_22_when_configured() -> None:
    # 673a.7(q)(1), ruling D1. Seat 1: 10 6, hits K = 26, declines Second Chance. Dealer 10 6 draws 6 = 22.
    shoe = "10H 10S 6D 6C KH 6S"
    default = play(options(DBJ), shoe, seat(1, 10, "hit"))
    assert net(default) == {"bet": -10, "total": -10}
    pushed = play(options(DBJ, busted_hand_pushes_on_dealer_22=True), shoe, seat(1, 10, "hit"))
    assert net(pushed) == {"total": 0}
    assert pushed["dealer"]["total"] == 22


def test_d2_dealer_draws_nothing_when_every_hand_is_decided() -> None:
    # 673a.7(p): seat busts and declines Second Chance; dealer 10 5 stays at 15.
    result = play(options(DBJ), "10H 10S 6D 5C KH 6S", seat(1, 10, "hit"))
    assert result["dealer"]["cards"] == ["10S", "5C"]
    # With D1's alternative the busted hand is not decided, so the dealer draws.
    result = play(
        options(DBJ, busted_hand_pushes_on_dealer_22=True), "10H 10S 6D 5C KH 6S", seat(1, 10, "hit")
    )
    assert result["dealer"]["cards"] == ["10S", "5C", "6S"]


def test_d3_second_chance_stake_original() -> None:
    # 673a.7(l), ruling D3: 10 2 doubles (9) = 21? use 10 5 doubled, K = 25, second chance 5 -> 20.
    shoe = "10H 10S 5D 7C KH 5S 8C"
    current = play(options(DBJ), shoe, seat(1, 10, "double", "second_chance"))
    original = play(
        options(DBJ, second_chance_stake="original"), shoe, seat(1, 10, "double", "second_chance")
    )
    # Dealer 10 7 = 17; hand 20 wins: Blackjack Wager returned, Second Chance paid 1 to 1 (673a.7(s)(1)(i)).
    assert net(current) == {"second_chance": 20, "total": 20}
    assert net(original) == {"second_chance": 10, "total": 10}


def test_d4_insurance_after_paid_blackjack_when_configured() -> None:
    # 673a.7(f) pays A-K 2:1 first; the ace up then offers insurance (673a.7(g)).
    shoe = "AH AS KD 9C 2S"
    with pytest.raises(RuleViolation, match=r"^673a\.8\(a\)"):
        play(options(DBJ), shoe, seat(1, 10, insurance=5))
    result = play(options(DBJ, insurance_after_paid_blackjack=True), shoe, seat(1, 10, insurance=5))
    assert net(result) == {"bet": 20, "insurance": -5, "total": 15}


def test_a2_surrender_after_double_loses_the_whole_double_when_configured() -> None:
    # 665a.9(a),(b), ruling A2. Up 9; 5 4 doubles for Bet+DA (20), draws 3 = 12, surrenders.
    shoe = "9H 5S 4D 7C 3H 8D 8S"
    half = play(options(DA), shoe, seat(1, 10, "double", "surrender", double_attack=10))
    lost = play(
        options(DA, surrender_double_down="lost"), shoe, seat(1, 10, "double", "surrender", double_attack=10)
    )
    assert net(half) == {"bet": -15, "double_attack": -5, "total": -20}
    assert net(lost) == {"bet": -25, "double_attack": -5, "total": -30}


def test_u1_match_the_dealer_each_card_paid() -> None:
    # 685a.7(f), 685a.11(c), ruling U1: player 7H, up 7H, player 7S: one suited, one unsuited match.
    shoe = "7H 7H 7S 9D 10C"
    best = play(options(DU), shoe, seat(1, 10, match_the_dealer=5))
    each = play(options(DU, match_the_dealer_pays="each"), shoe, seat(1, 10, match_the_dealer=5))
    assert net(best)["match_the_dealer"] == 55  # 11 to 1 once
    assert net(each)["match_the_dealer"] == 75  # 11 to 1 + 4 to 1


def test_u3_dealer_ace_ace_as_soft_12_when_configured() -> None:
    # 685a.3(d)(3), ruling U3. Player 10 9 stands; dealer A A.
    shoe = "10H AS 9D AC 5S"
    literal = play(options(DU), shoe, seat(1, 10))
    assert literal["dealer"] == {"cards": ["AS", "AC"], "total": 22, "blackjack": False}
    assert net(literal) == {"total": 0}  # 685a.7(n)(1): returned
    twelve = play(options(DU, dealer_ace_ace=12), shoe, seat(1, 10))
    assert twelve["dealer"]["cards"] == ["AS", "AC", "5S"]  # soft 17 stands
    assert net(twelve) == {"bet": 10, "total": 10}


def test_u4_first_two_cards_rule_pays_a_large_pair_that_drew() -> None:
    # 685a.7(n)(1), ruling U4: player A A hits 7 = soft 19; dealer 10 6 draws 6 = 22.
    shoe = "AH 10S AD 6C 7S 6H"
    default = play(options(DU), shoe, seat(1, 10, "hit"))
    assert net(default) == {"total": 0}
    alt = play(options(DU, large_pair_rule="first_two_cards"), shoe, seat(1, 10, "hit"))
    assert net(alt) == {"bet": 10, "total": 10}


def test_u5_busted_hand_returned_on_dealer_22_when_configured() -> None:
    shoe = "10H 10S 6D 6C KH 6S"
    assert net(play(options(DU), shoe, seat(1, 10, "hit"))) == {"bet": -10, "total": -10}
    assert net(play(options(DU, dealer_22_returns_busted=True), shoe, seat(1, 10, "hit"))) == {"total": 0}


def test_g3_insurance_may_go_to_the_next_chip_unit() -> None:
    # 685a.8(b): half of 5 is 2.5; with 1-chips the player may insure 3, not 4.
    shoe = "10H AS 9D 7C"
    assert net(play(options(DU), shoe, seat(1, 5, insurance=3)))["insurance"] == -3
    with pytest.raises(RuleViolation, match=r"^685a\.8\(b\)"):
        play(options(DU), shoe, seat(1, 5, insurance=4))
    with pytest.raises(RuleViolation, match=r"^685a\.8\(b\)"):
        play(options(DU, min_chip=5), "10H AS 9D 7C", seat(1, 20, insurance=15))


def test_665a_10b_and_11d_dealer_blackjack_found_after_a_double_and_a_split() -> None:
    """665a.10(b), 665a.11(d)."""
    # Only reachable when the reader wrongly says "no Blackjack" (ruling A4). Up KH, hole AS.
    # Seat 1: 8 8 splits (each hand's wager Bet+DA = 15), first hand 8 3 doubles.
    shoe = "KH 8S 8D AS 3C 9H 2S 9S"
    result = play(options(DA), shoe, seat(1, 10, "split", "double", double_attack=5), reader=False)
    assert result["dealer"]["blackjack"] is True
    # Only the original Bet is collected; Double Attack, Double Down and the split wager return.
    assert net(result) == {"bet": -10, "total": -10}


def test_685a_9b_dealer_blackjack_behind_a_wrong_light() -> None:
    """685a.9(b) (and 685a.12(h), handled by the table core)."""
    # Up 10H, hole AS, but the reader lights blue: the hole is not shown (685a.12(h) territory).
    result = play(options(DU), "9S 10H 2D AS 9C", seat(1, 10, "double"), reader=MasqueRange.SMALL)
    assert result["dealer"]["blackjack"] is True
    assert net(result) == {"bet": -10, "total": -10}  # the Double Down Wager is returned


def test_a_reader_report_that_contradicts_the_hole_card_is_recorded() -> None:
    # The table core stops dealing on a wrong peek reader (665a.13(i)) before the round hears it;
    # the round itself notes the contradiction (a wrong Masque light goes on, 685a.12(h)).
    rnd = Round(options(DA), [SeatWagers(1, 10)])
    for card in ["KH", "8S", "8D", "AS"]:
        while not isinstance(rnd.request, CardFor):
            rnd.answer(0)
        rnd.answer(parse_card(card))
    assert isinstance(rnd.request, ReaderUse)
    rnd.answer(False)
    assert rnd.state.reader_agrees is False


@pytest.mark.parametrize(
    ("game", "boxes", "bet"),
    [(DBJ, "673a.2(a)", "673a.6(d)"), (DA, "665a.2(a)", "665a.6(d)"), (DU, "685a.2(a)", "685a.6(d)")],
)
def test_seats_and_bets(game: str, boxes: str, bet: str) -> None:
    shoe = "9H 9S 9D 9C 8H 8S 8D 8C"
    with pytest.raises(RuleViolation) as e:
        play(options(game), shoe, seat(7))
    assert str(e.value).startswith(boxes)
    with pytest.raises(RuleViolation) as e:
        play(options(game), shoe, seat(1, 0))
    assert str(e.value).startswith(bet)


@pytest.mark.parametrize("game", blackjack_games())
def test_final_settlement_starts_at_the_dealers_right(game: str) -> None:
    """673a.7(t), 685a.7(r), 665a.7(p): settle from the player farthest to the dealer's right."""
    cards = [parse_card(c) for c in ["9H", "9S", "9D", "9C", "8H", "8S", "8D", "8C", "7S", "7H"]]
    rnd = ScriptedRound(options(game), cards, [seat(1), seat(2), seat(3)])
    rnd.play()
    bets = [s.seat for s in rnd.round.state.settlements if s.wager == "bet"]
    assert bets == [3, 2, 1]


@pytest.mark.parametrize("game", blackjack_games())
def test_hole_card_is_turned_after_the_players(game: str) -> None:
    """673a.7(n), 665a.7(l), 685a.7(l)."""
    result = play(options(game), "9H 9S 9D 9C 8H 8S", seat(1, 10))
    assert len(result["dealer"]["cards"]) >= 2


@pytest.mark.parametrize(
    ("game", "shoe", "reader", "want"),
    [
        # s1 9H, up AD, s1 7S, hole KC; insurance 5 pays 2 to 1 (673a.12(c)).
        (DBJ, "9H AD 7S KC 5D", False, {"bet": -10, "insurance": 10, "total": 0}),
        # up AD, s1 9H 7S, hole KC; 5 to 2 (665a.12(b)); the dealer Blackjack takes only the Bet.
        (DA, "AD 9H 7S KC 5D", False, {"bet": -10, "insurance": 12.5, "total": 2.5}),
        # the Masque light says Small over a K hole (685a.12(h)); insurance still wins 2 to 1.
        (DU, "9H AD 7S KC 5D", MasqueRange.SMALL, {"bet": -10, "insurance": 10, "total": 0}),
    ],
    ids=["673a.8(a)", "665a.8(a)", "685a.8(a)"],
)
def test_insurance_is_settled_on_the_hole_card_not_the_readers_answer(
    game: str, shoe: str, reader: object, want: dict[str, float]
) -> None:
    """673a.8(a), 665a.8(a), 685a.8(a): insurance "shall win if the dealer's hole card is" a
    10-value card (K, Q, J in 665a), whatever a misreading reader said."""
    assert net(play(options(game), shoe, seat(1, 10, insurance=5), reader=reader)) == want


def test_665a_9b2i_surrender_meets_a_dealer_blackjack() -> None:
    """665a.9(b)(2)(i): the whole Bet and the Bust It wager are collected and the Double Attack
    wager returned. Up KH, s1 9S 7D, hole AS; the reader wrongly said "no Blackjack" (ruling A4).
    Seat 1 (Bet 10, Double Attack 5, Bust It 5) surrenders its 16."""
    result = play(
        options(DA), "KH 9S 7D AS 5C", seat(1, 10, "surrender", double_attack=5, bust_it=5), reader=False
    )
    assert result["dealer"]["blackjack"] is True
    assert net(result) == {"bet": -10, "bust_it": -5, "total": -15}


def test_685a_10d_dealer_blackjack_after_a_split_returns_the_split_wager() -> None:
    """685a.10(d): "collect only the amount of the initial Bet Wager ... and return the additional
    amount wagered in splitting pairs". Up 10H, hole AS behind a wrong (blue) light; s1 8S 8D splits:
    8S 3C (11) and 8D 2S (10) stand. The dealer's Blackjack takes the first hand's 10 and returns
    the split hand's 10."""
    result = play(options(DU), "8S 10H 8D AS 3C 2S 9C", seat(1, 10, "split"), reader=MasqueRange.SMALL)
    assert result["dealer"]["blackjack"] is True
    assert [h["result"] for h in result["seats"][0]["hands"]] == ["lose", "push"]
    assert net(result) == {"bet": -10, "total": -10}


def test_u1_a_journal_written_before_the_key_was_renamed_reads_the_same() -> None:
    """Journals opened before `match_the_dealer_pays` carry the ruling as `match_both_cards`."""
    from controller.game_config import options_to_dict
    from controller.journal import Classification
    from controller.journal.model import Record
    from controller.table.recorder import options_of

    doc = options_to_dict(options(DU, match_the_dealer_pays="each"))
    doc["rulings"] = {
        ("match_both_cards" if k == "match_the_dealer_pays" else k): v for k, v in doc["rulings"].items()
    }
    record = Record(1, 0.0, "table_opened", Classification.PUBLIC, {"table": "t1", "options": doc}, "", "")
    read, table = options_of(record)
    assert read.rulings.match_the_dealer_pays == "each" and table == "t1"
