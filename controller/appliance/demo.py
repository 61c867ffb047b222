"""``tablectl demo [--game G] [--rounds N] [--no-ui] [--seed S] [--journal PATH] [--broker URL]``

One command, one machine: the simulated devices on real sockets and ptys, the controller talking
to them over the wire, a broker for telemetry, the virtual dealer of ``tablectl sim --dealer``
playing (controller/supervisor/rig.py composes them), and a live terminal view. The broker is
Debian's mosquitto, started by the demo on a free port of 127.0.0.1 with its own config (never a
broker already running on the machine; ``bin/tablectl`` installs the package when it is missing, as
``bin/test`` does); ``--broker URL`` publishes to a broker of yours instead. Ctrl-C, SIGTERM and
SIGHUP stop everything cleanly (the table says it is offline, then disconnects; the journal is
closed). ``--no-ui`` plays N rounds headless and prints a JSON summary; with stdout not a terminal
(``| tee``, a log file) the view is one line per settled round instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from controller import logs
from controller.errors import ConfigError, TablectlError
from controller.games import GameId, game_ids
from controller.journal import verify_journal
from controller.shipped import table_file
from controller.supervisor.rig import Rig, virtual_table

BrokerKind = Literal["mosquitto", "external"]
MOSQUITTO_READY_S = 10.0  # a failure guard: mosquitto says it is running in milliseconds
# Each stops the demo the same clean way: the farewell on the broker, the journal closed. SIGHUP is
# a closed terminal; without a handler it would end the process as the broker's Last Will does.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

SUMMARY_FIELDS = """\
the JSON summary (--no-ui):
  game, table          the game and the example table's id
  rounds, boxes        rounds played to settlement; boxes the dealer plays
  cards_drawn          cards drawn from the shoe (DJ Wild: 0, dealt from the hand)
  keys_pressed         keypad keys the dealer pressed
  shoes                batches brought into play from the shuffler
  stub_counts          DJ Wild stubs put into the stub counter
  journal_records      records in the journal (its last sequence number)
  alarms_open          alarms still open at the end
  devices              each device's health at the end
  broker, broker_kind  where telemetry went: mosquitto (the demo's own) or external (--broker)
  seconds              real seconds the run took
  table_hours          hours on the table's virtual clock
  journal_verified     the journal's hash chain verified from its first record
  interrupted          true when Ctrl-C, SIGTERM or SIGHUP stopped the demo before its rounds
  house                per wager: settled (count), staked (table units; a sensed spot is 10),
                       house_net (what the players lost minus what they won), house_edge
                       (house_net / staked) and house_edge_stderr (its standard error, as
                       tablectl simulate reports it); empty for DJ Wild, whose hands the dealer pays
"""


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a whole number of rounds, 1 or more")
    return n


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl demo", description="A table played by a virtual dealer.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=SUMMARY_FIELDS,
    )  # fmt: skip
    p.add_argument("--game", default=GameId.DOWN_UNDER.value, choices=[str(g) for g in game_ids()])
    p.add_argument(
        "--rounds",
        type=_positive,
        default=None,
        help="rounds, 1 or more (default: until Ctrl-C; 200 headless)",
    )
    p.add_argument("--boxes", type=int, default=6, choices=range(1, 7), metavar="1-6")
    p.add_argument("--no-ui", action="store_true", help="no terminal view; print a JSON summary at the end")
    p.add_argument("--seed", type=int, default=None, help="seed shuffles and dealer (repeatable)")
    p.add_argument(
        "--journal", type=Path, default=None,
        help="a new journal file to keep (default: a temporary one); the demo starts a fresh table",
    )  # fmt: skip
    p.add_argument("--pace", type=float, default=0.15, help="real seconds per dealer action in the view")
    p.add_argument(
        "--console",
        default=None,
        metavar="HOST:PORT",
        help="also serve the table console here (needs --users; see docs/console.md)",
    )
    p.add_argument("--users", type=Path, default=None, help="the console's users file (tablectl users add)")
    p.add_argument(
        "--broker",
        default=None,
        help="publish to this mqtt:// or mqtts:// broker instead of the demo's own mosquitto",
    )
    return p


@contextlib.contextmanager
def demo_broker(args: argparse.Namespace, workdir: Path) -> Iterator[tuple[str, BrokerKind]]:
    """The broker telemetry publishes to and its kind: --broker, else our own (see ``broker``)."""
    if args.broker:
        _reachable(args.broker)
        yield args.broker, "external"
        return
    with broker(workdir) as port:
        yield f"mqtt://127.0.0.1:{port}", "mosquitto"


BROKER_CHECK_S = 5.0


def _reachable(url: str) -> None:
    """A broker the demo cannot reach is an error before the table starts (exit 2, one line): the
    demo exists to show the table's telemetry, and a warning in the middle of the view is missed."""
    from controller.telemetry.broker import parse_broker_url

    _, host, port = parse_broker_url(url)
    try:
        socket.create_connection((host, port), timeout=BROKER_CHECK_S).close()
    except OSError as e:
        raise TablectlError(f"--broker {url}: cannot connect to {host}:{port} ({e.strerror or e})") from None


def _telemetry(args: argparse.Namespace, journal: Path, url: str) -> tuple[Any, Any]:
    from controller.appliance.wiring import build_telemetry
    from controller.supervisor.config import load_table_config

    return build_telemetry(load_table_config(table_file(args.game)), url, journal)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mosquitto() -> str | None:
    sbin = Path("/usr/sbin/mosquitto")
    return shutil.which("mosquitto") or (str(sbin) if sbin.exists() else None)


@contextlib.contextmanager
def broker(workdir: Path, port: int = 0) -> Iterator[int]:
    """Debian's mosquitto on ``port`` of 127.0.0.1 (0: a free one) with its own config in
    ``workdir``, once its log says it is running; stopped on exit. ConfigError in one line when it
    is not installed or does not start (the port taken). The demo's broker and `tablectl broker`."""
    binary = _mosquitto()
    if binary is None:
        raise ConfigError(
            "the broker is Debian's mosquitto, which is not installed "
            "(apt-get install mosquitto, or bin/tablectl demo installs it), or give --broker URL"
        )
    port = port or _free_port()
    conf = workdir / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\n",
        encoding="utf-8",
    )
    # Its own process group: Ctrl-C on a terminal signals the whole foreground group, and a broker
    # that died with the demo would cut the table's farewell off (and leave the clients' lost
    # connections to be reported). The demo stops it itself, after the farewell. Its log is read
    # until it says it is running.
    proc = subprocess.Popen(
        [binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, process_group=0
    )
    try:
        wait_running(proc)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_running(proc: subprocess.Popen[bytes], within_s: float = MOSQUITTO_READY_S) -> None:
    """Drain mosquitto's log in a thread (a full pipe would stall it) until it says it is running:
    its clients then connect at the first try, with no retry to wait out. The test suite's brokers
    start the same way (tests/mosquitto_fixtures.py)."""
    assert proc.stderr is not None
    stderr = proc.stderr
    running = threading.Event()
    log: list[bytes] = []

    def drain() -> None:
        for line in iter(stderr.readline, b""):
            if len(log) < 50:
                log.append(line)
            if b" running" in line:
                running.set()
        running.set()  # exited: let the waiter look

    threading.Thread(target=drain, daemon=True, name="mosquitto-log").start()
    if not running.wait(within_s) or proc.poll() is not None:
        last = b"".join(log).decode(errors="replace").strip().splitlines()[-1:] or ["no log"]
        raise ConfigError(f"mosquitto did not start: {last[0]}")


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    # Until the event loop takes the signals over (STOP_SIGNALS), SIGTERM and SIGHUP unwind like
    # Ctrl-C, so the broker started below is stopped too.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    if args.journal is not None and args.journal.exists():
        # The virtual dealer opens a fresh table; an old journal's table would be mid-day.
        parser.error(f"--journal {args.journal}: already exists; the demo writes a new journal")
    # Logs would tear the terminal view; headless they go to stderr so stdout is the JSON only.
    level = logging.WARNING if args.no_ui else logging.CRITICAL
    logs.configure(level, stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="tablectl-demo-") as tmp:
        journal = args.journal or Path(tmp) / "journal.db"
        try:
            with demo_broker(args, Path(tmp)) as (broker_url, broker_kind):
                if args.no_ui:
                    summary = asyncio.run(_headless(args, journal, broker_url, broker_kind))
                    print(json.dumps(summary), flush=True)
                    return 0 if summary["journal_verified"] else 1
                if not sys.stdout.isatty():
                    return asyncio.run(_with_lines(args, journal, broker_url))
                return asyncio.run(_with_view(args, journal, broker_url))
        except TablectlError as e:
            print(f"tablectl demo: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop_on_signals() -> asyncio.Event:
    """An event STOP_SIGNALS set, for the rest of the run: taken over before the table is set up,
    so a signal at any point ends in the same clean stop, and a second one changes nothing."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _play(
    rig: Rig, rounds: int | None, stop: asyncio.Event, on_round: Callable[[], None] = lambda: None
) -> bool:
    """Open the table and play ``rounds`` (None: until stopped) or until ``stop`` is set; True
    when a signal cut the play short. The caller's ``async with`` then stops the table."""

    async def play() -> None:
        await rig.dealer.open_table()
        played = 0
        while rounds is None or played < rounds:
            await rig.dealer.play_round()
            played += 1
            on_round()

    player, stopper = asyncio.create_task(play()), asyncio.create_task(stop.wait())
    await asyncio.wait([player, stopper], return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    player.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await player  # the dealer's own failure (TableStopped) is raised here
    return stop.is_set()


@contextlib.asynccontextmanager
async def _console(args: argparse.Namespace, rig: Rig) -> AsyncIterator[None]:
    """The table console in front of the demo's table, when ``--console`` asks for it."""
    if args.console is None and args.users is None:
        yield
        return
    from controller.console.process import ConsoleProcess
    from controller.console.users import load_users
    from controller.server_settings import DEFAULT_HOST, DEFAULT_PORT, ConsoleSettings, parse_listen

    if args.users is None:
        raise ConfigError("--console needs --users FILE (tablectl users add NAME --role floor --file FILE)")
    host, port = parse_listen(args.console or f"{DEFAULT_HOST}:{DEFAULT_PORT}", "--console")
    load_users(args.users)  # a missing or broken file: one line, before anything starts
    console = ConsoleProcess(rig.supervisor, ConsoleSettings(host, port, args.users), logging.INFO)
    bound_host, bound_port = await console.start()
    # Said where a user looks (stderr: stdout may be the JSON summary): the demo's logs are quiet.
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(
        f"tablectl demo: table console at http://{shown}:{bound_port}/ (dealer display),"
        f" http://{shown}:{bound_port}/floor (floor console; sign in as a user of {args.users})",
        file=sys.stderr,
        flush=True,
    )
    try:
        yield
    finally:
        await console.stop()


@contextlib.asynccontextmanager
async def _demo_table(
    args: argparse.Namespace, journal: Path, url: str, pace_s: float = 0.0
) -> AsyncIterator[Rig]:
    """The demo's table for every view: the virtual table with its telemetry on ``url`` and, when
    asked for, the console in front of it."""
    telemetry, forwarder = _telemetry(args, journal, url)
    async with (
        virtual_table(
            table_file(args.game),
            journal,
            seed=args.seed,
            boxes=args.boxes,
            pace_s=pace_s,
            telemetry=telemetry,
            wall_start=time.time(),
        ) as rig,
        _console(args, rig),
    ):
        forwarder.supervisor = rig.supervisor
        yield rig


async def _headless(args: argparse.Namespace, journal: Path, url: str, kind: BrokerKind) -> dict[str, Any]:
    stop = _stop_on_signals()
    rounds = 200 if args.rounds is None else args.rounds
    began = time.perf_counter()
    async with _demo_table(args, journal, url) as rig:
        interrupted = await _play(rig, rounds, stop)
        summary = _summary(rig, time.perf_counter() - began, url, kind)
    summary["interrupted"] = interrupted
    result = verify_journal(journal)
    summary["journal_verified"] = result.ok
    summary["house"] = house_result(journal)
    return summary


def house_result(journal: Path) -> dict[str, dict[str, float | int]]:
    """Per wager, from the journal's settled rounds: how many were settled, the total stake, the
    house's net (what the players lost, minus what they won), that net over the stake and its
    standard error (the simulator's ratio estimate over rounds, ``WagerStats``: one way to say how
    sure an edge is).

    Amounts are in table units (a sensed spot stands for UNIT_BET of them). DJ Wild hands are paid
    by the dealer at the table, not settled by the controller, so a DJ Wild demo has no entries."""
    from controller.journal import Journal
    from controller.simulate import WagerStats

    count: dict[str, int] = {}
    stats: dict[str, WagerStats] = {}
    with Journal.open(journal, create=False, readonly=True) as j:
        for record in j.records():
            if record.kind != "round_settled":
                continue
            rnd: dict[str, tuple[int, int]] = {}  # wager -> (stake, players' net in half units)
            for s in record.payload.get("settlements", []):
                wager, stake = s["wager"], int(s["stake"])
                count[wager] = count.get(wager, 0) + 1
                was = rnd.get(wager, (0, 0))
                rnd[wager] = (was[0] + stake, was[1] + stake * int(s["halves"]))
            for wager, (stake, net_halves) in rnd.items():
                stats.setdefault(wager, WagerStats()).add(stake, net_halves)
    return {
        w: {
            "settled": count[w],
            "staked": float(stats[w].wagered),
            "house_net": _figure(-stats[w].net),
            "house_edge": _figure(round(stats[w].edge, 4)),
            "house_edge_stderr": _figure(round(stats[w].edge_stderr, 4)),
        }
        for w in sorted(count)
    }


def _figure(x: float) -> float:
    """``x`` with a negative zero made plain zero: a wager that broke even (or an edge that rounds
    to nothing) reads as -0.0 otherwise, which a person takes for a loss. -0.0 + 0.0 is +0.0."""
    return x + 0.0


def _summary(rig: Rig, seconds: float, url: str, kind: BrokerKind) -> dict[str, Any]:
    sup, stats = rig.supervisor, rig.dealer.stats
    snap = sup.snapshot()
    return {
        "game": rig.config.options.game.value,
        "table": rig.config.table_id,
        "rounds": stats.rounds,
        "boxes": rig.dealer.boxes,
        "cards_drawn": stats.cards_drawn,
        "keys_pressed": stats.keys_pressed,
        "shoes": stats.shoes,
        "stub_counts": stats.stub_counts,
        "journal_records": sup.jt.journal.last_seq if sup.jt else 0,
        "alarms_open": len(snap["alarms"]),
        "devices": snap["devices"],
        "broker": url,
        "broker_kind": kind,
        "seconds": round(seconds, 3),
        "table_hours": round(rig.clock.now() / 3600, 2),
    }


async def _with_view(args: argparse.Namespace, journal: Path, url: str) -> int:
    from rich.live import Live

    from controller.appliance.view import LiveView

    stop = _stop_on_signals()
    async with _demo_table(args, journal, url, pace_s=max(0.0, args.pace)) as rig:
        view = LiveView(rig, url)
        with Live(view.render(), refresh_per_second=8, screen=False) as live:

            async def refresh() -> None:
                while True:
                    live.update(view.render())
                    await asyncio.sleep(0.125)

            refresher = asyncio.create_task(refresh())
            try:
                interrupted = await _play(rig, args.rounds, stop)
            finally:
                refresher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await refresher
            live.update(view.render())
        rounds = rig.dealer.stats.rounds
    # Below the last frame, once the table has said it is offline and closed its journal.
    print(closing_line(interrupted, rounds, args.journal), flush=True)
    return 0


def closing_line(interrupted: bool, rounds: int, journal: Path | None) -> str:
    kept = f"; journal kept at {journal}" if journal is not None else ""
    return f"tablectl demo: {'stopped' if interrupted else 'done'} after {rounds} rounds{kept}"


async def _with_lines(args: argparse.Namespace, journal: Path, url: str) -> int:
    """The view for a pipe or a file: a line per settled round as it settles, flushed at once
    (a terminal view would draw only at the end, if at all), and a last line on stopping."""
    from controller.appliance.view import RoundFeed, round_line

    stop = _stop_on_signals()
    async with _demo_table(args, journal, url, pace_s=max(0.0, args.pace)) as rig:
        feed = RoundFeed(rig.supervisor)

        def say(line: str) -> None:
            try:
                print(line, flush=True)
            except BrokenPipeError:
                # The reader is gone (`| head`, or tee ended by the same Ctrl-C): stop as for a
                # closed terminal, and send what is left nowhere, so exiting raises nothing more.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                stop.set()

        def said() -> None:
            for settled in feed.new():
                say(round_line(settled))

        title = f"{rig.config.table_id} {rig.config.options.spec.title}"
        say(f"tablectl demo: {title}, telemetry to {url}; Ctrl-C stops")
        if rig.config.options.game.value != "dj-wild":
            say(
                "tablectl demo: a line per settled round; box 3.1 is box 3's first hand after a split;"
                " side wagers as the players won or lost them; amounts in table units (a sensed spot is 10)"
            )
        interrupted = await _play(rig, args.rounds, stop, said)
        said()
        rounds = rig.dealer.stats.rounds
    say(closing_line(interrupted, rounds, args.journal))
    return 0
