"""Down Under Blackjack, 58 Pa. Code Chapter 685a.

What sets it apart: the dealer's ace counts 11 up to 22 (685a.3(d)(3)) and the dealer draws to
17-22 (685a.7(m)); the Masque reader lights the hole card's range every round and the hole card is
shown when both dealer cards are Large (685a.7(h)); no surrender (685a.7(i)(2)); Blackjack pays 3
to 2 (685a.11(a)); a dealer 22 pays 21s and two original Large cards and returns the rest
(685a.7(n)(1)); the Match-the-Dealer wager (685a.7(f), 685a.11(c)).
"""

from __future__ import annotations

from controller.cards import Card
from controller.rules.blackjack_ladder import (
    AtThePeek,
    Ladder,
    OriginalBetOnly,
    collect_original_bet,
    settle_at_the_peek,
)
from controller.rules.hand import Hand, total
from controller.rules.procedure import BlackjackProcedure, Procedure
from controller.rules.requests import EvenMoneyOffer, MasqueRange, ReaderUse
from controller.rules.wagers import EVEN, LOSE, PUSH, Wager, odds

BLACKJACK_PAYS = odds(3, 2)  # 685a.11(a)
INSURANCE_PAYS = odds(2)  # 685a.11(b)
MATCH_PAYS = {  # 685a.11(c): decks -> (suited, unsuited)
    6: (odds(11), odds(4)),
    8: (odds(14), odds(3)),
}

LADDER = Ladder(
    no_draw_on_21=("685a.7(k)(1)", "a hand totalling 21 or more may not draw"),
    one_card_after_double=("685a.7(k)(2)", "after a Double Down Wager only one card is drawn"),
    one_card_to_split_aces=("685a.10(e)", "each split ace receives only one card"),
    double_limit=("685a.9(a)", "a Double Down Wager is made on the first two cards only"),
    split_pair=("685a.10(a)", "only first two cards identical in value may be split"),
    max_hands=2,
    too_many_hands=("685a.10(c)", "pairs may be split only once, for two hands"),
    hands_before_pair=True,
    no_surrender=("685a.7(i)(2)", "players may not surrender in Down Under Blackjack"),
)
# 685a.7(h): a dealer Blackjack shown at the reader pushes a Blackjack and collects the rest.
AT_THE_PEEK = AtThePeek(collected="685a.7(h)(2)", blackjack_pushes="685a.7(h)(1)")
# 685a.9(b), 685a.10(d): found only after the decisions, only the initial Bet is collected.
ORIGINAL_BET_ONLY = OriginalBetOnly(split_wager_returned="685a.10(d)", double_down_returned="685a.9(b)")


def masque_range(c: Card) -> MasqueRange:
    """685a.3(e), 685a.1: Small 2-5, Medium 6-9, Large 10-A."""
    if c.is_ace or c.is_ten_value:
        return MasqueRange.LARGE
    return MasqueRange.MEDIUM if c.points >= 6 else MasqueRange.SMALL


def is_large(c: Card) -> bool:
    return c.is_ace or c.is_ten_value


def match_the_dealer(up: Card, two: list[Card], decks: int, both: str) -> tuple[int, str] | None:
    """685a.7(f), 685a.11(c): the win in half-stakes and its line, or None for a loss.

    A card matches the up card of identical rank (ruling U2: a 10-value card only matches its own
    rank). Both matching: paid once at the better line (U1 "best") or for each card ("each").
    """
    suited_pays, unsuited_pays = MATCH_PAYS[decks]
    wins = [
        (suited_pays, "suited match") if c.suit == up.suit else (unsuited_pays, "unsuited match")
        for c in two
        if c.rank == up.rank
    ]
    if not wins:
        return None
    if both == "each":
        return sum(w for w, _ in wins), " + ".join(line for _, line in wins)
    return max(wins)


