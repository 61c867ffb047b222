"""Cards, shoe composition per chapter, hand totals and Blackjack."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import JOKER, CardError, parse_card, standard_deck
from controller.errors import RuleViolation
from controller.games import GAMES, GameId
from controller.rules.down_under import masque_range
from controller.rules.hand import Hand, is_blackjack, total
from controller.rules.requests import MasqueRange


def cards(text: str) -> list:
    return [parse_card(c) for c in text.split()]


def test_card_text_round_trips_and_cards_are_interned() -> None:
    for c in standard_deck():
        assert parse_card(str(c)) is c
    assert parse_card("10h") is parse_card("10H")
    assert str(JOKER) == "JK" and JOKER.is_joker
    assert parse_card("AS", "red").back == "red"


@pytest.mark.parametrize("bad", ["", "1S", "11H", "AX", "K", "JKS", "10"])
def test_bad_card_text_is_refused_in_one_line(bad: str) -> None:
    with pytest.raises(CardError) as e:
        parse_card(bad)
    assert "\n" not in str(e.value)


def test_665a_3a_double_attack_decks_have_no_tens() -> None:
    batch = GAMES[GameId.DOUBLE_ATTACK].batch(8)
    assert len(batch) == 8 * 48
    assert not any(c.rank == "10" for c in batch)
    assert Counter(c.rank for c in batch)["K"] == 32


def test_685a_3a_down_under_decks() -> None:
    spec = GAMES[GameId.DOWN_UNDER]
    for decks in (4, 5, 6, 8):
        spec.check_decks(decks)
        assert len(spec.batch(decks)) == 52 * decks
    for decks in (1, 2, 3, 7, 9):
        with pytest.raises(RuleViolation, match=r"^685a\.3\(a\)"):
            spec.check_decks(decks)


def test_673a_3_double_back_jack_decks() -> None:
    spec = GAMES[GameId.DOUBLE_BACK_JACK]
    # 673a.3(a): at least one deck; (b) with a shuffler at least two in all, in two equal
    # batches, so one deck a batch is enough (ruling D8).
    spec.check_decks(1)
    with pytest.raises(RuleViolation, match=r"^673a\.3\(a\)"):
        spec.check_decks(0)


def test_687a_dj_wild_deck_is_53_cards_with_the_joker() -> None:
    """687a.9(f): the stub count checks for 53 cards."""
    batch = GAMES[GameId.DJ_WILD].batch(1, "blue")
    assert len(batch) == 53
    assert sum(c.is_joker for c in batch) == 1
    assert {c.back for c in batch} == {"blue"}


def test_673a_3d_totals_hard_and_soft() -> None:
    assert total(cards("AS 6H")) == (17, True)
    assert total(cards("AS 6H 9C")) == (16, False)
    assert total(cards("AS AH 9C")) == (21, True)
    assert total(cards("KS QH")) == (20, False)


@pytest.mark.parametrize(
    ("game", "section"),
    [
        (GameId.DOUBLE_BACK_JACK, "673a.3(d)"),
        (GameId.DOUBLE_ATTACK, "665a.3(d)"),
        (GameId.DOWN_UNDER, "685a.3(d)(1)"),
    ],
)
def test_card_values_in_every_chapter(game: GameId, section: str) -> None:
    """673a.3(d), 665a.3(d), 685a.3(d)(1)-(3): 2 to 10 at face value (2 to 9 in 665a, which has no
    10s), J, Q, K 10, an ace 11 unless that takes the hand over 21 (then 1)."""
    deck = GAMES[game].batch(1)
    for c in deck:
        want = {"J": 10, "Q": 10, "K": 10, "A": 11}.get(c.rank) or int(c.rank)
        assert total([c]) == (want, c.is_ace), (section, str(c))
    assert max(int(c.rank) for c in deck if c.rank.isdigit()) == (9 if game == GameId.DOUBLE_ATTACK else 10)
    assert total(cards("AS KH AD")) == (12, False)  # the second ace counts 1, then the first too


def test_685a_3d3_dealer_ace_counts_11_up_to_22() -> None:
    assert total(cards("AS 10H AC"), 22) == (22, True)
    assert total(cards("AS 5H 6C"), 22) == (22, True)
    assert total(cards("AS 5H 6C"), 21) == (12, False)


def test_blackjack_only_on_initial_two_cards_and_never_after_a_split() -> None:
    """673a.1, 665a.1, 685a.1 (definitions); 673a.11(b); ruling G1."""
    assert is_blackjack(cards("AS KH")) and is_blackjack(cards("10C AD"))
    assert not is_blackjack(cards("AS 5H 5C"))
    split_hand = Hand(seat=1, index=1, cards=cards("AS KH"), from_split=True)
    assert not split_hand.blackjack  # 673a.11(b), ruling G1


def test_685a_3e_masque_ranges() -> None:
    """685a.3(e), 685a.1: blue Small 2-5, red Medium 6-9, yellow Large 10-A."""
    assert {masque_range(parse_card(r + "S")) for r in "2345"} == {MasqueRange.SMALL}
    assert {masque_range(parse_card(r + "S")) for r in "6789"} == {MasqueRange.MEDIUM}
    assert {masque_range(parse_card(r + "S")) for r in ["10", "J", "Q", "K", "A"]} == {MasqueRange.LARGE}


@given(st.lists(st.sampled_from(standard_deck()), min_size=1, max_size=12))
def test_incremental_hand_total_equals_a_fresh_count(drawn: list) -> None:
    hand = Hand(seat=1, index=0)
    for c in drawn:
        hand.add(c)
    assert (hand.total, hand.soft) == total(drawn)
    if len(drawn) >= 2:
        hand.take_last()
        assert (hand.total, hand.soft) == total(drawn[:-1])
