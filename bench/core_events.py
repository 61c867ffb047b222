"""Table core throughput: domain events decided and applied per second on one core, and replay speed.

Drives whole tables through the core with the virtual dealer (controller.table.virtual), six boxes,
shoe after shoe, timing only Table.handle (the dealer's own bookkeeping is left out), then replays
the events. Best and median of several runs. Usage: python bench/core_events.py [--rounds N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from controller.game_config import default_options
from controller.games import blackjack_games
from controller.table.core import Table
from controller.table.events import DomainEvent
from controller.table.inputs import Input
from controller.table.virtual import VirtualTable


def one_run(game: str, rounds: int, seed: int) -> tuple[float, float, int]:
    options = default_options(game)
    vt = VirtualTable(options, random.Random(seed), seats=6)
    events: list[DomainEvent] = []
    spent = 0.0
    handle = vt.table.handle

    def timed(inp: Input, now: float):  # type: ignore[no-untyped-def]
        nonlocal spent
        t = time.perf_counter()
        step = handle(inp, now)
        spent += time.perf_counter() - t
        events.extend(step.events)
        return step

    vt.table.handle = timed  # type: ignore[method-assign]
    vt.open_table()
    for _ in range(rounds):
        vt.play_round()
    t = time.perf_counter()
    Table.replay(options, events)
    replay = time.perf_counter() - t
    return len(events) / spent, len(events) / replay, len(events)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"table core, 6 boxes, {args.rounds} rounds x {args.repeat} runs (target: 50,000 events/s)")
    print(f"{'game':<18}{'events':>9}{'events/s best':>15}{'median':>10}{'replay/s':>12}")
    for game in blackjack_games():
        runs = [one_run(game.value, args.rounds, seed) for seed in range(args.repeat)]
        rates = [r[0] for r in runs]
        print(
            f"{game.value:<18}{runs[0][2]:>9}{max(rates):>15,.0f}{statistics.median(rates):>10,.0f}"
            f"{statistics.median(r[1] for r in runs):>12,.0f}"
        )


if __name__ == "__main__":
    main()
