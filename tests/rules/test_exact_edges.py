"""Side-wager edges from `simulate` agree with exact combinatorial values (issue 2, "Done when").

The exact values are computed here, from the paytables in the text and the shoe composition, by
enumerating the cards that decide each wager off the top of a full batch. They share no code with
the rules engine: a wrong paytable line or a wrong matching rule in the engine moves the simulated
edge by more than three standard errors.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from fractions import Fraction
from functools import cache

import pytest

from controller.game_config import default_options
from controller.rules.wagers import Wager
from controller.simulate import Report, simulate

RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
SUITS = ["S", "H", "D", "C"]
RED = {"H", "D"}
POINTS = {r: (1 if r == "A" else 10 if r in ("10", "J", "Q", "K") else int(r)) for r in RANKS}


def shoe(decks: int, without_tens: bool = False) -> Counter[tuple[str, str]]:
    ranks = [r for r in RANKS if not (without_tens and r == "10")]
    return Counter({(r, s): decks for r in ranks for s in SUITS})


def dealer_total(ranks: list[str]) -> int:
    hard = sum(POINTS[r] for r in ranks)
    return hard + 10 if "A" in ranks and hard + 10 <= 21 else hard


@cache
def exact_bust_it() -> Fraction:
    """665a.7(m), 665a.12(c): dealer's first two < 17 and three cards over 21, paid by the third
    card, 8-8-8 same suit 200, same colour 50. Eight decks of 48 (665a.3(a))."""
    cards = shoe(8, without_tens=True)
    n = sum(cards.values())
    third_pays = {"6": 15, "7": 10, "8": 8, "9": 6, "J": 3, "Q": 3, "K": 3}
    ev = Fraction(0)
    for c1, n1 in cards.items():
        for c2, n2 in cards.items():
            k2 = n2 - (c1 == c2)
            if k2 <= 0:
                continue
            p12 = Fraction(n1 * k2, n * (n - 1))
            if dealer_total([c1[0], c2[0]]) >= 17:
                ev -= p12
                continue
            for c3, n3 in cards.items():
                k3 = n3 - (c1 == c3) - (c2 == c3)
                if k3 <= 0:
                    continue
                p = p12 * Fraction(k3, n - 2)
                if dealer_total([c1[0], c2[0], c3[0]]) <= 21:
                    ev -= p
                elif c1[0] == c2[0] == c3[0] == "8" and c1[1] == c2[1] == c3[1]:
                    ev += 200 * p
                elif c1[0] == c2[0] == c3[0] == "8" and ((c1[1] in RED) == (c2[1] in RED) == (c3[1] in RED)):
                    ev += 50 * p
                else:
                    ev += third_pays[c3[0]] * p
    return -ev  # house edge per unit


@cache
def exact_match_the_dealer(decks: int, both: str = "best") -> Fraction:
    """685a.7(f), 685a.11(c), rulings U1 (``both``: the better line once, or each matching card)
    and U2 (identical rank)."""
    suited, unsuited = {6: (11, 4), 8: (14, 3)}[decks]
    cards = shoe(decks)
    n = sum(cards.values())
    ev = Fraction(0)
    for up, nu in cards.items():
        # Only whether each player card matches suited, unsuited or not at all matters.
        same = cards[up] - 1  # identical rank and suit left
        rank_other = sum(cards[(up[0], s)] for s in SUITS if s != up[1])
        none = n - 1 - same - rank_other
        kinds = {"s": same, "u": rank_other, "-": none}
        pays = {"s": suited, "u": unsuited}
        for k1, a in kinds.items():
            for k2, b in kinds.items():
                b2 = b - (k1 == k2)
                if a <= 0 or b2 <= 0:
                    continue
                p = Fraction(nu, n) * Fraction(a * b2, (n - 1) * (n - 2))
                wins = [pays[k] for k in (k1, k2) if k in pays]
                won = (max(wins) if both == "best" else sum(wins)) if wins else -1
                ev += p * won
    return -ev


def exact_insurance(decks: int, win_ranks: set[str], pays: Fraction, without_tens: bool) -> Fraction:
    """Up card an ace; the hole card is uniform over the rest of the batch."""
    cards = shoe(decks, without_tens)
    n = sum(cards.values())
    wins = sum(v for (r, _), v in cards.items() if r in win_ranks)
    p = Fraction(wins, n - 1)
    return -(p * pays - (1 - p))


@cache
def _simulated(game: str, decks: int | None, rounds: int, rulings: tuple[tuple[str, object], ...]) -> Report:
    """One simulated run per game, deck count, rulings and length, shared by the wagers it settles
    (Double Attack's Bust It and insurance, Down Under's Match-the-Dealer and insurance): the same
    seed would only play the same rounds again."""
    options = default_options(game, decks)
    if rulings:
        options = replace(options, rulings=replace(options.rulings, **dict(rulings)))
    return simulate(options, seats=1, rounds=rounds, seed=20261121)


def _check(
    game: str, wager: str, exact: Fraction, rounds: int, decks: int | None = None, **rulings: object
) -> None:
    if decks is None:
        decks = default_options(game).decks
    report = _simulated(game, decks, rounds, tuple(sorted(rulings.items())))
    stats = report.wagers[Wager(wager)]
    assert stats.rounds > 0
    diff = abs(stats.edge - float(exact))
    assert diff <= 3 * stats.edge_stderr, (
        f"{game} {wager}: simulated edge {stats.edge:.5f} ± {stats.edge_stderr:.5f}, exact {float(exact):.5f}"
    )


def test_exact_values_are_what_the_paytables_imply() -> None:
    # Sanity of the exact calculations themselves against figures worked out by hand:
    # 6 decks, insurance 2:1 on 96 tens among 311 cards: edge = 1 - 3*96/311.
    assert exact_insurance(6, {"10", "J", "Q", "K"}, Fraction(2), False) == 1 - Fraction(3 * 96, 311)
    # Double Attack insurance 5:2 on 96 K/Q/J among 383 cards.
    assert exact_insurance(8, {"J", "Q", "K"}, Fraction(5, 2), True) == 1 - Fraction(7, 2) * Fraction(96, 383)
    assert 0 < exact_bust_it() < Fraction(1, 5)
    assert 0 < exact_match_the_dealer(6) < Fraction(1, 5)
    assert 0 < exact_match_the_dealer(8) < Fraction(1, 5)
    # Ruling U1: paying each matching card costs the house about two points (docs/simulate.md).
    for decks, best, each in ((6, 0.063064, 0.040618), (8, 0.055666, 0.036738)):
        assert abs(float(exact_match_the_dealer(decks)) - best) < 5e-6
        assert abs(float(exact_match_the_dealer(decks, "each")) - each) < 5e-6


@pytest.mark.slow
def test_bust_it_edge_matches_exact() -> None:
    _check("double-attack", "bust_it", exact_bust_it(), rounds=120_000)


@pytest.mark.slow
@pytest.mark.parametrize("decks", [6, 8])
def test_match_the_dealer_edge_matches_exact(decks: int) -> None:
    _check("down-under", "match_the_dealer", exact_match_the_dealer(decks), rounds=80_000, decks=decks)


@pytest.mark.slow
@pytest.mark.parametrize("decks", [6, 8])
def test_match_the_dealer_paid_for_each_card_matches_exact(decks: int) -> None:
    exact = exact_match_the_dealer(decks, "each")
    _check("down-under", "match_the_dealer", exact, rounds=80_000, decks=decks, match_the_dealer_pays="each")


@pytest.mark.slow
def test_insurance_edges_match_exact() -> None:
    _check("down-under", "insurance", exact_insurance(6, {"10", "J", "Q", "K"}, Fraction(2), False), 80_000)
    # Double Attack's insurance from the Bust It test's run (120,000 rounds, the same day replayed).
    _check("double-attack", "insurance", exact_insurance(8, {"J", "Q", "K"}, Fraction(5, 2), True), 120_000)
