"""Double Back Jack, 58 Pa. Code Chapter 673a.

What sets it apart: a player Blackjack is paid 2 to 1 at once, before the reader (673a.7(f)); any
player 21 is paid 1 to 1 at once (673a.7(m)); a hand over 21 may buy a Second Chance card whose
value is subtracted (673a.7(l)); a dealer 22 returns the remaining wagers (673a.7(q)(1)); the
dealer draws nothing when every hand is decided (673a.7(p)).
"""

from __future__ import annotations

from controller.rules.blackjack_ladder import AtThePeek, Ladder, settle_at_the_peek
from controller.rules.hand import Hand
from controller.rules.procedure import BlackjackProcedure, Procedure
from controller.rules.requests import DEALER, CardFor, ReaderUse, SecondChanceOffer, SurrenderOffer
from controller.rules.state import Box
from controller.rules.wagers import EVEN, HALF_LOST, LOSE, PUSH, Wager, odds

BLACKJACK_PAYS = odds(2)  # 673a.12(a)
SECOND_CHANCE_PAYS = odds(1)  # 673a.12(b)
INSURANCE_PAYS = odds(2)  # 673a.12(c)

LADDER = Ladder(
    no_draw_on_21=("673a.7(k)(1)", "a hand totalling 21 or more may not draw"),
    one_card_after_double=("673a.7(k)(2)", "after a double down only one card is drawn"),
    double_limit=("673a.10(a)", "a double down is made on the first two cards only"),
    split_pair=("673a.11(a)", "only initial two cards identical in value may be split"),
    max_hands=2,
    too_many_hands=("673a.11(a)", "pairs may be split once, into two hands at most"),
    hands_before_pair=True,
    # Surrender: before any other decision and never after a split (673a.9(a), ruling D5).
    surrendered=("673a.9(a)", "the player discontinued play on this hand by surrendering"),
    surrender_after_split=("673a.9(a)", "surrender is decided before splitting, not after"),
    surrender_after_stand=("673a.9(a)", "surrender is decided before standing, not after"),
    surrender_not_first=("673a.9(a)", "surrender is the first decision on the first two cards"),
)
# 673a.7(h): no more cards; each Blackjack Wager is collected, a surrender asked before the reader
# whole (673a.9(a)(2)). Blackjacks were paid before the reader (673a.7(f)).
AT_THE_PEEK = AtThePeek(collected="673a.7(h)", early_surrender="673a.9(a)(2)")


