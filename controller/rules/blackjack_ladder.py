"""The blackjack decisions the chapters word alike, and what a dealer Blackjack does to the hands.

Hit, double, split and surrender are refused by one ladder of questions, asked in the same order
in every chapter; only the sections, the reasons and a few variations differ (double on any
number of cards or the first two only, how many hands a split makes, whether and when a player may
surrender). A game names them in one :class:`Ladder`; :meth:`Ladder.check` walks the ladder.

The dealer's Blackjack is settled alike too: found at the peek, every open hand is collected (a
Blackjack pushes where the chapter says so; :class:`AtThePeek`); found only after the decisions,
only the original Bet is lost (:class:`OriginalBetOnly`). A new blackjack game names its sections
in these and writes no ladder of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.rules.hand import Hand
from controller.rules.requests import Action
from controller.rules.state import Box, RoundState
from controller.rules.wagers import LOSE, PUSH, Wager

Refusal = tuple[str, str]  # (section, reason)


@dataclass(frozen=True, slots=True, kw_only=True)
class AtThePeek:
    """The dealer's Blackjack found before the decisions (673a.7(h), 685a.7(h)): no more cards;
    each hand not yet settled is collected."""

    collected: str  # 673a.7(h), 685a.7(h)(2)
    blackjack_pushes: str | None = None  # 685a.7(h)(1); None: Blackjacks were paid before (673a.7(f))
    # A surrender asked before the reader (ruling D5) is collected whole: 673a.9(a)(2).
    early_surrender: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OriginalBetOnly:
    """The dealer's Blackjack found only after the decisions (a reader that missed it): the
    original Bet is lost, a hand formed by a split and a Double Down get their wagers back."""

    split_wager_returned: str  # 665a.11(d), 685a.10(d)
    double_down_returned: str  # 665a.10(b), 685a.9(b)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ladder:
    """A chapter's sections and variations of the shared decisions, as refusals to give."""

    # -- hit and double: no card to a hand of 21 or more, one card after a double
    no_draw_on_21: Refusal  # 673a.7(k)(1), 665a.7(j)(1), 685a.7(k)(1)
    one_card_after_double: Refusal  # 673a.7(k)(2), 665a.7(j)(2), 685a.7(k)(2)
    # One card to each split ace (665a.11(e), 685a.10(e)); None: split aces play on (673a.11).
    one_card_to_split_aces: Refusal | None = None
    # The double's limit: once on any number of cards (665a.10(a)) or on the first two cards only
    # (673a.10(a), 685a.9(a)). Its section is also where the double's amount is refused.
    double_limit: Refusal
    double_on_any_cards: bool = False
    # A hand that may draw no more (a double, a split ace) is closed at once; in 665a it stays open,
    # since it may still surrender (665a.9(a)).
    last_card_closes_hand: bool = True

    # -- split
    split_pair: Refusal  # only two cards identical in value: 673a.11(a), 665a.11(a), 685a.10(a)
    max_hands: int  # 2: split once (673a.11(a), 685a.10(c)); 4: three times (665a.11(c))
    too_many_hands: Refusal
    # 673a.11(a) and 685a.10(c) refuse a second split before asking whether the cards pair; 665a.11
    # asks the pair first.
    hands_before_pair: bool = False
    resplit_aces: Refusal | None = None  # 665a.11(e): aces are split once, whatever they drew

    # -- surrender
    no_surrender: Refusal | None = None  # 685a.7(i)(2): never
    surrendered: Refusal | None = None  # asked of a hand already surrendered (a script's leftovers)
    surrender_after_split: Refusal | None = None  # 673a.9(a)
    surrender_after_stand: Refusal | None = None  # 673a.9(a), 665a.9(a)
    surrender_not_first: Refusal | None = None  # 673a.9(a): the first decision on two cards
    surrender_on_21: Refusal | None = None  # 665a.7(k)

    @property
    def double_section(self) -> str:
        return self.double_limit[0]

    def check(self, action: Action, hand: Hand, box: Box) -> Refusal | None:
        """The (section, reason) refusing ``action`` on ``hand`` now, or None when it is allowed.

        Returns constants rather than raising: the legal set is computed for every decision and
        building exceptions for the refused actions would cost more than the round itself.
        """
        if self.surrendered is not None and hand.result == "surrender":
            return self.surrendered
        if action is Action.STAND:
            return None
        first_two = not hand.acted and len(hand.cards) == 2
        if action is Action.HIT:
            if hand.doubled:
                return self.one_card_after_double
            if hand.split_aces and self.one_card_to_split_aces is not None:
                return self.one_card_to_split_aces
            if hand.total >= 21:
                return self.no_draw_on_21
            return None
        if action is Action.DOUBLE:
            if self.double_on_any_cards and hand.doubled:
                return self.double_limit
            if hand.split_aces and self.one_card_to_split_aces is not None:
                return self.one_card_to_split_aces
            if not self.double_on_any_cards and (hand.doubled or not first_two):
                return self.double_limit
            if hand.total >= 21:
                return self.no_draw_on_21
            return None
        if action is Action.SPLIT:
            if hand.split_aces and self.resplit_aces is not None:
                return self.resplit_aces
            too_many = len(box.hands) >= self.max_hands
            if too_many and self.hands_before_pair:
                return self.too_many_hands
            if not first_two or hand.cards[0].points != hand.cards[1].points:
                return self.split_pair
            if too_many:
                return self.too_many_hands
            return None
        # Surrender.
        if self.no_surrender is not None:
            return self.no_surrender
        if self.surrender_after_split is not None and (len(box.hands) > 1 or hand.from_split):
            return self.surrender_after_split
        if self.surrender_after_stand is not None and hand.stood:
            return self.surrender_after_stand
        if self.surrender_not_first is not None and not first_two:
            return self.surrender_not_first
        if self.surrender_on_21 is not None and hand.total >= 21:
            return self.surrender_on_21
        return None

    def closes_after_split_card(self, hand: Hand) -> bool:
        """A hand formed by a split has its second card: is it done (21, or a split ace)?"""
        if hand.total >= 21:
            return True
        return hand.split_aces and self.one_card_to_split_aces is not None and self.last_card_closes_hand

    def closes_after_draw(self, hand: Hand) -> bool:
        """A card was drawn to the hand (hit or double): is it done (21 or more, or a double)?"""
        return hand.total >= 21 or (hand.doubled and self.last_card_closes_hand)


