"""``tablectl simulate``: many rounds from shuffled shoes, headless, for edges and bust rates.

Shoes are real: two batches alternate (673a.3(b)(4)), each is shuffled, cut and dealt to a cover
card placed 25-30% from the bottom (673a.5(d)), the first card is burned (673a.7(c)), the round
in which the cover card appears is finished and then the batch is reshuffled (673a.7(d)), and a
shoe that runs dry mid-round is made good from the discard rack (673a.13(f)). Every box places
every optional wager (see controller.strategy). Same seed, same figures (except speed).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from controller.cards import Card, parse_card
from controller.errors import TablectlError
from controller.game_config import GameOptions, default_options, load_game_options
from controller.games import blackjack_games, game_ids, game_spec
from controller.rules.down_under import masque_range
from controller.rules.requests import (
    Action,
    CardFor,
    CardLaterOffer,
    Decision,
    DoubleAttackOffer,
    InsuranceOffer,
    Offer,
    ReaderUse,
    SecondChanceOffer,
    answer,
    offer_kind,
)
from controller.rules.round import Round, check_wagers, procedure_of, side_wagers
from controller.rules.state import RoundState, SeatWagers
from controller.rules.wagers import Settled, Wager, settled_kinds
from controller.shoe import MIN_CUT_FROM_END, Shoe, cut, shuffled_shoe
from controller.strategy import BET, choose, insurance_stake, takes_second_chance

BACK_COLOURS = ("blue", "red")


def up_key(c: Card) -> str:
    return "A" if c.is_ace else ("10" if c.is_ten_value else c.rank)


UP_KEYS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10")


@dataclass
class WagerStats:
    """Per-round sums for one wager kind; the edge's standard error is a ratio estimate."""

    rounds: int = 0  # rounds in which this wager was made
    wagered: int = 0
    net_halves: int = 0
    sum_x2: int = 0  # of per-round net (halves)
    sum_xw: int = 0
    sum_w2: int = 0

    def add(self, stake: int, x: int) -> None:
        """One round's stake and net (in half-chips) on this wager kind."""
        self.rounds += 1
        self.wagered += stake
        self.net_halves += x
        self.sum_x2 += x * x
        self.sum_xw += x * stake
        self.sum_w2 += stake * stake

    @property
    def net(self) -> float:
        return self.net_halves / 2

    @property
    def edge(self) -> float:
        return -self.net / self.wagered if self.wagered else 0.0

    @property
    def edge_stderr(self) -> float:
        if self.rounds < 2 or not self.wagered:
            return 0.0
        r = self.net_halves / self.wagered  # per chip, in halves
        resid = self.sum_x2 - 2 * r * self.sum_xw + r * r * self.sum_w2
        return math.sqrt(max(resid, 0.0) * self.rounds / (self.rounds - 1)) / self.wagered / 2


@dataclass
class Report:
    game: str
    decks: int
    seats: int
    rounds: int
    seed: int
    wagers: dict[Wager, WagerStats] = field(
        default_factory=lambda: {k: WagerStats() for k in settled_kinds()}
    )
    up_rounds: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UP_KEYS, 0))
    up_busts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UP_KEYS, 0))
    shoes: int = 0
    seconds: float = 0.0
    without: tuple[str, ...] = ()  # rules switched off (--without)

    def as_dict(self) -> dict[str, Any]:
        return {
            "game": self.game,
            "decks": self.decks,
            "seats": self.seats,
            "rounds": self.rounds,
            "seed": self.seed,
            "shoes": self.shoes,
            **({"without": list(self.without)} if self.without else {}),
            "strategy": "basic strategy S17/DAS/LS for all games; every optional wager (docs/simulate.md)",
            "wagers": {
                k.value: {
                    "wagered": s.wagered,
                    "net": s.net,
                    "edge": round(s.edge, 6),
                    "edge_stderr": round(s.edge_stderr, 6),
                }
                for k, s in self.wagers.items()
                if s.wagered
            },
            "dealer_bust_by_up_card": {
                k: {
                    "rounds": self.up_rounds[k],
                    "busts": self.up_busts[k],
                    "rate": round(self.up_busts[k] / self.up_rounds[k], 6) if self.up_rounds[k] else None,
                }
                for k in UP_KEYS
            },
            "rounds_per_second": round(self.rounds / self.seconds) if self.seconds else None,
        }

    def add_round(self, settlements: Iterable[Settled], up: Card | None, busted: bool) -> None:
        """One round: its settlements; the dealer's up card if the dealer played, and whether the
        dealer busted."""
        per_kind: dict[Wager, list[int]] = {}
        for s in settlements:
            acc = per_kind.get(s.wager)
            if acc is None:
                per_kind[s.wager] = [int(s.stake), int(s.stake) * s.halves]
            else:
                acc[0] += int(s.stake)
                acc[1] += int(s.stake) * s.halves
        for kind, (stake, x) in per_kind.items():
            self.wagers[kind].add(stake, x)
        if up is not None:
            key = up_key(up)
            self.up_rounds[key] += 1
            if busted:
                self.up_busts[key] += 1


