"""`tablectl simulate`: deterministic per seed, clean JSON, per-wager figures, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.game_config import default_options
from controller.simulate import simulate


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "simulate", *args],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("game", ["double-back-jack", "double-attack", "down-under"])
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
