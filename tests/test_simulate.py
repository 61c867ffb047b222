"""`tablectl simulate`: deterministic per seed, clean JSON, per-wager figures, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.game_config import default_options
from controller.games import blackjack_games
from controller.simulate import simulate


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "simulate", *args],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("game", blackjack_games())
def test_same_seed_same_figures(game: str) -> None:
    a = simulate(default_options(game), seats=3, rounds=2000, seed=7).as_dict()
    b = simulate(default_options(game), seats=3, rounds=2000, seed=7).as_dict()
    c = simulate(default_options(game), seats=3, rounds=2000, seed=8).as_dict()
    for d in (a, b, c):
        d.pop("rounds_per_second")
    assert a == b
    assert a != c


def test_json_report_has_every_wager_kind_and_bust_rates() -> None:
    proc = run("--game", "double-attack", "--seats", "2", "--rounds", "3000", "--seed", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # nothing but JSON on stdout
    assert set(data["wagers"]) == {"bet", "double_attack", "insurance", "bust_it"}
    for w in data["wagers"].values():
        assert w["wagered"] > 0 and w["edge"] == pytest.approx(-w["net"] / w["wagered"], abs=1e-6)
    assert set(data["dealer_bust_by_up_card"]) == {"A", "2", "3", "4", "5", "6", "7", "8", "9", "10"}
    assert data["rounds_per_second"] > 0
    assert proc.stderr == ""  # no progress bar when stderr is not a terminal


def test_every_shoe_is_reshuffled_after_the_cover_card() -> None:
    report = simulate(default_options("down-under", 4), seats=6, rounds=3000, seed=3)
    # 4 decks, 70-75% dealt, six boxes use ~17 cards a round: about 8-9 rounds a shoe.
    assert 3000 / 11 < report.shoes < 3000 / 6


def test_refusals_are_one_line() -> None:
    proc = run("--game", "down-under", "--decks", "7", "--rounds", "10", "--seed", "1")
    assert proc.returncode == 2 and proc.stderr.startswith("685a.3(a)")
    proc = run("--game", "down-under", "--seats", "7", "--rounds", "10", "--seed", "1")
    assert proc.returncode == 2 and "--seats" in proc.stderr


def test_without_switches_off_one_rule_of_double_back_jack_each() -> None:
    """docs/simulate.md: what each rule of 673a is worth to the Blackjack Wager. Each switch
    changes the settlement it names and nothing else (a scripted round each)."""
    from dataclasses import replace

    from tests.rules.conftest import net, options, play, seat

    def bet(shoe: str, *actions: str, without: str = "") -> object:
        opts = options("double-back-jack")
        if without:
            opts = replace(opts, without=frozenset({without}))
        return net(play(opts, shoe, seat(1, 10, *actions)), 1).get("bet", 0)

    bj = "AS 9H KD 7C 5D"  # seat 1 A-K: a Blackjack against 9-7
    assert (bet(bj), bet(bj, without="blackjack-pays-2-to-1")) == (20, 15)
    dealer_bj = "AS AH KD KC 5D"  # A-K against A-K (the reader finds the dealer's Blackjack)
    assert (bet(dealer_bj), bet(dealer_bj, without="blackjack-before-the-reader")) == (20, 0)
    hit_to_21 = "5S 10H 6D 10C KD 2S"  # 5-6 hits a K: 21 against 10-10
    assert (bet(hit_to_21, "hit"), bet(hit_to_21, "hit", without="21-paid-at-once")) == (10, 10)
    tie_21 = "5S 10H 6D 6C KD 5H"  # 5-6 hits a K: 21, then the dealer's 16 draws a 5: 21
    assert (bet(tie_21, "hit"), bet(tie_21, "hit", without="21-paid-at-once")) == (10, 0)
    # Dealer 22: 10-6 draws a 6; the player's 17 is returned, or wins when 22 is a bust.
    d22 = "10S 10H 7D 6C 6H"
    assert (bet(d22), bet(d22, without="dealer-22-pushes")) == (0, 10)
    # 10-6 hits a K (26): with Second Chance it takes a 7 (19) and beats 18, so the Blackjack
    # Wager comes back (673a.7(s)(1)(i)); without, it is lost.
    over = "10S 9H 6D 9C KD 7C"
    assert (bet(over, "hit", "second_chance"), bet(over, "hit", without="second-chance")) == (0, -10)
    proc = run("--game", "down-under", "--rounds", "10", "--seed", "1", "--without", "second-chance")
    assert proc.returncode == 2 and proc.stderr.startswith(
        "--without: second-chance: not a rule of Down Under Blackjack that can be switched off (none)"
    )


def test_without_a_seed_one_is_picked_said_and_repeatable() -> None:
    first = run("--game", "down-under", "--rounds", "300", "--json")
    assert first.returncode == 0, first.stderr
    seed = json.loads(first.stdout)["seed"]
    assert first.stderr == f"tablectl simulate: seed {seed} (--seed {seed} repeats this run)\n"
    again = run("--game", "down-under", "--rounds", "300", "--json", "--seed", str(seed))
    assert again.stderr == ""

    def figures(out: str) -> object:
        data = json.loads(out)
        return data["wagers"], data["dealer_bust_by_up_card"]

    assert figures(again.stdout) == figures(first.stdout)


def test_a_journalled_simulation_is_dated_now(tmp_path: Path) -> None:
    """Issue 26: its records carried 2027 dates and table_opened 1970."""
    import time

    from controller.journal import Journal

    began = time.time()
    done = run("--game", "down-under", "--rounds", "5", "--seed", "1", "--journal", str(tmp_path / "j.db"))
    assert done.returncode == 0, done.stderr
    with Journal.open(tmp_path / "j.db", create=False, readonly=True) as j:
        times = [r.at for r in j.records()]
    assert began <= times[0] <= time.time() and times == sorted(times)
