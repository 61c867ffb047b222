"""Thousands of random rounds of each blackjack game, summed up in one hash per game.

Each round has random boxes and wagers, a shuffled batch or a stack rich in pairs, aces and
10-values, and random answers to every request: every action at every decision (legal or not,
doubles for any amount), insurance and Double Attack amounts in and out of bounds, wrong reader
reports, cards the dealer missed, hands called dead. For every decision the refusal of each of the
five actions (section and reason) is recorded; for every round the requests, the refusals raised,
every settlement with its section, the hands, and the irregularities.

The hashes pin the rules' behaviour exactly: a refactoring of the procedures must leave them as
they are. A deliberate change to what a procedure decides changes a hash; the test then prints the
new one, to be put here with the change that explains it.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.cards import Card
from controller.errors import RuleViolation
from controller.game_config import GameOptions, Rulings, default_options
from controller.journal import Journal
from controller.rules.down_under import masque_range
from controller.rules.procedure import LATER
from controller.rules.requests import (
    DEALER,
    Action,
    CardFor,
    CardLaterOffer,
    CardMissed,
    Decision,
    DoubleAttackOffer,
    DoubleFor,
    EvenMoneyOffer,
    InsuranceOffer,
    MasqueRange,
    ReaderUse,
    SecondChanceOffer,
    SurrenderOffer,
)
from controller.rules.round import Round
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.recorder import JournaledTable
from controller.table.virtual import VirtualTable

ROUNDS = 400  # per variant of the game's options

# Each game's variants: (decks, rulings, rules switched off). Every ruling choice the game reads
# appears in at least one variant.
VARIANTS: dict[str, list[tuple[int, dict[str, Any], frozenset[str]]]] = {
    "double-back-jack": [
        (6, {}, frozenset()),
        (
            2,
            {
                "busted_hand_pushes_on_dealer_22": True,
                "second_chance_stake": "original",
                "insurance_after_paid_blackjack": True,
                "settlement_procedure": 2,
                "min_chip": 5,
            },
            frozenset(),
        ),
        (
            6,
            {},
            frozenset(
                {
                    "blackjack-pays-2-to-1",
                    "blackjack-before-the-reader",
                    "21-paid-at-once",
                    "dealer-22-pushes",
                    "second-chance",
                }
            ),
        ),
        (8, {"busted_hand_pushes_on_dealer_22": True}, frozenset({"dealer-22-pushes", "21-paid-at-once"})),
    ],
    "double-attack": [
        (8, {}, frozenset()),
        (8, {"surrender_double_down": "lost", "reader_reveals_hole_card": True, "min_chip": 5}, frozenset()),
    ],
    "down-under": [
        (6, {}, frozenset()),
        (
            8,
            {"match_the_dealer_pays": "each", "dealer_ace_ace": 12, "large_pair_rule": "first_two_cards"},
            frozenset(),
        ),
        (4, {"dealer_22_returns_busted": True, "settlement_procedure": 2, "min_chip": 5}, frozenset()),
    ],
}

EXPECTED = {
    "double-back-jack": "d0a11a008d34c1758d4526f17fe2913675faed4f4d189ac66cc70f73dd798fe2",
    "double-attack": "95484a62d626408f4dcad291e868fef12e9a84df53afb87d7f6084ffde47b11d",
    "down-under": "522793f438f02c7f03e0b8bced3582dbf4d6d831bfefc24c8d208fb0a2933ff0",
}

MISSED = {"double-back-jack": "673a.13(h)", "double-attack": "665a.13(g)", "down-under": "685a.12(g)"}


def _options(game: str, decks: int, rulings: dict[str, Any], without: frozenset[str]) -> GameOptions:
    opts = default_options(game, decks)
    return replace(opts, rulings=replace(Rulings(), **rulings), without=without)


def _stack(opts: GameOptions, rng: random.Random) -> list[Card]:
    """The cards of the round, next card last: a shuffled batch, or one rich in a few ranks so
    that splits, resplits, Blackjacks and 21s come often."""
    cards = opts.spec.batch(opts.decks)
    if rng.random() < 0.5:
        ranks = {c.rank for c in cards}
        keep = set(rng.sample(sorted(ranks), rng.randint(2, 4)))
        cards = [c for c in cards if c.rank in keep] * 4
    rng.shuffle(cards)
    return cards


def _wagers(opts: GameOptions, rng: random.Random) -> list[SeatWagers]:
    seats = sorted(rng.sample(range(1, opts.boxes + 1), rng.randint(1, 4)))
    out = []
    for s in seats:
        bet = rng.choice([1, 2, 5, 10, 25])
        bust_it = rng.choice([0, 0, 1, bet]) if opts.bust_it else 0
        match = rng.choice([0, 0, 1, bet]) if opts.match_the_dealer else 0
        out.append(SeatWagers(s, bet, bust_it, match))
    return out


def _box(rnd: Round, seat: int) -> Any:
    return next(b for b in rnd.state.boxes if b.seat == seat)


def _checks(rnd: Round, hand: Any, box: Any, log: list[str]) -> None:
    log.append(f"checks {[rnd.procedure.check(a, hand, box) for a in Action]!r}")


def _answer(rnd: Round, req: Any, stack: list[Card], rng: random.Random, log: list[str]) -> Any:
    game = rnd.state.options.game.value
    match req:
        case CardFor():
            first_card = not rnd.state.dealer and all(len(b.first.cards) <= 1 for b in rnd.state.boxes)
            if req.seat == DEALER and first_card and game == "double-back-jack" and rng.random() < 0.03:
                return None  # 673a.13(e): the dealer missed his first card
            if req.seat != DEALER and req.purpose not in (LATER, "second_chance") and rng.random() < 0.02:
                return CardMissed(MISSED[game])
            return stack.pop()
        case Decision():
            box = _box(rnd, req.seat)
            hand = box.hands[req.hand]
            _checks(rnd, hand, box, log)
            roll = rng.random()
            if roll < 0.04:
                return rng.choice(list(Action))  # perhaps refused
            if roll < 0.12 and Action.DOUBLE in req.legal:
                return DoubleFor(rng.choice([0, 1, 2, box.bet // 2, box.bet, box.bet + 1, 2 * box.bet + 5]))
            return rng.choice(sorted(req.legal))
        case ReaderUse():
            # Wrong reports often when the dealer has a Blackjack: the round then finds it late.
            hole = rnd.state.dealer[1]
            if req.masque:
                if rng.random() < (0.4 if hole.is_ace or hole.is_ten_value else 0.05):
                    return rng.choice([None, *MasqueRange])
                return masque_range(hole)
            truth = rnd.procedure.dealer_blackjack()
            return (not truth) if rng.random() < (0.4 if truth else 0.05) else truth
        case InsuranceOffer():
            if rng.random() < 0.03:
                return rng.choice([req.maximum + 1, -1])
            return rng.choice([0, 0, 0, req.maximum, 1])
        case DoubleAttackOffer():
            if rng.random() < 0.03:
                return req.maximum + 1
            return rng.choice([0, 0, req.maximum, req.maximum, 1, None])
        case EvenMoneyOffer() | SurrenderOffer() | SecondChanceOffer() | CardLaterOffer():
            return rng.random() < 0.4
    raise AssertionError(f"unknown request {req!r}")


def _round(opts: GameOptions, rng: random.Random, log: list[str]) -> None:
    wagers = _wagers(opts, rng)
    rnd = Round(opts, wagers)
    stack = _stack(opts, rng)
    while rnd.request is not None:
        req = rnd.request
        if isinstance(req, Decision):
            log.append(f"{type(req).__name__} {req.seat} {req.hand} {sorted(req.legal)}")
        else:
            log.append(repr(req))
        seat = getattr(req, "seat", DEALER)
        if seat != DEALER and isinstance(req, CardFor | Decision) and rng.random() < 0.005:
            rnd.call_dead(seat, MISSED[opts.game.value])
            log.append(f"dead {seat}")
            continue
        try:
            rnd.answer(_answer(rnd, req, stack, rng, log))
        except RuleViolation as e:
            log.append(f"refused {e.section} | {e.message}")
            break
        if isinstance(req, Decision):  # the hand as the decision left it
            box = _box(rnd, req.seat)
            if req.hand < len(box.hands):
                _checks(rnd, box.hands[req.hand], box, log)
    state = rnd.state
    for box in state.boxes:  # a script's leftover decisions ask of finished hands too
        for hand in box.hands:
            _checks(rnd, hand, box, log)
    log.append(f"dealer {[str(c) for c in state.dealer]}")
    log.extend(repr(s) for s in state.settlements)
    log.append(repr(rnd.outcome()) if len(state.dealer) >= 2 else "no outcome")
    for box in state.boxes:
        for h in box.hands:
            log.append(
                f"hand {h.seat}.{h.index} {[str(c) for c in h.cards]} {h.result} settled={h.settled} "
                f"done={h.done} bet={h.bet} dd={h.double_down} da={h.double_attack} sc={h.second_chance}"
            )
        log.append(f"box {box.seat} ins={box.insurance} da={box.double_attack} dead={box.dead}")
    log.append(
        f"reader={state.reader_report!r} agrees={state.reader_agrees} exposed={state.hole_exposed} "
        f"turned={state.hole_turned} played={state.dealer_played} final={state.final_from} "
        f"irregular={state.irregularities}"
    )


def fingerprint(game: str) -> str:
    digest = hashlib.sha256()
    for v, (decks, rulings, without) in enumerate(VARIANTS[game]):
        opts = _options(game, decks, rulings, without)
        rng = random.Random(f"{game}/{v}")
        for _ in range(ROUNDS):
            log: list[str] = []
            _round(opts, rng, log)
            digest.update("\n".join(log).encode())
            digest.update(b"\0")
    return digest.hexdigest()


@pytest.mark.parametrize("game", sorted(VARIANTS))
def test_random_rounds_decide_as_before(game: str) -> None:
    assert fingerprint(game) == EXPECTED[game]


class _RandomPlayers(VirtualTable):
    """The virtual table with players who choose at random, now and then a refused key."""

    def decision(self, req: Decision) -> None:
        if self.rng.random() < 0.05:
            with contextlib.suppress(RuleViolation):  # refused: nothing changed, still asked
                self.feed(I.KeyPressed(key=self.rng.choice(list(Action)).value))
            return
        self.feed(I.KeyPressed(key=self.rng.choice(sorted(req.legal)).value))

    def insurance(self, req: InsuranceOffer) -> None:
        self.feed(I.WagerPlaced(seat=req.seat, amount=self.rng.choice([0, req.maximum])))

    def double_attack(self, req: DoubleAttackOffer) -> None:
        self.feed(I.WagerPlaced(seat=req.seat, amount=self.rng.choice([0, 1, req.maximum])))

    def _yes_or_no(self, take: str) -> None:
        self.feed(I.KeyPressed(key=take if self.rng.random() < 0.4 else "next"))

    def second_chance(self, req: SecondChanceOffer) -> None:
        self._yes_or_no("second_chance")

    def surrender(self, req: SurrenderOffer) -> None:
        self._yes_or_no("surrender")

    def even_money(self, req: EvenMoneyOffer) -> None:
        self._yes_or_no("even_money")


JOURNAL_ROUNDS = 100

EXPECTED_JOURNAL = {
    "double-back-jack": "c14e6bd0799226bfca4b6084bec61f75c39508894e3cee557a477140f6384c48",
    "double-attack": "15765c8e8878670e09804d1a39615e9a4b1c541de1eecfddb2190f98a27e5432",
    "down-under": "dc2e7c167ada4c662d8e2a306b13c1258f7d1f47500018a0bc16716059cf5a4c",
}


def journal_fingerprint(game: str, path: Path) -> str:
    """The hash of the journal's last record, which chains every byte before it."""
    options = default_options(game)
    recorder = JournaledTable.open(path, options, "t-01", now=1_800_000_000.0)
    table = _RandomPlayers(options, random.Random(game), seats=5, recorder=recorder)
    table.open_table()
    for _ in range(JOURNAL_ROUNDS):
        table.play_round()
    recorder.close()
    with Journal.open(path, create=False, readonly=True) as journal:
        return [r.hash for r in journal.records()][-1]


@pytest.mark.parametrize("game", sorted(VARIANTS))
def test_random_rounds_journal_as_before(game: str, tmp_path: Path) -> None:
    assert journal_fingerprint(game, tmp_path / "day.db") == EXPECTED_JOURNAL[game]
