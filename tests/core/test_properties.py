"""Property tests over random sequences of legal and illegal inputs (issue 3, "Done when").

Each step hypothesis picks one input from a menu of what a table could plausibly be told next
(the next card of a physically shuffled stack, a key, a reader answer, a floor action...) mixed
with junk (unknown batches, wrong seats, foreign cards, bogus keys). After every step:

- a refused input raised RuleViolation naming a section and changed nothing;
- card conservation: every card of each batch is in exactly one place;
- with a working shuffler, never a round with two batches in the discard rack (673a.3(b)(5));
- the batches alternate shoe by shoe with a working shuffler (673a.3(b)(4));
- no public event carries a secret field;
and at the end, replaying the events gives the live table exactly.
"""

from __future__ import annotations

import random
import re
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.cards import Card, parse_card
from controller.errors import RuleViolation
from controller.game_config import default_options
from controller.games import blackjack_games
from controller.rules.down_under import masque_range
from controller.rules.requests import MasqueRange, ReaderUse, WagerOffer
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.batches import Place
from controller.table.core import Table
from controller.table.events import REVEALING_KINDS, SECRET_FIELDS, Classification, DomainEvent

SECTION = re.compile(r"^(6[6-8][0-9]a\.[0-9]+|input|alarm|round)")
KEYS = ["hit", "stand", "double", "split", "surrender", "second_chance", "insurance_closed", "next", "bogus"]


