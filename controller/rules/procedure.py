"""What the three blackjack procedures share: dealing, offers, the players' turns, the dealer's draw.

Each game module writes its procedure in the order of its chapter's dealing section and calls
these steps; its decisions are refused by the shared ladder (:mod:`controller.rules.blackjack_ladder`)
with the sections it names. A step is a generator (``yield from step(...)``) because it may need
cards or decisions from outside.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, ClassVar

from controller.errors import RuleViolation
from controller.rules.blackjack_ladder import Ladder, Refusal
from controller.rules.hand import Hand, is_blackjack, total
from controller.rules.requests import (
    DEALER,
    Action,
    CardFor,
    CardLaterOffer,
    CardMissed,
    Decision,
    DoubleFor,
    InsuranceOffer,
    Request,
)
from controller.rules.state import Box, RoundState
from controller.rules.wagers import PUSH, Wager

Procedure = Generator[Request, Any, None]
# The purpose of a card the dealer missed, dealt after the others (673a.13(g),(h)).
LATER = "later"
__all__ = ["LATER", "BlackjackProcedure", "Procedure", "Refusal"]

ALL_ACTIONS = tuple(Action)


class BlackjackProcedure:
    """Base of the per-game procedures. Subclasses name their sections and differences."""

    chapter: str = ""
    dealer_limit: int = 21  # 685a.3(d)(3) raises it to 22 for the Down Under dealer
    insurance_section: str = ""  # the chapter's Insurance section, e.g. "673a.8"
    ladder: ClassVar[Ladder]  # the chapter's sections of hit, double, split and surrender

    def __init__(self, state: RoundState) -> None:
        self.rs = state
        self.rulings = state.options.rulings

    # -- the whole round -------------------------------------------------------------------
    def run(self) -> Procedure:
        raise NotImplementedError

    # -- dealing ---------------------------------------------------------------------------
    def deal_to_boxes(self) -> Procedure:
        """One card face up to each box, farthest to the dealer's left first (…7(e)(1)). A second
        card the dealer missed and the player takes later comes after all other players have
        received their second card (673a.13(g), 665a.13(f), 685a.12(f)), before the dealer's."""
        later: list[Box] = []
        for box in self.rs.boxes:
            if box.dead:
                continue
            card = yield CardFor(box.seat, 0)
            if type(card) is CardMissed:
                if (yield from self.missed(box, box.first, card)):
                    later.append(box)
            elif card is not None:  # None: the box was called dead instead (Round.call_dead)
                box.hands[0].add(card)
        for box in later:
            if not box.dead:
                card = yield CardFor(box.seat, 0, purpose=LATER)
                if card is not None:
                    box.hands[0].add(self.not_missed(card))

    def missed(self, box: Box, hand: Hand, missed: CardMissed) -> Generator[Request, Any, bool]:
        """The dealer did not deal ``hand`` its card: the player's option (673a.13(g),(h),
        665a.13(f),(g), 685a.12(f),(g)). True: he takes it after the others; False: the hand is
        dead and its wagers come back (ruling G8)."""
        if (yield CardLaterOffer(box.seat, hand.index, missed.section)):
            return True
        self.call_dead(box, missed.section)
        return False

    @staticmethod
    def not_missed(card: Any) -> Any:
        """A card put off once is dealt when its turn comes; it is not put off again (the table
        core refuses that before it reaches here)."""
        if type(card) is CardMissed:
            raise RuleViolation(card.section, "the card put off is dealt now, after the others")
        return card

    def deal_to_dealer(self, *, face_up: bool) -> Procedure:
        self.rs.dealer.append((yield CardFor(DEALER, 0, face_up=face_up)))

    # -- insurance -------------------------------------------------------------------------
    def insurance_maximum(self, bet: int) -> int:
        """Half the initial wager, or up to the next chip unit when half cannot be bet (…8(b))."""
        unit = self.rulings.min_chip
        half_units = -(-bet // (2 * unit)) if bet % (2 * unit) else bet // (2 * unit)
        return half_units * unit

    def offer_insurance(self, boxes: list[Box]) -> Procedure:
        for box in boxes:
            amount = yield InsuranceOffer(box.seat, self.insurance_maximum(box.bet))
            amount = int(amount or 0)
            if amount < 0:
                raise RuleViolation(f"{self.insurance_section}(b)", "an Insurance Wager cannot be negative")
            if amount > self.insurance_maximum(box.bet):
                raise RuleViolation(
                    f"{self.insurance_section}(b)",
                    f"seat {box.seat}: insurance of {amount} is more than half the bet of {box.bet}",
                )
            box.insurance = amount

    def settle_insurance(self, dealer_blackjack: bool, win_halves: int, payout_section: str) -> None:
        for box in self.rs.boxes:
            if dealer_blackjack:
                self.rs.settle(box.seat, None, Wager.INSURANCE, box.insurance, win_halves, payout_section)
            else:
                self.rs.settle(
                    box.seat, None, Wager.INSURANCE, box.insurance, -2, f"{self.insurance_section}(d)"
                )

    # -- the players' turns ----------------------------------------------------------------
    def check(self, action: Action, hand: Hand, box: Box) -> Refusal | None:
        """The (section, reason) refusing ``action`` on ``hand`` now, or None when it is allowed."""
        return self.ladder.check(action, hand, box)

    def refusal(self, action: Action, hand: Hand, box: Box) -> RuleViolation | None:
        why = self.check(action, hand, box)
        return None if why is None else RuleViolation(*why)

    def legal_actions(self, hand: Hand, box: Box) -> frozenset[Action]:
        check = self.ladder.check
        return frozenset([a for a in ALL_ACTIONS if check(a, hand, box) is None])

    def double_maximum(self, box: Box) -> int:
        return box.bet

    def double_amount(self, amount: int | None, box: Box) -> int:
        """The chips of a double: the limit when no amount is given, else ``amount`` checked: one
        chip or more, whole chips of the table's unit (ruling G3), not more than the limit ("may
        not exceed", so a double for less is the player's right)."""
        limit, unit = self.double_maximum(box), self.rulings.min_chip
        if amount is None:
            return limit
        section = self.ladder.double_section
        if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
            raise RuleViolation(section, f"seat {box.seat}: a double is for one chip or more")
        if amount % unit:
            raise RuleViolation(section, f"seat {box.seat}: a double is made in chips of {unit}")
        if amount > limit:
            raise RuleViolation(
                section, f"seat {box.seat}: a double of {amount} is more than the {limit} allowed"
            )
        return amount

    def play_boxes(self) -> Procedure:
        """Each box in turn, farthest to the dealer's left first (…7(i)); then the cards the
        dealer missed and the players take later (:meth:`deal_later`)."""
        for box in self.rs.boxes:
            yield from self.play_box(box)
        yield from self.deal_later()

    def play_box(self, box: Box, start: int = 0) -> Procedure:
        """The box's hands from hand ``start`` on; a hand whose card is put off waits (its
        ``later``) and the next hand plays."""
        i = start
        while i < len(box.hands) and not box.dead:
            hand = box.hands[i]
            if len(hand.cards) == 1 and hand.later is None:  # a hand formed by a split: its second card
                card = yield CardFor(box.seat, hand.index, purpose="split")
                if type(card) is CardMissed:
                    if not (yield from self.missed(box, hand, card)):
                        return
                    hand.later = "split"
                    i += 1
                    continue
                if card is None:  # called dead instead
                    return
                hand.add(card)
                self.after_split_card(hand)
            while not hand.done and not box.dead and hand.later is None:
                legal = self.legal_actions(hand, box)
                if len(legal) == 1:  # only STAND is ever always allowed
                    hand.done = True  # nothing to decide (21, split aces, after a double)
                    break
                answer = yield Decision(box.seat, hand.index, legal)
                yield from self.apply(answer, hand, box)
            i += 1

    def deal_later(self) -> Procedure:
        """673a.13(h), 665a.13(g), 685a.12(g): each card the dealer missed and the player takes
        later, after all other players have received their additional cards and before the hole
        card is turned; the hand then plays on (a card put off again waits its turn again)."""
        while True:
            waiting = [(b, h) for b in self.rs.boxes if not b.dead for h in b.hands if h.later is not None]
            if not waiting:
                return
            for box, hand in waiting:
                purpose, hand.later = hand.later, None
                if box.dead:
                    continue
                card = yield CardFor(box.seat, hand.index, purpose=LATER)
                if card is None:  # called dead instead
                    continue
                hand.add(self.not_missed(card))
                if purpose == "split":
                    self.after_split_card(hand)
                else:
                    yield from self.after_draw(hand, box)
                yield from self.play_box(box, hand.index)

    def apply(self, answer: Action | DoubleFor, hand: Hand, box: Box) -> Procedure:
        if isinstance(answer, DoubleFor):
            action, amount = Action.DOUBLE, answer.amount
        else:
            action, amount = (answer if type(answer) is Action else Action(answer)), None
        why = self.refusal(action, hand, box)
        if why is not None:
            raise why
        if action is Action.STAND:
            hand.done = hand.stood = True
        elif action is Action.HIT:
            hand.acted = True
            card = yield CardFor(box.seat, hand.index)
            if type(card) is CardMissed:  # 673a.13(h): the card later, or the hand dead
                if (yield from self.missed(box, hand, card)):
                    hand.later = "hit"
                return
            if card is None:  # the card was not dealt and the hand called dead (673a.13(h))
                return
            hand.add(card)
            yield from self.after_draw(hand, box)
        elif action is Action.DOUBLE:
            hand.double_down = self.double_amount(amount, box)  # checked before the hand changes
            hand.acted = True
            hand.doubled = True
            card = yield CardFor(box.seat, hand.index, purpose="double")
            if type(card) is CardMissed:
                if (yield from self.missed(box, hand, card)):
                    hand.later = "double"
                return
            if card is None:
                return
            hand.add(card)
            yield from self.after_draw(hand, box)
        elif action is Action.SPLIT:
            self.split(hand, box)
            card = yield CardFor(box.seat, hand.index, purpose="split")
            if type(card) is CardMissed:
                if (yield from self.missed(box, hand, card)):
                    hand.later = "split"
                return
            if card is None:
                return
            hand.add(card)
            self.after_split_card(hand)
        elif action is Action.SURRENDER:
            hand.acted = True
            self.surrender(hand, box)

    def split(self, hand: Hand, box: Box) -> None:
        moved = hand.take_last()
        new = Hand(
            seat=box.seat,
            index=hand.index + 1,
            cards=[moved],
            bet=self.split_wager(box),
            from_split=True,
            split_aces=moved.is_ace,
        )
        hand.from_split = True
        hand.split_aces = moved.is_ace
        hand.acted = False
        box.hands.insert(hand.index + 1, new)
        for index, h in enumerate(box.hands):
            h.index = index

    def split_wager(self, box: Box) -> int:
        return box.bet

    def after_split_card(self, hand: Hand) -> None:
        """A split hand has its second card: closed at 21 or as a split ace, as the ladder says."""
        if self.ladder.closes_after_split_card(hand):
            hand.done = True

    def after_draw(self, hand: Hand, box: Box) -> Procedure:
        """A card was drawn to the hand (hit or double): closed as the ladder says."""
        if self.ladder.closes_after_draw(hand):
            hand.done = True
        yield from ()  # a generator, so games that need more cards (Second Chance) can draw

    def surrender(self, hand: Hand, box: Box) -> None:
        """Settle a surrender the ladder allowed (each chapter collects its own share)."""
        never = self.ladder.no_surrender
        if never is not None:  # pragma: no cover - the ladder refuses it before it gets here
            raise RuleViolation(*never)
        raise NotImplementedError

    # -- a hand called dead ----------------------------------------------------------------
    def call_dead(self, box: Box, section: str) -> None:
        """The box's hands are dead (673a.13(g),(h), 665a.13(f),(g), 685a.12(f)-(h)): whatever is
        still on the layout for them comes back (ruling G8). A box that got no card is not in this
        round at all, so its side wagers come back too; otherwise a Bust It wager, decided by the
        dealer's cards alone, stays for 665a.7(m)."""
        rs = self.rs
        for hand in box.hands:
            if hand.settled:
                continue
            rs.settle(box.seat, hand.index, Wager.SECOND_CHANCE, hand.second_chance, PUSH, section)
            rs.settle(box.seat, hand.index, Wager.DOUBLE_ATTACK, hand.double_attack, PUSH, section)
            rs.settle_hand(hand, PUSH, "dead", section)
        if not box.first.cards:
            for kind, stake in box.side.items():
                if kind == Wager.BUST_IT and box.bust_it_settled:
                    continue
                rs.settle(box.seat, None, Wager(kind), stake, PUSH, section)
            box.bust_it_settled = True
        box.dead = True

    # -- the dealer ------------------------------------------------------------------------
    def dealer_total(self) -> int:
        return total(self.rs.dealer, self.dealer_limit)[0]

    def dealer_draws(self, stand_on: int = 17) -> Procedure:
        """Draw until a hard or soft total of 17 or more: stands on all 17s (…7(o)/(n)/(m))."""
        self.rs.dealer_played = True
        while self.dealer_total() < stand_on:
            yield from self.deal_to_dealer(face_up=True)

    def dealer_blackjack(self) -> bool:
        return is_blackjack(self.rs.dealer[:2])