class TableSimulator:
    """Deals rounds from real shoes and answers the rules engine as the strategy says."""

    def __init__(
        self,
        options: GameOptions,
        seats: int,
        rng: random.Random,
        on_round: Callable[[RoundState, Round], None] | None = None,
    ) -> None:
        self.options = options
        self.rng = rng
        spec = options.spec
        self.batches = [spec.batch(options.decks, colour) for colour in BACK_COLOURS]
        self.next_batch = 0
        self.shoe: Shoe = self._new_shoe()
        self.discards: list[Card] = []
        self.shoes = 1
        side = side_wagers(options, BET)
        self.wagers = [SeatWagers(s, BET, side=side) for s in range(1, seats + 1)]
        check_wagers(options, self.wagers)  # once: every round opens with these (checked=True)
        self.on_round = on_round
        self.round: Round
        self.limit = procedure_of(options.spec).dealer_limit  # bust above it (685a.3(d)(3): 22)

    def _new_shoe(self) -> Shoe:
        batch = self.batches[self.next_batch]
        self.next_batch ^= 1  # 673a.3(b)(4): the batches alternate, shoe by shoe
        shoe = shuffled_shoe(batch, self.rng)
        shoe.draw()  # 673a.7(c): burn the first card
        return shoe

    def _draw(self) -> Card:
        if not self.shoe.cards:
            # 673a.13(f): shuffle and cut the discards, burn one, finish the round.
            stack = self.discards
            self.discards = []
            self.rng.shuffle(stack)
            if len(stack) > 2 * MIN_CUT_FROM_END:
                stack = cut(stack, self.rng.randint(MIN_CUT_FROM_END, len(stack) - MIN_CUT_FROM_END))
            self.shoe = Shoe(cards=stack[::-1], behind_cover=0)
            self.shoe.draw()
        return self.shoe.draw()

    # -- answers to the rules engine (controller.rules.requests.Answerer) -----------------
    def card(self, req: CardFor) -> Card:
        return self._draw()

    def decision(self, req: Decision) -> Action:
        state = self.round.state
        return choose(state.boxes[req.seat - 1].hands[req.hand], state.dealer[0], req.legal)

    def reader(self, req: ReaderUse) -> object:
        hole = self.round.state.dealer[1]
        return masque_range(hole) if req.masque else self.round.procedure.dealer_blackjack()

    def offer(self, req: Offer) -> bool | int:
        """Any offer without a hook of its own (even money, early surrender, a game's own):
        declined."""
        return offer_kind(req).declined()

    def insurance(self, req: InsuranceOffer) -> int:
        return insurance_stake(BET)

    def double_attack(self, req: DoubleAttackOffer) -> int:
        return BET

    def second_chance(self, req: SecondChanceOffer) -> bool:
        return takes_second_chance(self.round.state.boxes[req.seat - 1].hands[req.hand])

    def card_later(self, req: CardLaterOffer) -> bool:
        return True  # never asked: the simulated dealer misses no card (a player would take it)

    def play_round(self, report: Report) -> None:
        rnd = Round(self.options, self.wagers, checked=True)
        self.round = rnd
        req = rnd.request
        while req is not None:
            req = rnd.answer(answer(req, self))
        state = rnd.state
        played = state.dealer_played
        report.add_round(
            state.settlements,
            state.dealer[0] if played else None,
            played and rnd.procedure.dealer_total() > self.limit,
        )
        if self.on_round is not None:
            self.on_round(state, rnd)

        self.discards.extend(state.dealer)
        for box in state.boxes:
            for h in box.hands:
                self.discards.extend(h.cards)
        if self.shoe.cover_reached:  # 673a.7(d): finish the round, then reshuffle
            self.shoe = self._new_shoe()
            self.discards = []
            self.shoes += 1


