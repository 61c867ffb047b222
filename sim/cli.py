"""``tablectl sim --config config/tables/<table>.toml [--seed N] [--timing-seed N]
[--control HOST:PORT] [--dealer [--rounds N] [--boxes N] [--broker URL] [--pace [SECONDS]]]``

Starts the simulated devices of one table, prints one line per device (name, kind, transport,
where it listens, Modbus device id) and runs until SIGINT or SIGTERM. With ``--timing-seed`` the
devices keep time of their own, varied by the seed (sim/timing.py). With ``--dealer`` a virtual
dealer plays rounds at the table through those devices, reading the table's public MQTT state
(sim/wire_dealer.py); it exits 0 once N rounds have settled. If the table stops the dealer it says
why in one line and the devices keep serving until SIGINT or SIGTERM (then exit 1): the devices
are the table's, and a table that lost them would alarm for them too. ``--pace`` has it take
about that long over each action, as a person would. With
``--control`` a test drives the devices itself over a small HTTP/JSON port (sim/control.py,
docs/simulators.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import pathlib
import signal
import sys

import aiomqtt
import structlog

from controller import logs
from controller.errors import TablectlError
from devices.config import add_relocation_arguments, relocated
from sim.actions import ActionRefused
from sim.control import ControlPort, parse_listen
from sim.mqtt_link import MqttLink
from sim.table import SimTable
from sim.table_file import read_table_file
from sim.wire_dealer import TableStopped, WireDealer

STILL_SERVING = "tablectl sim: the simulated devices keep serving; stop with Ctrl-C or SIGTERM"
DEFAULT_PACE_S = 1.5  # about a person's time over a card or a key
MAX_PACE_S = 60.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl sim", description="Run the simulated devices of one table.")
    p.add_argument("--config", required=True, type=pathlib.Path, help="config/tables/<table>.toml")
    add_relocation_arguments(p)
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the shuffles (tests only; without it the OS CSPRNG shuffles)",
    )
    p.add_argument(
        "--timing-seed",
        type=int,
        default=None,
        help="vary the devices' timing by this seed (poll phases, reply latencies, the shuffler's"
        " cycle and batch return, the reader's and keypad's latencies; docs/simulators.md)",
    )
    p.add_argument("--dealer", action="store_true", help="a virtual dealer plays the table")
    p.add_argument(
        "--pace",
        type=float,
        nargs="?",
        const=DEFAULT_PACE_S,
        default=0.0,
        metavar="SECONDS",
        help=f"with --dealer: take about this long over each action, as a person would"
        f" (default {DEFAULT_PACE_S:g} s), so that the console can be watched",
    )
    p.add_argument("--rounds", type=int, default=10, help="with --dealer: rounds to settle, then exit 0")
    p.add_argument("--boxes", type=int, default=2, choices=range(1, 7), metavar="1-6", help="with --dealer")
    p.add_argument(
        "--broker",
        default="mqtt://127.0.0.1:1883",
        help="with --dealer: the broker `tablectl run` publishes the table's state to",
    )
    p.add_argument(
        "--control",
        default=None,
        metavar="HOST:PORT",
        help="serve the control port here (docs/simulators.md); loopback unless a host is named",
    )
    return p


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:  # as passed on by a dispatcher's argparse.REMAINDER
        argv = argv[1:]
    args = _parser().parse_args(argv)
    if not structlog.is_configured():
        # The appliance's JSON lines, libraries' logging included (pymodbus's frames redacted: they
        # hold the devices' cards), on stderr so that stdout carries only the device listing.
        logs.configure(logging.WARNING, sys.stderr)
    if args.dealer and args.rounds < 1:
        print("tablectl sim: --rounds: must be 1 or more", file=sys.stderr)
        return 2
    if not 0 <= args.pace <= MAX_PACE_S:
        print(f"tablectl sim: --pace: must be 0 to {MAX_PACE_S:g} seconds", file=sys.stderr)
        return 2
    try:
        config = read_table_file(args.config)
        if args.port_base is not None or args.run_dir is not None:
            devices = relocated(
                config.devices, config.table_id, port_base=args.port_base, run_dir=args.run_dir
            )
            config = dataclasses.replace(config, devices=devices)
        table = SimTable.from_config(config, seed=args.seed, at_configured=True, timing_seed=args.timing_seed)
        control = parse_listen(args.control) if args.control is not None else None
        link = (
            MqttLink(args.broker, config.site, config.table_id, pace_s=args.pace, pace_seed=args.seed)
            if args.dealer
            else None
        )
    except (TablectlError, ValueError) as exc:
        print(f"tablectl sim: {exc}", file=sys.stderr)
        return 2
    dealer = None
    if link is not None:
        dealer = WireDealer(table, link, boxes=args.boxes, side_wagers=config.side_wagers)
    try:
        return asyncio.run(_serve(table, dealer, link, args.rounds, control))
    except TablectlError as exc:
        print(f"tablectl sim: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tablectl sim: cannot start the simulators: {exc}", file=sys.stderr)
        return 1


async def _serve(
    table: SimTable,
    dealer: WireDealer | None,
    link: MqttLink | None,
    rounds: int,
    control: tuple[str, int] | None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await table.start()
    port = ControlPort(table)
    try:
        for line in table.listing():
            print(line, flush=True)
        if control is not None:
            where = await port.start(*control)
            print(f"control  at=http://{where[0]}:{where[1]}/", flush=True)
        print("tablectl sim: running; stop with Ctrl-C or SIGTERM", file=sys.stderr, flush=True)
        if dealer is None or link is None:
            await stop.wait()
            return 0
        return await _deal(dealer, link, rounds, stop)
    finally:
        await port.stop()
        await table.stop()


async def _deal(dealer: WireDealer, link: MqttLink, rounds: int, stop: asyncio.Event) -> int:
    """Exit 0 once ``rounds`` have settled (or on a signal), 1 with one line if the table stopped
    the dealer or said nothing for too long."""

    async def play() -> int:
        async with link:
            await dealer.open_table()
            stats = await dealer.play(rounds)
        return stats.rounds

    playing = asyncio.create_task(play())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait((playing, stopped), return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not playing.done():
        playing.cancel()
        await asyncio.gather(playing, return_exceptions=True)
        return 0
    try:
        settled = playing.result()
    except (TableStopped, ActionRefused, TimeoutError, aiomqtt.MqttError) as exc:
        why = str(exc) or "no new state from the table in time"
        # The devices are the table's, not the dealer's: a dealer that stops leaves them serving
        # (a table that lost its devices would alarm for them too), until a signal ends the process.
        print(f"tablectl sim: dealer: {why}", file=sys.stderr, flush=True)
        print(STILL_SERVING, file=sys.stderr, flush=True)
        await stop.wait()
        return 1
    print(f"tablectl sim: dealer: {settled} rounds settled", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
