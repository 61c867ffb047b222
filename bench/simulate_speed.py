"""Rounds per second of `tablectl simulate`, one box, one core, per game.

Runs the same simulator the CLI runs, in this process, several times and prints the best and the
median run: the machine is a shared VM whose speed wanders, and the best run is the closest to
what the code itself costs. Usage: python bench/simulate_speed.py [--rounds N] [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics

from controller.game_config import default_options
from controller.games import blackjack_games
from controller.simulate import simulate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"simulate, 1 box, {args.rounds} rounds x {args.repeat} runs, rounds per second")
    print(f"{'game':<18}{'best':>10}{'median':>10}")
    for game in blackjack_games():
        rates = []
        for run in range(args.repeat):
            report = simulate(default_options(game), 1, args.rounds, seed=run + 1)
            rates.append(args.rounds / report.seconds)
        print(f"{game.value:<18}{max(rates):>10.0f}{statistics.median(rates):>10.0f}")


if __name__ == "__main__":
    main()