class DownUnder(BlackjackProcedure):
    chapter = "685a"
    insurance_section = "685a.8"
    ladder = LADDER
    dealer_limit = 22  # 685a.3(d)(3)

    def run(self) -> Procedure:
        rs = self.rs
        # 685a.7(e): a card to each box, the up card, a second card to each box, the hole card.
        yield from self.deal_to_boxes()
        yield from self.deal_to_dealer(face_up=True)
        yield from self.deal_to_boxes()
        yield from self.deal_to_dealer(face_up=False)
        up = rs.dealer[0]

        # 685a.7(f): Match-the-Dealer, settled before the reader, dealer's right first.
        for box in reversed(rs.boxes):
            stake = box.stake(Wager.MATCH_THE_DEALER)
            if stake and not box.dead:
                win = match_the_dealer(
                    up, box.first.cards, rs.options.decks, self.rulings.match_the_dealer_pays
                )
                if win is None:
                    rs.settle(box.seat, None, Wager.MATCH_THE_DEALER, stake, LOSE, "685a.7(f)")
                else:
                    rs.settle(
                        box.seat,
                        None,
                        Wager.MATCH_THE_DEALER,
                        stake,
                        win[0],
                        f"685a.7(f), 685a.11(c) {win[1]} (ruling U1)",
                    )

        # 685a.7(g): even money (ruling U6) and insurance when the up card is an ace.
        if up.is_ace:
            for box in rs.boxes:
                if box.first.blackjack and (yield EvenMoneyOffer(box.seat)):
                    rs.settle_hand(box.first, EVEN, "win", "685a.7(g) even money (ruling U6)")
            yield from self.offer_insurance([b for b in rs.boxes if not b.first.settled])

        # 685a.7(h): the Masque reader every round; both cards Large shows the hole card.
        report = yield ReaderUse(masque=True)
        light = MasqueRange(report) if report is not None else masque_range(rs.dealer[1])
        rs.reader_report = light
        rs.reader_agrees = light is masque_range(rs.dealer[1])
        rs.hole_exposed = is_large(up) and light is MasqueRange.LARGE
        dealer_bj = rs.hole_exposed and self.dealer_blackjack()
        if up.is_ace:
            # 685a.8(a): insurance wins on a 10-value hole card, even behind a wrong light.
            self.settle_insurance(self.dealer_blackjack(), INSURANCE_PAYS, "685a.8(a), 685a.11(b)")
        if dealer_bj:
            settle_at_the_peek(rs, AT_THE_PEEK)
            return

        # 685a.7(i)(1): a player Blackjack is paid 3 to 2 at once.
        for box in rs.boxes:
            if box.first.blackjack and not box.first.settled:
                rs.settle_hand(box.first, BLACKJACK_PAYS, "blackjack", "685a.7(i)(1), 685a.11(a)")
        yield from self.play_boxes()

        # 685a.7(l),(m): the hole card is turned and the dealer draws to 17-22 (ruling U7).
        rs.hole_turned = True
        yield from self.dealer_draws()
        self.settle_remaining()

    def dealer_total(self) -> int:
        cards = self.rs.dealer
        if self.rulings.dealer_ace_ace == 22 and len(cards) == 2 and cards[0].is_ace and cards[1].is_ace:
            return 22  # 685a.3(d)(3), ruling U3: 11 + 11 does not exceed 22
        return total(cards, 22)[0]

    # -- the end of the round --------------------------------------------------------------
    def two_original_large(self, hand: Hand) -> bool:
        """685a.7(n)(1) "exactly two original Large value range cards" (ruling U4)."""
        if hand.from_split:
            return False
        if self.rulings.large_pair_rule == "two_card_hand" and len(hand.cards) != 2:
            return False
        return is_large(hand.cards[0]) and is_large(hand.cards[1])

    def settle_remaining(self) -> None:
        """685a.7(n)-(q), dealer's right first."""
        rs = self.rs
        d = self.dealer_total()
        dealer_bj = self.dealer_blackjack()  # only when the reader's light was wrong
        rs.start_final_settlement()
        for box in reversed(rs.boxes):
            for hand in reversed(box.hands):
                if hand.settled:
                    continue
                p = hand.total
                if dealer_bj:
                    collect_original_bet(rs, hand, ORIGINAL_BET_ONLY, "685a.7(q)(2)")
                elif p > 21 and not (d == 22 and self.rulings.dealer_22_returns_busted):
                    rs.settle_hand(hand, LOSE, "lose", "685a.7(q)(1) (ruling U5)")
                elif d == 22:
                    if p == 21 or self.two_original_large(hand):
                        rs.settle_hand(hand, EVEN, "win", "685a.7(n)(1), 685a.11(a) (ruling U4)")
                    else:
                        rs.settle_hand(hand, PUSH, "push", "685a.7(n)(1)")
                elif d > 22 or p > d:
                    rs.settle_hand(hand, EVEN, "win", "685a.7(o), 685a.11(a)")
                elif p == d:
                    rs.settle_hand(hand, PUSH, "push", "685a.7(p)")
                else:
                    rs.settle_hand(hand, LOSE, "lose", "685a.7(q)(2)")