class Dealer:
    """The physical side: the stack in the shoe, shuffled for real when a batch is loaded."""

    def __init__(self, table: Table, rng: random.Random) -> None:
        self.table = table
        self.rng = rng
        self.stack: list[Card] = []
        self.loaded: str | None = None
        # The menu's inputs that never depend on the table's state, made once (inputs are frozen).
        seats = (SeatWagers(1, 10), SeatWagers(2, 10))
        self.keys = [I.KeyPressed(key=k) for k in KEYS for _ in range(2)]
        self.keys += [I.WagerPlaced(seat=s, amount=a) for s in (1, 2, 7) for a in (0, 5, 50)]
        self.fixed: list[I.Input] = [
            I.RoundOpened(wagers=seats),
            I.RoundOpened(wagers=seats[:1]),
            I.RoundOpened(wagers=(SeatWagers(9, 10),)),
            I.CoverCardReached(),
            I.ReaderReport(blackjack=True, light=MasqueRange.LARGE),
            I.ReaderFailed(code=1),
            I.ReaderReplaced(by="tech"),
            I.NewDealer(name="d2"),
            I.ReshuffleOrdered(by="floor"),
            I.NoGamingActivity(by="floor"),
            I.ShufflerOutOfOrder(by="floor"),
            I.ShufflerRestored(by="floor"),
            I.CutRefused(seat=2),
            I.CutMade(at=30, by=0),
            I.CutMade(at=3, by=2),
        ]
        self.tail: list[I.Input] = [I.RecutOrdered(by="floor"), I.Tick()]
        self.tail += [I.AlarmAcknowledged(alarm=a, by="floor") for a in range(1, 4)]
        self.per_back: dict[tuple[str, int], list[I.Input]] = {}

    def sync(self) -> None:
        back = self.table.shoe_back
        if back != self.loaded:
            self.loaded = back
            self.stack = []
            if back is not None:
                self.stack = self.table.options.spec.batch(self.table.options.decks, back)
                self.rng.shuffle(self.stack)

    def next_legal(self) -> I.Input | None:
        """What a dealer following the procedure would do next (None when nothing obvious)."""
        table = self.table
        batches = list(table.batches.values())
        for alarm in table.halted:
            if table.reader_failed:
                return I.ReaderReplaced(by="tech")
            return I.AlarmAcknowledged(alarm=alarm.id, by="floor")
        for b in batches:
            expiring = b.opened_at is None or table.now - b.opened_at > 23 * 3600
            if expiring and table.shoe_back != b.back:
                return I.DecksOpened(back=b.back, dealer="d1", floorperson="f1")
        if table.manual:
            return self._next_manual()
        in_shuffler = [b for b in batches if b.location is Place.SHUFFLER]
        idle = [b for b in batches if b.location in (Place.NEW, Place.DISCARD) and b.back != table.shoe_back]
        if in_shuffler and in_shuffler[0].shuffler.value in ("unshuffled", "jammed"):
            return I.ShuffleStarted(back=in_shuffler[0].back)
        if in_shuffler and in_shuffler[0].shuffler.value == "shuffling":
            return I.ShuffleCompleted(back=in_shuffler[0].back, cards_counted=in_shuffler[0].size)
        if table.shoe_back is None:
            if in_shuffler and in_shuffler[0].shuffler.value == "ready":
                if table.cuts_at_shuffler and table.cut is None:  # 673a.5(a),(b): out to be cut
                    return I.StackFromShuffler(back=in_shuffler[0].back)
                if table.cuts_at_shuffler:
                    return self._next_manual()
                return I.BatchToShoe(back=in_shuffler[0].back)
            if idle and not in_shuffler:
                pick = [b for b in idle if b.back != table.last_shoe_back] or idle
                return I.BatchToShuffler(back=pick[0].back)
            return None
        if idle and not in_shuffler:
            return I.BatchToShuffler(back=idle[0].back)
        return self._next_in_play()

    def _next_manual(self) -> I.Input | None:
        table = self.table
        if table.shoe_back is not None:
            return self._next_in_play()
        cut = table.cut
        if cut is None:
            off = [b for b in table.batches.values() if b.location in (Place.NEW, Place.DISCARD)]
            return I.HandShuffled(back=off[0].back, dealer="d1") if off else None
        if cut.cut_at is None:
            return I.CutMade(at=20, by=cut.offer_order[0] if cut.offer_order else 0)
        if cut.cover_from_bottom is None:
            return I.CoverCardPlaced(from_bottom=table.batches[cut.back].size // 3)
        return I.BatchToShoe(back=cut.back)

    def _next_in_play(self) -> I.Input | None:
        table = self.table
        if not self.stack:
            return I.ReshuffleOrdered(by="floor")
        if table.burns_due:
            return I.CardDrawn(card=self.stack[-1])
        rnd = table.round
        if rnd is None:
            if table.reshuffle_due:
                return I.ReshuffleOrdered(by="floor")
            return I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10)))
        req = rnd.request
        if req is None:
            return None
        name = type(req).__name__
        if name == "CardFor":
            return I.CardDrawn(card=self.stack[-1])
        if name == "Decision":
            return I.KeyPressed(key=self.rng.choice(sorted(req.legal)).value)  # type: ignore[attr-defined]
        if isinstance(req, WagerOffer):  # insurance, Double Attack, any registered wager offer
            return I.WagerPlaced(seat=req.seat, amount=self.rng.choice([0, 5]))
        if name == "ReaderUse":
            hole = rnd.state.dealer[1]
            return I.ReaderReport(light=masque_range(hole), blackjack=rnd.procedure.dealer_blackjack())
        return I.KeyPressed(key=self.rng.choice(["next", "second_chance", "surrender"]))

    def menu(self, t: float) -> list[I.Input]:
        table = self.table
        backs = list(table.batches)
        other = {backs[0]: backs[1], backs[1]: backs[0]}
        items: list[I.Input] = []
        for back in [*backs, "green"]:
            size = table.batches[back].size if back in table.batches else 52
            if (back, size) not in self.per_back:
                self.per_back[back, size] = [
                    I.DecksOpened(back=back, dealer="d1", floorperson="f1"),
                    I.BatchToShuffler(back=back),
                    I.ShuffleStarted(back=back),
                    I.ShuffleCompleted(back=back, cards_counted=size),
                    I.StackFromShuffler(back=back),
                    I.BatchToShoe(back=back),
                    I.HandShuffled(back=back, dealer="d1"),
                ]
            items += self.per_back[back, size]
        items += [I.ShuffleFailed(back=backs[0], reason="jam"), I.DecksOpened(back=backs[1], dealer="d1")]
        if self.stack:
            items += [I.CardDrawn(card=self.stack[-1])] * 12  # mostly, deal the next card
            items += [I.CardDrawn(card=self.stack[-1], face_up_in_shoe=True)]
            items += [I.CardDrawn(card=self.stack[-1].with_back(other[self.stack[-1].back or backs[0]]))]
        rnd = table.round
        truth: list[I.Input] = []
        if rnd is not None and isinstance(rnd.request, ReaderUse):
            hole = rnd.state.dealer[1]
            truth = [I.ReaderReport(light=masque_range(hole), blackjack=rnd.procedure.dealer_blackjack())] * 6
        items += truth
        items += self.keys
        items += self.fixed
        items += [I.CoverCardPlaced(from_bottom=table.batches[backs[0]].size // 3)]
        items += self.tail
        legal = self.next_legal()
        if legal is not None:
            items += [legal] * (4 * len(items))  # four in five steps follow the procedure
        return items

    def after(self, inp: I.Input, accepted: bool) -> None:
        if accepted and isinstance(inp, I.CardDrawn) and self.stack and inp.card is self.stack[-1]:
            self.stack.pop()
        self.sync()


def check_invariants(table: Table, events: list[DomainEvent], shoes: list[str]) -> None:
    for batch in table.batches.values():
        assert batch.conserved(), f"{batch.back}: {dict(batch.places)} != {batch.size}"
    if not table.manual and table.round is not None:
        in_rack = [b.back for b in table.batches.values() if b.location is Place.DISCARD]
        assert len(in_rack) <= 1 or table.shoe_back in in_rack
    if not table.manual:
        for a, b in pairwise(shoes):
            assert a != b, f"batches did not alternate: {shoes}"
    for event in events:
        if event.classification is Classification.PUBLIC and event.kind not in REVEALING_KINDS:
            leaked = SECRET_FIELDS & set(event.payload)
            assert not leaked, f"public {event.kind} carries {leaked}"


@pytest.mark.slow
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    game=st.sampled_from(blackjack_games()),
    seed=st.integers(0, 2**32 - 1),
    picks=st.lists(st.integers(0, 10_000), min_size=300, max_size=900),
)
def test_random_sequences_hold_the_invariants(game: str, seed: int, picks: list[int]) -> None:
    table = Table(default_options(game))
    dealer = Dealer(table, random.Random(seed))
    events: list[DomainEvent] = []
    shoes: list[str] = []
    t = 1_800_000_000.0
    for pick in picks:
        t += 7.0
        menu = dealer.menu(t)
        inp = menu[pick % len(menu)]
        before = table.fingerprint()
        try:
            step = table.handle(inp, t)
        except RuleViolation as refused:
            assert SECTION.match(str(refused)), str(refused)
            assert "\n" not in str(refused)
            assert table.fingerprint() == before, f"refused {inp!r} changed the table"
            dealer.after(inp, accepted=False)
            continue
        events.extend(step.events)
        if table.manual:
            shoes = []  # 673a.3(b) governs tables with a working shuffler; start over after manual play
        shoes += [e.payload["back"] for e in step.events if e.kind == "batch_to_shoe" and not table.manual]
        dealer.after(inp, accepted=True)
        check_invariants(table, step.events, shoes)
    replayed = Table.replay(default_options(game), events)
    assert replayed.fingerprint() == table.fingerprint()


def events_into(events: list[DomainEvent]) -> Any:
    return lambda step: events.extend(step.events)


def test_a_long_legal_game_day_replays_exactly() -> None:
    """Replay of a whole shoe-after-shoe day through the virtual table equals the live state."""
    from controller.table.virtual import VirtualTable

    for game in blackjack_games():
        events: list[DomainEvent] = []
        vt = VirtualTable(default_options(game), random.Random(5), seats=3, on_step=events_into(events))
        vt.open_table()
        for _ in range(400):
            vt.play_round()
        assert not vt.table.alarms
        assert Table.replay(default_options(game), events).fingerprint() == vt.table.fingerprint()
        shoes = [e.payload["back"] for e in events if e.kind == "batch_to_shoe"]
        assert len(shoes) > 5 and all(a != b for a, b in pairwise(shoes))


def test_parse_card_is_used_for_foreign_backs() -> None:
    assert parse_card("KS", "blue").with_back("red").back == "red"
