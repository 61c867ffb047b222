"""The shared ladder's variations, one chapter against another (controller/rules/blackjack_ladder.py).

The same hand asked of two chapters' ladders gets each chapter's own section: which question
comes first, how many hands a split makes, when a surrender is still open.
"""

from __future__ import annotations

from controller.cards import parse_card
from controller.rules.blackjack_ladder import Ladder
from controller.rules.double_attack import LADDER as DA
from controller.rules.double_back_jack import LADDER as DBJ
from controller.rules.down_under import LADDER as DU
from controller.rules.hand import Hand
from controller.rules.requests import Action
from controller.rules.state import Box


def hand(*cards: str, **flags: bool) -> Hand:
    h = Hand(seat=1, index=0, cards=[parse_card(c) for c in cards], bet=10)
    for name, value in flags.items():
        setattr(h, name, value)
    return h


def box_of(*hands: Hand) -> Box:
    for i, h in enumerate(hands):
        h.index = i
    return Box(seat=1, bet=10, hands=list(hands))


def section(ladder: Ladder, action: Action, h: Hand, box: Box) -> str | None:
    why = ladder.check(action, h, box)
    return None if why is None else why[0]


def test_a_second_split_is_refused_before_the_pair_in_673a_and_685a_after_it_in_665a() -> None:
    three_cards = hand("8S", "2H", "8D", from_split=True, acted=True)
    two = box_of(three_cards, hand("8C", "3H", from_split=True))
    assert DBJ.check(Action.SPLIT, three_cards, two) == (
        "673a.11(a)",
        "pairs may be split once, into two hands at most",
    )
    assert section(DU, Action.SPLIT, three_cards, two) == "685a.10(c)"
    four = box_of(three_cards, *(hand("8C", "3H", from_split=True) for _ in range(3)))
    assert section(DA, Action.SPLIT, three_cards, four) == "665a.11(a)"  # the pair first
    pair = hand("8S", "8D", from_split=True)
    assert (
        section(DA, Action.SPLIT, pair, box_of(pair, *(hand("8C", "3H") for _ in range(3)))) == "665a.11(c)"
    )
    assert DA.check(Action.SPLIT, pair, box_of(pair, hand("8C", "3H"))) is None  # a third hand


def test_a_split_ace_takes_one_card_except_in_673a() -> None:
    ace = hand("AS", "5D", from_split=True, split_aces=True)
    box = box_of(ace, hand("AH", "9C", from_split=True, split_aces=True))
    assert DBJ.check(Action.HIT, ace, box) is None
    assert section(DU, Action.HIT, ace, box) == "685a.10(e)"
    assert DA.check(Action.SPLIT, ace, box) == ("665a.11(e)", "aces may not be split more than once")
    assert DU.closes_after_split_card(ace) and not DA.closes_after_split_card(ace)  # 665a.9(a)
    assert DA.check(Action.SURRENDER, ace, box) is None


def test_the_double_on_two_cards_or_once_on_any() -> None:
    three = hand("2S", "3D", "4H", acted=True)
    box = box_of(three)
    assert section(DBJ, Action.DOUBLE, three, box) == "673a.10(a)"
    assert section(DU, Action.DOUBLE, three, box) == "685a.9(a)"
    assert DA.check(Action.DOUBLE, three, box) is None
    three.doubled = True
    assert DA.check(Action.DOUBLE, three, box) == (
        "665a.10(a)",
        "only one Double Down Wager is made on a hand",
    )
    assert DU.closes_after_draw(three) and not DA.closes_after_draw(three)  # may still surrender
    assert DA.check(Action.SURRENDER, three, box) is None


def test_surrender_first_decision_before_standing_or_never() -> None:
    drawn = hand("2S", "3D", "4H", acted=True)
    box = box_of(drawn)
    assert DBJ.check(Action.SURRENDER, drawn, box) == (
        "673a.9(a)",
        "surrender is the first decision on the first two cards",
    )
    assert DA.check(Action.SURRENDER, drawn, box) is None
    assert section(DU, Action.SURRENDER, hand("10S", "6D"), box) == "685a.7(i)(2)"
    stood = hand("10S", "6D", stood=True)
    assert section(DA, Action.SURRENDER, stood, box_of(stood)) == "665a.9(a)"
    on_21 = hand("10S", "5D", "6H", acted=True)
    assert section(DA, Action.SURRENDER, on_21, box_of(on_21)) == "665a.7(k)"