class DoubleBackJack(BlackjackProcedure):
    chapter = "673a"
    insurance_section = "673a.8"
    ladder = LADDER

    def run(self) -> Procedure:
        rs = self.rs
        # 673a.7(e): a card to each box, the up card, a second card to each box, the hole card.
        yield from self.deal_to_boxes()
        first = yield CardFor(DEALER, 0)
        if first is None:
            # 673a.13(e): the dealer missed his first card; the players get their second cards,
            # then the dealer his two.
            yield from self.deal_to_boxes()
            yield from self.deal_to_dealer(face_up=True)
        else:
            rs.dealer.append(first)
            yield from self.deal_to_boxes()
        yield from self.deal_to_dealer(face_up=False)
        up = rs.dealer[0]

        # 673a.7(f): Blackjacks are paid 2 to 1 before anything else, dealer to the right first.
        without = rs.options.without
        pays = odds(3, 2) if "blackjack-pays-2-to-1" in without else BLACKJACK_PAYS
        for box in reversed(rs.boxes):
            if box.first.blackjack:
                if "blackjack-before-the-reader" in without and self.dealer_blackjack():
                    rs.settle_hand(box.first, PUSH, "push", "673a.7(f) switched off (simulate)")
                else:
                    rs.settle_hand(box.first, pays, "blackjack", "673a.7(f), 673a.12(a)")

        # 673a.7(g), 673a.8: Insurance when the up card is an ace (D4: not to a paid Blackjack).
        if up.is_ace:
            insurable = [
                b for b in rs.boxes if not b.first.settled or self.rulings.insurance_after_paid_blackjack
            ]
            yield from self.offer_insurance(insurable)

        peek = up.is_ace or up.is_ten_value  # 673a.7(h)
        if peek:
            # Ruling D5: with an ace or 10 up, surrender is asked before the reader (673a.9(a)(2)).
            for box in rs.boxes:
                if not box.first.settled and (yield SurrenderOffer(box.seat)):
                    box.early_surrender = True
                    box.first.done = True
            report = yield ReaderUse(masque=False)
            rs.reader_report = bool(report)
            rs.reader_agrees = bool(report) == self.dealer_blackjack()
            if up.is_ace:
                # 673a.8(a): insurance wins on a 10-value hole card, whatever the reader said.
                self.settle_insurance(self.dealer_blackjack(), INSURANCE_PAYS, "673a.8(a), 673a.12(c)")
            if report:
                settle_at_the_peek(rs, AT_THE_PEEK)
                return
            for box in rs.boxes:
                if box.early_surrender:
                    rs.settle_hand(box.first, HALF_LOST, "surrender", "673a.9(a)(2)")

        # 673a.7(i)-(m): each player's decisions, farthest to the dealer's left first.
        yield from self.play_boxes()

        # 673a.7(n): the hole card is turned; (o),(p): the dealer draws unless all is decided.
        rs.hole_turned = True
        if rs.live_hands():
            yield from self.dealer_draws()
        self.settle_remaining()

    # -- decisions -------------------------------------------------------------------------
    def surrender(self, hand: Hand, box: Box) -> None:
        # Settled at once: with an ace or 10 up the reader has already said "no Blackjack".
        up = self.rs.dealer[0]
        section = "673a.9(a)(2)" if up.is_ace or up.is_ten_value else "673a.9(a)(1)"
        self.rs.settle_hand(hand, HALF_LOST, "surrender", section)

    def after_split_card(self, hand: Hand) -> None:
        # 673a.11(b): an ace and a 10 after a split is paid as 21, not Blackjack (673a.7(m)).
        if hand.total == 21:
            if "21-paid-at-once" in self.rs.options.without:
                hand.done = True
                return
            self.rs.settle_hand(hand, EVEN, "win", "673a.11(b), 673a.7(m)")

    def after_draw(self, hand: Hand, box: Box) -> Procedure:
        t = hand.total
        if t == 21:
            if "21-paid-at-once" in self.rs.options.without:
                hand.done = True
                return
            self.rs.settle_hand(hand, EVEN, "win", "673a.7(m), 673a.12(a)")  # 21 pays at once
            return
        if t > 21:
            stake = hand.bet + hand.double_down
            if self.rulings.second_chance_stake == "original":
                stake = hand.bet
            offered = "second-chance" not in self.rs.options.without
            if offered and (yield SecondChanceOffer(box.seat, hand.index, stake)):
                yield from self.second_chance(hand, box, stake)
            elif not self.rulings.busted_hand_pushes_on_dealer_22:
                self.rs.settle_hand(hand, LOSE, "lose", "673a.7(r)(3)(i) (ruling D1)")
            hand.done = True
            return
        if hand.doubled:
            hand.done = True

    def second_chance(self, hand: Hand, box: Box, stake: int) -> Procedure:
        """673a.7(l): one more card, its value (an ace 1) subtracted from the hand."""
        hand.second_chance = stake
        card = yield CardFor(box.seat, hand.index, purpose="second_chance")
        if card is None:  # called dead instead
            return
        hand.add_second_chance(card)
        hand.done = True
        t = hand.total
        rs = self.rs
        if t > 21:
            rs.settle_hand(hand, LOSE, "lose", "673a.7(l)(1)")
            rs.settle(box.seat, hand.index, Wager.SECOND_CHANCE, stake, LOSE, "673a.7(l)(1)")
        elif t == 21:
            rs.settle_hand(hand, PUSH, "push", "673a.7(l)(2)")
            rs.settle(
                box.seat,
                hand.index,
                Wager.SECOND_CHANCE,
                stake,
                SECOND_CHANCE_PAYS,
                "673a.7(l)(2), 673a.12(b)",
            )
        # under 21: the hand waits for the dealer, 673a.7(l)(3)

    # -- the end of the round --------------------------------------------------------------
    def settle_remaining(self) -> None:
        """673a.7(q)-(s), dealer's right first."""
        rs = self.rs
        d = self.dealer_total()
        rs.start_final_settlement()
        for box in reversed(rs.boxes):
            for hand in reversed(box.hands):
                if hand.settled:
                    continue
                sc = hand.second_chance
                if d == 22 and "dealer-22-pushes" not in rs.options.without:
                    outcome, result, section = PUSH, "push", "673a.7(q)(1)"
                elif hand.busted:  # only with busted_hand_pushes_on_dealer_22 (ruling D1)
                    outcome, result, section = LOSE, "lose", "673a.7(r)(3)(i) (ruling D1)"
                else:
                    p = hand.total
                    if d > 21 or p > d:
                        outcome, result = EVEN, "win"
                        section = "673a.7(r)(1), 673a.7(s)(1)"
                    elif p == d:
                        outcome, result, section = PUSH, "push", "673a.7(r)(2), 673a.7(s)(2)"
                    else:
                        outcome, result, section = LOSE, "lose", "673a.7(r)(3), 673a.7(s)(3)"
                if sc and outcome == EVEN:
                    # 673a.7(s)(1)(i): the Blackjack Wager is returned, Second Chance paid 1 to 1.
                    rs.settle_hand(hand, PUSH, "push", "673a.7(s)(1)(i)")
                    rs.settle(
                        box.seat,
                        hand.index,
                        Wager.SECOND_CHANCE,
                        sc,
                        SECOND_CHANCE_PAYS,
                        "673a.7(s)(1)(i), 673a.12(b)",
                    )
                else:
                    rs.settle_hand(hand, outcome, result, section)
                    rs.settle(box.seat, hand.index, Wager.SECOND_CHANCE, sc, outcome, section)
