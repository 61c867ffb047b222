"""A whole table played through the core without devices: the dealer, the shuffler and the shoe
as the core would hear of them, and players who follow controller.strategy.

Used by ``tablectl simulate --journal`` (a gaming day through the core, into a journal) and by
the property tests. Pure like the core: randomness is the ``random.Random`` it is given, time is a
number it advances.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.cards import Card
from controller.game_config import GameOptions
from controller.rules.down_under import masque_range
from controller.rules.requests import (
    CardFor,
    CardLaterOffer,
    Decision,
    DoubleAttackOffer,
    InsuranceOffer,
    Offer,
    ReaderUse,
    SecondChanceOffer,
    answer,
)
from controller.rules.round import Round, side_wagers
from controller.rules.state import SeatWagers
from controller.shoe import shuffled_shoe
from controller.strategy import BET, choose, insurance_stake, takes_second_chance
from controller.table import inputs as I
from controller.table.core import DECK_LIFETIME, EXPIRY_WARNING, Step, Table
from controller.table.decisions import offer_input
from controller.table.recorder import JournaledTable

SECONDS_PER_INPUT = 2.0  # virtual time between inputs: a brisk dealer


@dataclass
class VirtualTable:
    options: GameOptions
    rng: random.Random
    seats: int = 1
    on_step: Callable[[Step], None] | None = None
    recorder: JournaledTable | None = None  # journal every step before going on
    table: Table = field(init=False)
    now: float = 1_800_000_000.0
    stack: list[Card] = field(default_factory=list)  # cards in the shoe, next card last
    behind_cover: int = 0
    rounds: int = 0

    def __post_init__(self) -> None:
        self.table = self.recorder.table if self.recorder is not None else Table(self.options)

    # -- feeding the core -------------------------------------------------------------------
    def feed(self, inp: I.Input) -> Step:
        self.now += SECONDS_PER_INPUT
        step = self.recorder.handle(inp, self.now) if self.recorder else self.table.handle(inp, self.now)
        if self.on_step is not None:
            self.on_step(step)
        return step

    def open_table(self) -> None:
        for back in self.table.batches:
            self.feed(I.DecksOpened(back=back, dealer="dealer-1", floorperson="floor-1"))
        self.feed(I.NewDealer(name="dealer-1"))
        first, second = list(self.table.batches)
        self._shuffle(first)
        self._load(first)
        self._shuffle(second)

    def _shuffle(self, back: str) -> None:
        batch = self.table.batches[back]
        self.feed(I.BatchToShuffler(back=back))
        self.feed(I.ShuffleStarted(back=back))
        self.feed(I.ShuffleCompleted(back=back, cards_counted=batch.size))

    def _load(self, back: str) -> None:
        cards = self.options.spec.batch(self.options.decks, back)
        shoe = shuffled_shoe(cards, self.rng)
        self.stack = shoe.cards  # next card last
        self.behind_cover = shoe.behind_cover
        if self.table.cuts_at_shuffler:
            cut_and_cover(self.feed, self.table, back, shoe.behind_cover)
        self.feed(I.BatchToShoe(back=back))

    def next_shoe(self) -> None:
        """673a.3(b)(4): the stored batch goes into the shoe, the used one into the shuffler."""
        used = next(b for b in self.table.batches.values() if b.location.value == "discard").back
        ready = next(b for b in self.table.batches.values() if b.location.value == "shuffler").back
        renewed = self._renew_expiring()  # 673a.3(c): decks changed at least once every 24 hours
        if ready in renewed:
            self._shuffle(ready)
        self._load(ready)
        self._shuffle(used)

    def _renew_expiring(self) -> set[str]:
        renewed = set()
        for batch in self.table.batches.values():
            if batch.opened_at is not None and self.now - batch.opened_at > DECK_LIFETIME - EXPIRY_WARNING:
                self.feed(I.DecksOpened(back=batch.back, dealer="dealer-1", floorperson="floor-1"))
                renewed.add(batch.back)
        return renewed

    def draw(self) -> Step:
        if len(self.stack) == self.behind_cover and not self.table.cover_reached:
            self.feed(I.CoverCardReached(remaining=len(self.stack)))
        return self.feed(I.CardDrawn(card=self.stack.pop()))

    # -- one round ------------------------------------------------------------------------------
    def play_round(self) -> None:
        table = self.table
        if table.shoe_back is None:
            self.next_shoe()
        while table.burns_due:
            self.draw()
        side = side_wagers(self.options, BET)
        wagers = tuple(SeatWagers(s, BET, side=side) for s in range(1, self.seats + 1))
        self.feed(I.RoundOpened(wagers=wagers))
        while table.round is not None:
            self._answer()
        self.rounds += 1

    def _answer(self) -> None:
        rnd = self.table.round
        assert rnd is not None and rnd.request is not None
        answer(rnd.request, self)

    # -- answers to the round's requests (controller.rules.requests.Answerer), fed as the
    # devices and the dealer's keys would feed them
    def _round(self) -> Round:
        rnd = self.table.round
        assert rnd is not None
        return rnd

    def card(self, req: CardFor) -> None:
        self.draw()

    def decision(self, req: Decision) -> None:
        state = self._round().state
        box = next(b for b in state.boxes if b.seat == req.seat)
        self.feed(I.KeyPressed(key=choose(box.hands[req.hand], state.dealer[0], req.legal).value))

    def reader(self, req: ReaderUse) -> None:
        rnd = self._round()
        if req.masque:
            self.feed(I.ReaderReport(light=masque_range(rnd.state.dealer[1])))
        else:
            self.feed(I.ReaderReport(blackjack=rnd.procedure.dealer_blackjack()))

    def offer(self, req: Offer) -> None:
        """Any offer without a hook of its own (even money, early surrender, a game's own): the
        player declines it."""
        self.feed(offer_input(req, False))

    def insurance(self, req: InsuranceOffer) -> None:
        self.feed(I.WagerPlaced(seat=req.seat, amount=insurance_stake(BET)))

    def double_attack(self, req: DoubleAttackOffer) -> None:
        self.feed(I.WagerPlaced(seat=req.seat, amount=BET))

    def second_chance(self, req: SecondChanceOffer) -> None:
        hand = next(b for b in self._round().state.boxes if b.seat == req.seat).hands[req.hand]
        self.feed(I.KeyPressed(key="second_chance" if takes_second_chance(hand) else "next"))

    def card_later(self, req: CardLaterOffer) -> None:
        self.feed(I.KeyPressed(key="hit"))  # the player takes his card after the others (13(g),(h))


def cut_and_cover(feed: Callable[[I.Input], object], table: Table, back: str, cover_from_bottom: int) -> None:
    """673a.5(a)-(d) at a batch shuffler, as the dealer does it: the stack out of the shuffler, the
    cut offered and taken by the first seat offered (the dealer when none is), the cover card
    ``cover_from_bottom`` cards from the bottom. The stack then goes into the shoe (BatchToShoe)."""
    feed(I.StackFromShuffler(back=back))
    cut = table.cut
    assert cut is not None
    feed(I.CutMade(at=table.batches[back].size // 2, by=cut.offer_order[0] if cut.offer_order else 0))
    feed(I.CoverCardPlaced(from_bottom=cover_from_bottom))
