"""Double Attack Blackjack, 58 Pa. Code Chapter 665a.

What sets it apart: no 10s in the decks (665a.3(a)); the dealer's up card comes first and the
Double Attack Wager is made after seeing it (665a.7(e)); Blackjack pays even money (665a.12(a));
insurance pays 5 to 2 and wins only on a K, Q or J (665a.8); surrender after drawing, doubling or
splitting (665a.9); double on any number of cards (665a.10); up to four hands (665a.11); the Bust
It wager on the dealer's third card (665a.7(m), 665a.12(c)).
"""

from __future__ import annotations

from controller.cards import Card
from controller.errors import RuleViolation
from controller.rules.blackjack_ladder import Ladder, OriginalBetOnly, collect_original_bet
from controller.rules.hand import Hand, total
from controller.rules.procedure import BlackjackProcedure, Procedure
from controller.rules.requests import DoubleAttackOffer, ReaderUse
from controller.rules.state import Box
from controller.rules.wagers import EVEN, HALF_LOST, LOSE, PUSH, Wager, odds

INSURANCE_PAYS = odds(5, 2)  # 665a.12(b)

LADDER = Ladder(
    no_draw_on_21=("665a.7(j)(1)", "a hand totalling 21 or more may not draw"),
    one_card_after_double=("665a.7(j)(2)", "after a Double Down Wager only one card is drawn"),
    one_card_to_split_aces=("665a.11(e)", "each split ace receives only one card"),
    double_limit=("665a.10(a)", "only one Double Down Wager is made on a hand"),
    double_on_any_cards=True,
    # After a double or on a split ace the hand may still surrender (665a.9(a)): not closed.
    last_card_closes_hand=False,
    # A split ace is refused by the aces rule whatever it drew: 11(e) forbids the resplit, and
    # 11(a)'s "identical in value" would name the wrong rule for A-5.
    resplit_aces=("665a.11(e)", "aces may not be split more than once"),
    split_pair=("665a.11(a)", "only two cards identical in value may be split"),
    max_hands=4,
    too_many_hands=("665a.11(c)", "pairs may be split at most three times, four hands"),
    # Surrender: any time before standing while the hand is under 21 (665a.9(a), 665a.7(k)).
    surrendered=("665a.9(a)", "the player discontinued play on this hand by surrendering"),
    surrender_after_stand=("665a.9(a)", "a player may not elect to surrender after deciding to stand"),
    surrender_on_21=("665a.7(k)", "a hand totalling 21 or more may not surrender"),
)
# 665a.10(b), 665a.11(d): on a dealer Blackjack a Double Down and a split wager come back.
ORIGINAL_BET_ONLY = OriginalBetOnly(split_wager_returned="665a.11(d)", double_down_returned="665a.10(b)")

# 665a.12(c): the Bust It paytable.
BUST_IT_THREE_EIGHTS_SUITED = odds(200)
BUST_IT_THREE_EIGHTS_COLOUR = odds(50)
BUST_IT_THIRD_CARD = {"6": odds(15), "7": odds(10), "8": odds(8), "9": odds(6),
                      "J": odds(3), "Q": odds(3), "K": odds(3)}  # fmt: skip


def bust_it_pays(first_three: list[Card]) -> tuple[int, str]:
    """Net half-stakes of a winning Bust It wager and the paytable line (665a.12(c))."""
    a, b, c = first_three
    if a.rank == b.rank == c.rank == "8":
        if a.suit == b.suit == c.suit:
            return BUST_IT_THREE_EIGHTS_SUITED, "665a.12(c) 8-8-8 of the same suit"
        if a.colour == b.colour == c.colour:
            return BUST_IT_THREE_EIGHTS_COLOUR, "665a.12(c) 8-8-8 of the same color"
    return BUST_IT_THIRD_CARD[c.rank], f"665a.12(c) third card {c.rank}"


