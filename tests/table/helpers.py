"""Small shared helpers for the table core tests: a Table driven the way VirtualTable drives it
(both batches opened, one shuffled and loaded, the other shuffled and stored), a deterministic
stack of the batch in the shoe, a round played by a dealer who stands on everything, and the
check every refusal must pass (its section first, and nothing changed)."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, replace
from typing import Any

import pytest

from controller.cards import Card, parse_card
from controller.errors import RuleViolation
from controller.game_config import default_options
from controller.rules.down_under import masque_range
from controller.rules.requests import (
    CardFor,
    CardLaterOffer,
    Decision,
    Offer,
    ReaderUse,
    answer,
)
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.batches import Place
from controller.table.core import Step, Table
from controller.table.decisions import offer_input
from controller.table.events import DomainEvent, typed
from controller.table.virtual import cut_and_cover

T0 = 1_800_000_000.0
HOUR = 3600.0
BJ = "double-back-jack"
DA = "double-attack"
DU = "down-under"
WILD = "dj-wild"


def assert_journals(event: DomainEvent) -> None:
    """The event as the journal stores it (JSON) reads back as the same typed event, and that
    writes the same payload: nothing the core decides is lost or changed by the journal."""
    stored = json.loads(json.dumps(event.payload))
    assert typed(DomainEvent(event.kind, stored, event.at)).payload() == stored == event.payload


class Rig:
    """A Table, its clock (one second per input) and every event it decided."""

    def __init__(self, game: str = BJ, seed: int = 7, **options: Any) -> None:
        opts = default_options(game)
        if options:
            opts = replace(opts, **options)
        self.options = opts
        self.table = Table(opts)
        self.chapter = opts.spec.chapter
        self.now = T0
        self.events: list[DomainEvent] = []
        self.rng = random.Random(seed)
        self.stack: list[Card] = []  # cards left in the shoe, next card last

    # -- feeding --------------------------------------------------------------------------
    def feed(self, inp: I.Input, at: float | None = None) -> Step:
        self.now = self.now + 1 if at is None else at
        step = self.table.handle(inp, self.now)
        for event in step.events:
            assert_journals(event)
        self.events.extend(step.events)
        return step

    def refuse(self, inp: I.Input, section: str, at: float | None = None) -> RuleViolation:
        """The input is refused with an error naming ``section`` first, and changes nothing."""
        before = copy.deepcopy(self.table.fingerprint())
        when = self.now + 1 if at is None else at
        with pytest.raises(RuleViolation) as info:
            self.table.handle(inp, when)
        assert str(info.value).startswith(section), f"{info.value} does not start with {section}"
        assert self.table.fingerprint() == before, "a refused input changed the table"
        return info.value

    def attempt(self, inp: I.Input, section: str) -> Step | None:
        """Feed ``inp``; when it is refused, check it as ``refuse`` does and return None."""
        before = copy.deepcopy(self.table.fingerprint())
        try:
            return self.feed(inp)
        except RuleViolation as e:
            assert str(e).startswith(section), f"{e} does not start with {section}"
            assert self.table.fingerprint() == before, "a refused input changed the table"
            return None

    def sec(self, sub: str) -> str:
        return f"{self.chapter}.{sub}"

    # -- batches --------------------------------------------------------------------------
    def backs(self) -> list[str]:
        return list(self.table.batches)

    def size(self, back: str = "blue") -> int:
        return self.table.batches[back].size

    def places(self, back: str) -> dict[Place, int]:
        return {p: n for p, n in self.table.batches[back].places.items() if n}

    def open_batches(self, **kw: Any) -> None:
        for back in self.backs():
            if kw.get("preinspected"):
                self.feed(I.DecksOpened(back=back, dealer="dealer-1", preinspected=True))
            else:
                self.feed(I.DecksOpened(back=back, dealer="dealer-1", floorperson="floor-1"))

    def shuffle(self, back: str, counted: int | bool | None = True) -> None:
        """Into the automated shuffler and shuffled; ``counted`` True reports the whole batch."""
        self.feed(I.BatchToShuffler(back=back))
        self.feed(I.ShuffleStarted(back=back))
        count = self.size(back) if counted is True else (None if counted is False else counted)
        self.feed(I.ShuffleCompleted(back=back, cards_counted=count))

    def load(self, back: str) -> Step:
        """Into the shoe: at a batch-shuffler table after the cut and cover card (673a.5(b)-(d))."""
        if self.table.cuts_at_shuffler:
            cut_and_cover(self.feed, self.table, back, -(-self.size(back) // 4) + 5)
        step = self.feed(I.BatchToShoe(back=back))
        self.stack = self.options.spec.batch(self.options.decks, back)
        self.rng.shuffle(self.stack)
        return step

    def next_shoe(self, counted: int | bool | None = True) -> str:
        """673a.3(b)(4): the stored batch into the shoe, the used one into the shuffler."""
        used = self.table.batch_in(Place.DISCARD)[0]
        stored = self.table.batch_in(Place.SHUFFLER)[0]
        self.load(stored)
        self.shuffle(used, counted)
        return stored

    def hand_shuffle_and_cut(
        self, back: str, at: int = 20, by: int = 0, from_bottom: int | None = None
    ) -> None:
        """673a.5(b)-(d): shuffled by hand, cut by ``by`` (refusals first), cover card placed."""
        self.feed(I.HandShuffled(back=back, dealer="dealer-1"))
        cut = self.table.cut
        assert cut is not None
        while cut.offer_order and cut.offer_order[0] != by:
            self.feed(I.CutRefused(seat=cut.offer_order[0]))
        self.feed(I.CutMade(at=at, by=by))
        n = self.size(back)
        self.feed(I.CoverCardPlaced(from_bottom=from_bottom or -(-n // 4)))

    # -- the shoe -------------------------------------------------------------------------
    def take(self, text: str, back: str | None = None) -> Card:
        """A named card of the batch in the shoe, taken out of the stack."""
        back = back or self.table.shoe_back or "blue"
        card = parse_card(text, back)
        if back == self.table.shoe_back and card in self.stack:
            self.stack.remove(card)
        return card

    def draw(self, text: str | None = None, back: str | None = None, **kw: Any) -> Step:
        card = self.stack.pop() if text is None else self.take(text, back)
        return self.feed(I.CardDrawn(card=card, **kw))

    def burn(self, text: str | None = None) -> Step:
        step = self.draw(text)
        assert [e.kind for e in step.events] == ["card_burned"]
        return step

    # -- rounds ---------------------------------------------------------------------------
    def open_round(self, seats: tuple[int, ...] = (1,), bet: int = 10) -> Step:
        side = {
            "bust_it": bet if self.options.bust_it else 0,
            "match_the_dealer": bet if self.options.match_the_dealer else 0,
        }
        return self.feed(I.RoundOpened(wagers=tuple(SeatWagers(seat=s, bet=bet, **side) for s in seats)))

    def answer(self, cards: list[str] | None = None) -> Step:
        """Answer what the round asks: a card (named, or the next of the stack), stand, decline."""
        rnd = self.table.round
        assert rnd is not None and rnd.request is not None
        return answer(rnd.request, _Plainly(self, cards))

    def finish_round(self, cards: list[str] | None = None) -> None:
        guard = 0
        while self.table.round is not None:
            self.answer(cards)
            guard += 1
            assert guard < 200
        assert not self.table.halted

    def play_round(self, seats: tuple[int, ...] = (1,), cards: list[str] | None = None) -> None:
        while self.table.burns_due:
            self.draw()
        self.open_round(seats)
        self.finish_round(cards)

    def offered(self) -> list[int]:
        """The seats the cut is still to be offered to, in order (the dealer cuts when none is left)."""
        cut = self.table.cut
        assert cut is not None, "no cut is being offered"
        return list(cut.offer_order)

    def kinds(self, step: Step | None = None) -> list[str]:
        return [e.kind for e in (step.events if step is not None else self.events)]

    def conserved(self) -> bool:
        return all(b.conserved() for b in self.table.batches.values())


def ready(game: str = BJ, counted: int | bool | None = True, **options: Any) -> Rig:
    """VirtualTable.open_table: both batches opened, a new dealer, the first batch shuffled and in
    the shoe, the second shuffled and stored in the shuffler. The burn card is still due."""
    rig = Rig(game, **options)
    rig.open_batches()
    rig.feed(I.NewDealer(name="dealer-1"))
    first, second = rig.backs()
    rig.shuffle(first, counted)
    rig.load(first)
    rig.shuffle(second, counted)
    return rig


def manual(decks: int = 1, **options: Any) -> Rig:
    """A Double Back Jack table configured without an automated shuffler, both batches opened."""
    rig = Rig(BJ, decks=decks, automated_shuffler=False, **options)
    rig.open_batches()
    rig.feed(I.NewDealer(name="dealer-1"))
    return rig


@dataclass
class _Plainly:
    """The plainest answers (controller.rules.requests.Answerer): the card named or the next of
    the stack, stand, decline every offer, the reader telling the truth."""

    rig: Rig
    cards: list[str] | None

    def card(self, req: CardFor) -> Step:
        return self.rig.draw(self.cards.pop(0) if self.cards else None)

    def decision(self, req: Decision) -> Step:
        return self.rig.feed(I.KeyPressed(key="stand"))

    def reader(self, req: ReaderUse) -> Step:
        rnd = self.rig.table.round
        assert rnd is not None
        if req.masque:
            return self.rig.feed(I.ReaderReport(light=masque_range(rnd.state.dealer[1])))
        return self.rig.feed(I.ReaderReport(blackjack=rnd.procedure.dealer_blackjack()))

    def offer(self, req: Offer) -> Step:
        return self.rig.feed(offer_input(req, False))

    def card_later(self, req: CardLaterOffer) -> Step:
        return self.rig.feed(I.KeyPressed(key="hit"))