def settle_at_the_peek(rs: RoundState, rule: AtThePeek) -> None:
    """The dealer's Blackjack at the peek: the hole card is turned and each open hand settled,
    farthest to the dealer's left first."""
    rs.hole_turned = True
    rs.start_final_settlement()
    for box in rs.boxes:
        hand = box.first
        if hand.settled:
            continue
        if box.early_surrender and rule.early_surrender is not None:
            rs.settle_hand(hand, LOSE, "surrender", rule.early_surrender)
        elif hand.blackjack and rule.blackjack_pushes is not None:
            rs.settle_hand(hand, PUSH, "push", rule.blackjack_pushes)
        else:
            rs.settle_hand(hand, LOSE, "lose", rule.collected)


def collect_original_bet(rs: RoundState, hand: Hand, rule: OriginalBetOnly, collected: str) -> None:
    """The dealer's Blackjack found after the decisions: the original Bet is lost under
    ``collected``; the wager of a hand formed by a split and any Double Down come back."""
    lost = hand.index == 0  # hands after the first are formed by splits
    rs.settle(
        hand.seat,
        hand.index,
        Wager.BET,
        hand.bet,
        LOSE if lost else PUSH,
        collected if lost else rule.split_wager_returned,
    )
    rs.settle(hand.seat, hand.index, Wager.BET, hand.double_down, PUSH, rule.double_down_returned)
    hand.result = "lose" if lost else "push"
    hand.settled = True
