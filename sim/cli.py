"""``tablectl sim --config config/tables/<table>.toml [--seed N]``

Starts the simulated devices of one table, prints one line per device (name, kind, transport,
where it listens, Modbus device id) and runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import signal
import sys

import structlog

from controller.errors import TablectlError
from controller.supervisor.logs import route_stdlib_logging
from sim.table import SimTable


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl sim", description="Run the simulated devices of one table.")
    p.add_argument("--config", required=True, type=pathlib.Path, help="config/tables/<table>.toml")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the shuffles (tests only; without it the OS CSPRNG shuffles)",
    )
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
    try:
        table = SimTable.from_file(args.config, seed=args.seed)
    except TablectlError as exc:
        print(f"tablectl sim: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(table))
    except TablectlError as exc:
        print(f"tablectl sim: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tablectl sim: cannot start the simulators: {exc}", file=sys.stderr)
        return 1


async def _serve(table: SimTable) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await table.start()
    try:
        for line in table.listing():
            print(line, flush=True)
        print("tablectl sim: running; stop with Ctrl-C or SIGTERM", file=sys.stderr, flush=True)
        await stop.wait()
    finally:
        await table.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
