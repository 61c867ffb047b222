"""``tablectl sim --config config/tables/<table>.toml [--seed N] [--dealer [--rounds N] [--broker URL]]``

Starts the simulated devices of one table, prints one line per device (name, kind, transport,
where it listens, Modbus device id) and runs until SIGINT or SIGTERM. With ``--dealer`` a virtual
dealer plays rounds at the table through those devices, reading the table's public MQTT state
(sim/wire_dealer.py); it exits 0 once N rounds have settled, 1 with one line if the table stopped
it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import signal
import sys

import aiomqtt
import structlog

from controller.errors import TablectlError
from controller.games import BLACKJACK_GAMES
from controller.supervisor.config import load_table_config
from controller.supervisor.logs import route_stdlib_logging
from sim.table import SimTable
from sim.wire_dealer import TableStopped, WireDealer


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl sim", description="Run the simulated devices of one table.")
    p.add_argument("--config", required=True, type=pathlib.Path, help="config/tables/<table>.toml")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the shuffles (tests only; without it the OS CSPRNG shuffles)",
    )
    p.add_argument("--dealer", action="store_true", help="a virtual dealer plays the table (blackjack games)")
    p.add_argument("--rounds", type=int, default=10, help="with --dealer: rounds to settle, then exit 0")
    p.add_argument("--boxes", type=int, default=2, choices=range(1, 7), metavar="1-6", help="with --dealer")
    p.add_argument(
        "--broker", default="mqtt://127.0.0.1:1883",
        help="with --dealer: the broker `tablectl run` publishes the table's state to",
    )  # fmt: skip
    return p


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:  # as passed on by a dispatcher's argparse.REMAINDER
        argv = argv[1:]
    args = _parser().parse_args(argv)
    if not structlog.is_configured():
        # Logs go to stderr so stdout carries only the device listing.
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
            logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        )
        route_stdlib_logging(logging.WARNING)  # pymodbus's frame dumps hold the devices' cards
    if args.dealer and args.rounds < 1:
        print("tablectl sim: --rounds: must be 1 or more", file=sys.stderr)
        return 2
    try:
        config = load_table_config(args.config, side="sim")
        table = SimTable.from_config(config, seed=args.seed, at_configured=True)
        dealer = None
        if args.dealer:
            if config.options.game not in BLACKJACK_GAMES:
                raise TablectlError(f"--dealer: {config.options.spec.title} is not dealt on the wire yet")
            side = config.options.bust_it or config.options.match_the_dealer or config.options.progressive
            dealer = WireDealer(
                table, args.broker, config.site, config.table_id, boxes=args.boxes, side_wagers=side
            )
    except TablectlError as exc:
        print(f"tablectl sim: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(table, dealer, args.rounds))
    except TablectlError as exc:
        print(f"tablectl sim: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tablectl sim: cannot start the simulators: {exc}", file=sys.stderr)
        return 1


async def _serve(table: SimTable, dealer: WireDealer | None = None, rounds: int = 0) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await table.start()
    try:
        for line in table.listing():
            print(line, flush=True)
        print("tablectl sim: running; stop with Ctrl-C or SIGTERM", file=sys.stderr, flush=True)
        if dealer is None:
            await stop.wait()
            return 0
        play = asyncio.create_task(dealer.play(rounds))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait((play, stopped), return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not play.done():
            play.cancel()
            return 0
        try:
            stats = play.result()
        except (TableStopped, TimeoutError, aiomqtt.MqttError) as exc:
            why = str(exc) or "no new state from the table in time"
            print(f"tablectl sim: dealer: {why}", file=sys.stderr)
            return 1
        print(f"tablectl sim: dealer: {stats.rounds} rounds settled", file=sys.stderr, flush=True)
        return 0
    finally:
        await table.stop()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