class DoubleAttack(BlackjackProcedure):
    chapter = "665a"
    insurance_section = "665a.8"
    ladder = LADDER

    def run(self) -> Procedure:
        rs = self.rs
        # 665a.7(e): the dealer's up card first; then each box may add a Double Attack Wager.
        yield from self.deal_to_dealer(face_up=True)
        up = rs.dealer[0]
        for box in rs.boxes:
            amount = int((yield DoubleAttackOffer(box.seat, box.bet)) or 0)
            if not 0 <= amount <= box.bet:
                raise RuleViolation(
                    "665a.6(e)",
                    f"seat {box.seat}: a Double Attack Wager of {amount} is more than the Bet of {box.bet}",
                )
            box.double_attack = box.first.double_attack = amount
        # 665a.7(f): two cards to each box, then the hole card face down.
        yield from self.deal_to_boxes()
        yield from self.deal_to_boxes()
        yield from self.deal_to_dealer(face_up=False)

        # 665a.7(g): insurance on an ace; the reader on an ace, K, Q or J.
        if up.is_ace:
            yield from self.offer_insurance([b for b in rs.boxes if not b.dead])
        if up.is_ace or up.is_face:
            report = yield ReaderUse(masque=False)
            rs.reader_report = bool(report)
            rs.reader_agrees = bool(report) == self.dealer_blackjack()
            if up.is_ace:
                # 665a.8(a): insurance wins on a K, Q or J hole card, whatever the reader said.
                self.settle_insurance(self.dealer_blackjack(), INSURANCE_PAYS, "665a.8(a), 665a.12(b)")
            if report:
                rs.hole_turned = True
                self.settle_bust_it()
                self.settle_remaining()
                return

        # 665a.7(h)(1): a player Blackjack is paid at once, even money on Bet and Double Attack.
        for box in rs.boxes:
            hand = box.first
            if hand.blackjack and not hand.settled:
                rs.settle_hand(hand, EVEN, "blackjack", "665a.7(h)(1), 665a.12(a)")
                rs.settle(
                    box.seat, 0, Wager.DOUBLE_ATTACK, box.double_attack, EVEN, "665a.7(h)(1), 665a.12(a)"
                )
        # 665a.7(h)(2)-(k): the players' decisions.
        yield from self.play_boxes()

        # 665a.7(l)-(n): the hole card, the Bust It third card, then draw to 17 (ruling A7).
        rs.hole_turned = True
        rs.dealer_played = True
        if total(rs.dealer)[0] < 17:
            yield from self.deal_to_dealer(face_up=True)
        self.settle_bust_it()
        yield from self.dealer_draws()
        self.settle_remaining()

    # -- decisions -------------------------------------------------------------------------
    def double_maximum(self, box: Box) -> int:
        return box.bet + box.double_attack  # 665a.10(a)

    def split_wager(self, box: Box) -> int:
        return box.bet + box.double_attack  # 665a.11(a), ruling A3

    def surrender(self, hand: Hand, box: Box) -> None:
        rs = self.rs
        up = rs.dealer[0]
        if (up.is_ace or up.is_face) and self.dealer_blackjack():
            # 665a.9(b)(2)(i): the whole Bet and the Bust It wager are collected, the Double Attack
            # wager returned. Reached only when the reader did not find the Blackjack (ruling A4);
            # a Double Down and a split wager come back as 665a.10(b) and 665a.11(d) say.
            section = "665a.9(b)(2)(i)"
            collect_original_bet(rs, hand, ORIGINAL_BET_ONLY, section)
            rs.settle(hand.seat, hand.index, Wager.DOUBLE_ATTACK, hand.double_attack, PUSH, section)
            if box.stake(Wager.BUST_IT) and not box.bust_it_settled:
                rs.settle(box.seat, None, Wager.BUST_IT, box.stake(Wager.BUST_IT), LOSE, section)
                box.bust_it_settled = True
            hand.result = "surrender"
            hand.settled = hand.done = True
            return
        # 665a.9(b)(1),(2)(ii): half of the Bet and Double Attack wagers; ruling A2 for a double.
        section = "665a.9(b)"
        rs.settle(hand.seat, hand.index, Wager.BET, hand.bet, HALF_LOST, section)
        dd_outcome = HALF_LOST if self.rulings.surrender_double_down == "half" else LOSE
        rs.settle(hand.seat, hand.index, Wager.BET, hand.double_down, dd_outcome, f"{section} (ruling A2)")
        rs.settle(hand.seat, hand.index, Wager.DOUBLE_ATTACK, hand.double_attack, HALF_LOST, section)
        hand.result = "surrender"
        hand.settled = hand.done = True

    # -- the end of the round --------------------------------------------------------------
    def settle_bust_it(self) -> None:
        """665a.7(m): paid on a dealer bust in exactly three cards, else collected."""
        rs = self.rs
        first_two = total(rs.dealer[:2])[0]
        busted_in_three = first_two < 17 and len(rs.dealer) >= 3 and total(rs.dealer[:3])[0] > 21
        for box in reversed(rs.boxes):
            bust_it = box.stake(Wager.BUST_IT)
            if not bust_it or box.bust_it_settled:
                continue
            if busted_in_three:
                halves, line = bust_it_pays(rs.dealer[:3])
                rs.settle(box.seat, None, Wager.BUST_IT, bust_it, halves, f"665a.7(m)(2)(i), {line}")
            elif first_two >= 17:
                rs.settle(box.seat, None, Wager.BUST_IT, bust_it, LOSE, "665a.7(m)(1)")
            else:
                rs.settle(box.seat, None, Wager.BUST_IT, bust_it, LOSE, "665a.7(m)(2)(ii)")

    def settle_remaining(self) -> None:
        """665a.7(o), in the order of 665a.7(p): dealer's right first."""
        rs = self.rs
        dealer_bj = self.dealer_blackjack()
        d = self.dealer_total()
        rs.start_final_settlement()
        for box in reversed(rs.boxes):
            for hand in reversed(box.hands):
                if hand.settled:
                    continue
                da = hand.double_attack
                if dealer_bj:
                    # 665a.7(o)(1)(ii)(A),(iii), (o)(2); 665a.10(b); 665a.11(d): only the original
                    # Bet is collected; Double Attack, Double Down and split wagers come back.
                    if hand.blackjack:
                        rs.settle_hand(hand, PUSH, "push", "665a.7(o)(1)(iii)")
                        rs.settle(box.seat, hand.index, Wager.DOUBLE_ATTACK, da, PUSH, "665a.7(o)(1)(iii)")
                        continue
                    collect_original_bet(rs, hand, ORIGINAL_BET_ONLY, "665a.7(o)(1)(ii)(A)")
                    rs.settle(box.seat, hand.index, Wager.DOUBLE_ATTACK, da, PUSH, "665a.7(o)(2)")
                    continue
                p = hand.total
                if p > 21:
                    outcome, result, section = LOSE, "lose", "665a.7(o)(1)(ii)(B) (ruling A1)"
                elif d > 21 or p > d:
                    outcome, result, section = EVEN, "win", "665a.7(o)(1)(i), 665a.12(a)"
                elif p == d:
                    outcome, result, section = PUSH, "push", "665a.7(o)(1)(iii)"
                else:
                    outcome, result, section = LOSE, "lose", "665a.7(o)(1)(ii)(C)"
                rs.settle_hand(hand, outcome, result, section)
                rs.settle(box.seat, hand.index, Wager.DOUBLE_ATTACK, da, outcome, f"665a.7(o)(2), {section}")