def simulate(
    options: GameOptions,
    seats: int,
    rounds: int,
    seed: int,
    progress: Callable[[int], None] | None = None,
) -> Report:
    options.validate()
    report = Report(
        game=options.game.value,
        decks=options.decks,
        seats=seats,
        rounds=rounds,
        seed=seed,
        without=tuple(sorted(options.without)),
    )
    table = TableSimulator(options, seats, random.Random(seed))
    step = max(1, rounds // 200)
    start = time.perf_counter()
    for i in range(rounds):
        table.play_round(report)
        if progress is not None and i % step == 0:
            progress(i)
    report.seconds = time.perf_counter() - start
    report.shoes = table.shoes
    return report


def simulate_through_core(
    options: GameOptions,
    seats: int,
    rounds: int,
    seed: int,
    journal_path: str,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """The same day played through the table core and written to a journal (issue 3): slower, and
    every step is committed before the next, as at a live table."""
    from controller.table.recorder import JournaledTable
    from controller.table.virtual import VirtualTable

    options.validate()
    report = Report(game=options.game.value, decks=options.decks, seats=seats, rounds=rounds, seed=seed)
    limit = procedure_of(options.spec).dealer_limit

    def tally(step: Any) -> None:
        for event in step.events:
            if event.kind == "batch_to_shoe":
                report.shoes += 1
            if event.kind != "round_settled":
                continue
            p = event.payload
            played = p["dealer_played"]
            report.add_round(
                (Settled(**{**s, "wager": Wager(s["wager"])}) for s in p["settlements"]),
                parse_card(p["dealer"]["cards"][0]) if played else None,
                played and p["dealer"]["total"] > limit,
            )

    opened = time.time()  # the simulated day starts now, so its records carry real dates
    recorder = JournaledTable.open(journal_path, options, table_id=f"sim-{options.game.value}", now=opened)
    if recorder.journal.last_seq > 1:
        recorder.close()
        raise TablectlError(f"{journal_path}: already holds a table's journal; give a new file")
    table = VirtualTable(
        options, random.Random(seed), seats=seats, on_step=tally, recorder=recorder, now=opened
    )
    step = max(1, rounds // 200)
    start = time.perf_counter()
    try:
        table.open_table()
        for i in range(rounds):
            table.play_round()
            if progress is not None and i % step == 0:
                progress(i)
    finally:
        recorder.close()
    report.seconds = time.perf_counter() - start
    return report


def add_arguments(p: argparse.ArgumentParser) -> None:
    # Only the games simulate plays are offered (the choices --help shows are the ones accepted);
    # DJ Wild, a game of the table's but not of simulate's, gets the reason rather than "invalid choice".
    p.add_argument(
        "--game",
        required=True,
        type=_simulated_game,
        choices=[str(g) for g in blackjack_games()],
        help="the blackjack game whose edges to measure (DJ Wild Stud Poker is played through its "
        "devices instead: tablectl demo --game dj-wild)",
    )
    p.add_argument("--config", help="a game TOML file (config/games/); overrides --game's defaults")
    p.add_argument("--decks", type=int, help="decks per batch (default: the game's usual)")
    p.add_argument("--seats", type=int, default=1, help="boxes in play, 1-6 (default 1)")
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument(
        "--seed", type=int, default=None, help="repeat a run exactly (default: one is picked and printed)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument(
        "--journal",
        metavar="PATH",
        help="play through the table core and write its journal to PATH (a new file)",
    )
    p.add_argument(
        "--without",
        action="append",
        default=[],
        choices=sorted({rule for g in game_ids() for rule in game_spec(g).switchable}),
        metavar="RULE",
        help="play with this rule of the game's chapter switched off, to see what it is worth"
        " (repeatable; "
        + "; ".join(
            f"{game_spec(g).called}: {k}: {v[1]}"
            for g in game_ids()
            for k, v in game_spec(g).switchable.items()
        )
        + ")",
    )


@contextmanager
def _progress_bar(total: int, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        "{task.percentage:>3.0f}%",
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("simulating", total=total)
        yield lambda done: bar.update(task, completed=done)


def _simulated_game(text: str) -> str:
    """--game's value; a game of the table's that simulate does not play says why (argparse prints
    the message as the usage error, exit 2)."""
    if text in game_ids() and text not in blackjack_games():
        spec = game_spec(text)
        raise argparse.ArgumentTypeError(
            f"{text}: simulate measures the blackjack games' edges from their rules engine; {spec.title}"
            f" ({spec.chapter}) is played at the table, not simulated here: tablectl demo --game {text}"
            " plays it through its devices"
        )
    return text


def main(args: argparse.Namespace) -> int:
    if args.config:
        options = load_game_options(args.config)
        if options.game.value != args.game:
            raise TablectlError(f"{args.config}: game is {options.game.value}, not {args.game}")
    else:
        options = default_options(args.game)
    if args.decks is not None:
        options = (
            replace(options, decks=args.decks) if args.config else default_options(args.game, args.decks)
        )
    if args.without:
        spec = game_spec(options.game)
        foreign = sorted(set(args.without) - set(spec.switchable))
        if foreign:
            can = ", ".join(spec.switchable) or "none"
            raise TablectlError(
                f"--without: {', '.join(foreign)}: not a rule of {spec.called} that can be switched off"
                f" ({can})"
            )
        if args.journal:
            raise TablectlError("--without: a table never plays without its rules; no --journal")
        options = replace(options, without=frozenset(args.without))
    if not 1 <= args.seats <= options.boxes:
        raise TablectlError(f"--seats: 1 to {options.boxes} boxes, not {args.seats}")
    if args.rounds < 1:
        raise TablectlError("--rounds: at least one round")
    if args.seed is None:
        # Picked, and said, so any run can be repeated exactly (the report shows it too).
        args.seed = secrets.randbelow(2**31)
        print(f"tablectl simulate: seed {args.seed} (--seed {args.seed} repeats this run)", file=sys.stderr)
    long_run = args.rounds >= 50_000 and sys.stderr.isatty()
    with _progress_bar(args.rounds, long_run or bool(args.journal and sys.stderr.isatty())) as progress:
        if args.journal:
            report = simulate_through_core(
                options, args.seats, args.rounds, args.seed, args.journal, progress
            )
        else:
            report = simulate(options, args.seats, args.rounds, args.seed, progress)
    data = report.as_dict()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(format_report(data))
    return 0


def format_report(data: dict[str, Any]) -> str:
    lines = [
        f"{data['game']}: {data['rounds']} rounds, {data['seats']} box(es), {data['decks']} decks "
        f"per batch, {data['shoes']} shoes, seed {data['seed']}"
        + (f"; without {', '.join(data['without'])}" if data.get("without") else ""),
        "",
        f"{'wager':<18}{'wagered':>14}{'net':>14}{'edge':>10}{'± s.e.':>10}",
    ]
    for kind, w in data["wagers"].items():
        lines.append(
            f"{kind:<18}{w['wagered']:>14}{w['net']:>14.1f}{w['edge']:>10.4%}{w['edge_stderr']:>10.4%}"
        )
    lines += ["", "dealer bust rate by up card:"]
    for key, b in data["dealer_bust_by_up_card"].items():
        rate = "-" if b["rate"] is None else f"{b['rate']:.2%}"
        lines.append(f"  {key:>2}: {rate:>7} of {b['rounds']}")
    lines += ["", f"{data['rounds_per_second']} rounds per second"]
    return "\n".join(lines)
