"""``tablectl monitor --broker URL``: a live terminal view of every table on the broker.

Alarms first and highlighted (halting ones in red), then tables whose event stream has a gap,
then offline tables, then the rest; as many rows as the terminal has, and a summary line for
the whole fleet. Credentials come from TABLECTL_MQTT_USERNAME / TABLECTL_MQTT_PASSWORD (a
monitor-* account is read-only by the broker's ACL).

Receiving and drawing are separate: messages are folded into the FleetView as they arrive
(cheap), and the screen is redrawn a few times a second from whatever the view holds, so a
burst of 5,000 messages a second never waits on rich.

Piped (into tee, a log file, a service manager's journal) there is no screen to redraw: the
monitor writes one line per table whose row changed, as it changes, and the whole view as a last
frame when it stops, SIGTERM included.

``--http HOST:PORT`` serves the same view as a web page (``controller/telemetry/web.py``) from the
same FleetView; ``--no-terminal`` leaves the terminal alone, for running the page as a service.
The page answers only requests that name it by IP address, localhost or an ``--http-allow-host``
name (the guard against DNS rebinding, see web.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import aiomqtt
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table as RichTable
from rich.text import Text

from controller.backoff import Backoff, BackoffPolicy
from controller.errors import TablectlError, short_reason
from controller.ids import is_host_name
from controller.telemetry import web
from controller.telemetry.broker import ENV_PASSWORD, ENV_USERNAME, BrokerSettings, parse_broker_url
from controller.telemetry.fleet import COLUMNS, FleetView, Row, Summary
from controller.telemetry.topics import ROOT
from devices.transport.mqtt_session import session

# Reconnecting to the broker: from half a second, doubling, at most every 10 s.
BROKER_RETRY = BackoffPolicy(initial_s=0.5, max_s=10.0, jitter=0.2)
# The longest a first connect can take before aiomqtt gives up on it (the TCP connect, then the
# CONNACK, each bounded by the client's timeouts).
FIRST_ATTEMPT_S = 30.0
MAX_QUEUED = 10_000  # messages received but not yet folded; past it paho drops (and counts) them


async def consume(
    settings: BrokerSettings,
    view: FleetView,
    *,
    topic: str = f"{ROOT}/#",
    say: Callable[[str], None] | None = None,
) -> None:
    """Fold every message of the tree into ``view``, reconnecting for ever (cancel to stop).

    Supervised: a message whose folding raises is counted and skipped, a failure of the connection
    is retried with backoff (``view.broker_problem`` says why meanwhile, and ``say`` gets one line
    each time the broker goes out of reach or comes back), and if the loop ever ends
    ``view.stopped`` says why, so that /healthz stops answering ok."""
    backoff = Backoff(BROKER_RETRY)
    try:
        while True:
            client = settings.client(f"tablectl-monitor-{os.getpid()}", max_queued_incoming=MAX_QUEUED)
            try:
                async with session(client):
                    backoff.succeeded()
                    await client.subscribe(topic, qos=1)
                    view.broker_up()
                    if say is not None:
                        say(f"monitor: connected to the broker at {settings.url}")
                    async for message in client.messages:
                        _fold(view, message)
            except aiomqtt.MqttError as e:  # the broker is away: said once, retried for ever
                problem = f"broker {settings.url} unreachable ({short_reason(e)}); retrying"
                if say is not None and problem != view.broker_problem:
                    say(f"monitor: {problem}")
                view.broker_down(problem)
            except Exception as e:  # a bug: reported through the view, and the loop goes on
                view.fold_errors += 1
                view.last_fold_error = type(e).__name__
            await asyncio.sleep(backoff.failed())  # try again, more slowly each time
    except BaseException as e:
        view.stopped = type(e).__name__
        raise


def _fold(view: FleetView, message: aiomqtt.Message) -> None:
    payload = message.payload
    try:
        view.ingest(message.topic.value, payload if isinstance(payload, bytes) else b"")
    except Exception as e:  # one message must not stop the view; never quoted (it may hold anything)
        view.fold_errors += 1
        view.last_fold_error = type(e).__name__


_STATUS_STYLE = {"unknown": "dim", "ok": "green", "warn": "yellow", "bad": "bold red"}
_ALARM_STYLE = {"halt": "bold white on red", "alarm": "bold yellow", "none": ""}


def _cell_style(r: Row, key: str) -> str:
    if key == "status":
        return _STATUS_STYLE[r.status_level]
    if key == "alarms":
        return _ALARM_STYLE[r.alarm_level]
    if key == "gaps_text":
        return "bold red" if r.gaps else "dim"
    return ""


# The columns that fit a narrow terminal (or a pipe, which rich draws 80 wide), most needed first:
# which table, whether it is up, where it is in its day, and what the floor must do.
NARROW = ("name", "status", "round", "shoe", "alarms")
MEDIUM = (*NARROW, "game", "devices")
MAX_NAME = 40  # a table name longer than this folds rather than squeezing every other column


def columns_for(width: int) -> list[tuple[str, str]]:
    """The columns of COLUMNS shown at ``width`` characters, in COLUMNS' order."""
    keep = set(NARROW if width < 100 else MEDIUM if width < 140 else (k for _, k in COLUMNS))
    return [(h, k) for h, k in COLUMNS if k in keep]


def render(view: FleetView, rows: int, width: int = 160) -> Group:
    summary = view.summary()
    shown = view.rows(max(rows, 1))
    grid = RichTable(expand=True, pad_edge=False)
    columns = columns_for(width)
    name_width = min(max((len(r.name) for r in shown), default=5), MAX_NAME)
    for header, key in columns:
        if key == "name":  # never cut: a table must be identifiable
            grid.add_column(header, min_width=name_width, overflow="fold")
        else:  # wrapped rather than cut
            grid.add_column(header, overflow="fold", ratio=3 if key == "alarms" else None)
    for r in shown:
        # Text, never str: rich would read a str as markup, and a table name or game is whatever a
        # publisher sent ("[/x]" would raise and stop the view; "[blink]" would style it).
        grid.add_row(*(Text(str(getattr(r, key)), style=_cell_style(r, key)) for _, key in columns))
    hidden = summary.tables - len(shown)
    footer = Text(f"... and {hidden} quieter tables" if hidden else "", style="dim")
    style = "bold white on red" if summary.broker_problem else "bold"
    return Group(Text(summary.text, style=style), grid, footer)


# How the view is shown: redrawn in place on a terminal, a line per change when piped, or not at
# all (--no-terminal: the web page only).
Mode = Literal["screen", "lines", "none"]


class ChangeLines:
    """The piped view: one line per table whose row changed since the last look, and one for the
    fleet when its counts or the broker's reachability changed. The seq alone moving (every event)
    is not a change worth a line: it is in the next line written for the table."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[object, ...]] = {}
        self._fleet: tuple[object, ...] | None = None

    def lines(self, view: FleetView, when: str) -> list[str]:
        out = []
        summary = view.summary()
        fleet = _fleet_key(summary)
        if fleet != self._fleet:
            self._fleet = fleet
            out.append(f"{when} fleet: {summary.text}")
        for row in view.rows():
            key = tuple(getattr(row, k) for k in Row.__slots__ if k not in ("seq", "urgency"))
            if self._rows.get(row.name) != key:
                self._rows[row.name] = key
                out.append(f"{when} {line_of(row)}")
        return out


def line_of(row: Row) -> str:
    """A row as one line of text: every column, each named by its header."""
    cells = (
        f"{header} {getattr(row, key) if getattr(row, key) != '' else '-'}" for header, key in COLUMNS[1:]
    )
    return f"{row.name}: " + ", ".join(cells)


def _fleet_key(summary: Summary) -> tuple[object, ...]:
    return (summary.tables, summary.online, summary.with_alarms, summary.stream_gaps, summary.broker_problem)


def _now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


async def _show(
    view: FleetView, refresh_s: float, duration_s: float | None, mode: Mode, stop: asyncio.Event
) -> None:
    """Sample the message rate and show the view every ``refresh_s`` until ``duration_s`` has passed
    or ``stop`` is set (SIGTERM); then show it once more, whole (the last frame)."""
    started = time.monotonic()
    console = Console()
    changes = ChangeLines()
    with contextlib.ExitStack() as stack:
        live = None
        if mode == "screen":
            live = stack.enter_context(Live(console=console, auto_refresh=False, screen=False))
        while not stop.is_set():
            left = None if duration_s is None else duration_s - (time.monotonic() - started)
            if left is not None and left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(refresh_s if left is None else min(refresh_s, left)):
                    await stop.wait()  # the redraw period, cut short by a stop
            view.sample_rate(time.monotonic())
            if live is not None:
                rows = shutil.get_terminal_size((120, 40)).lines - 7
                live.update(render(view, rows, console.width), refresh=True)
            elif mode == "lines":
                for line in changes.lines(view, _now_text()):
                    print(line, flush=True)
        if mode == "lines":  # the last frame: the whole view, as the screen would have shown it
            console.print(render(view, max(len(view.tables), 1), console.width))
            console.file.flush()


async def run(
    settings: BrokerSettings,
    refresh_s: float,
    duration_s: float | None,
    *,
    http: tuple[str, int] | None = None,
    terminal: bool = True,
    allow_hosts: Sequence[str] = (),
) -> FleetView:
    """Consume the broker into one FleetView; draw it in the terminal (redrawn in place, or a line
    per change when stdout is not a terminal) and/or serve it over HTTP, until ``duration_s`` or
    SIGTERM. Returns the view as it was when the monitor stopped."""
    view = FleetView()
    mode: Mode = "none" if not terminal else "screen" if sys.stdout.isatty() else "lines"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # A service manager stops with SIGTERM: stop as after --duration (the last frame, exit 0).
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    page = None
    if http is not None:
        try:
            page = await web.serve(view, *http, allow_hosts=allow_hosts)
        except OSError as e:  # address in use, not ours to bind, unknown host
            raise TablectlError(f"monitor: --http {_join(*http)}: {e.strerror or e}") from None
        host, port = page.address
        # Before the terminal view takes the screen; with port 0 this is how anyone learns the port.
        print(f"monitor: fleet page on http://{_join(host, port)}/ (no login)", file=sys.stderr, flush=True)
    attempted = asyncio.Event()  # the first connection attempt has succeeded or failed

    def say(line: str) -> None:
        _say(line)
        attempted.set()

    consumer = asyncio.create_task(consume(settings, view, say=say))
    try:
        await _show(view, refresh_s, duration_s, mode, stop)
        if not attempted.is_set() and not stop.is_set():
            # A short --duration must not end before the broker has answered once: the exit
            # status of a scripted check would then depend on how fast the connect was.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FIRST_ATTEMPT_S):
                    await attempted.wait()
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
        if page is not None:
            await page.close()
    return view


def _say(line: str) -> None:
    # stderr, so a redirected stdout keeps the view only; rich's Live prints it above the view.
    print(line, file=sys.stderr, flush=True)


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_http(value: str) -> tuple[str, int]:
    """HOST:PORT or [IPv6]:PORT. The host is required: the page binds only where it is told."""
    host, colon, port_text = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise TablectlError(
            f"monitor: --http {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8080 (port 0: any free port)"
        )
    return host, int(port_text)


def parse_allow_host(value: str) -> str:
    """A host name for --http-allow-host, as given (the page compares case-insensitively)."""
    if not is_host_name(value):  # a port, a URL, a space: a mistake, never a Host a browser sends
        raise TablectlError(
            f"monitor: --http-allow-host {value!r}: expected a host name such as ops-proxy.example, "
            "without port (IP addresses and localhost need no option)"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl monitor",
        description="Live view of all tables on the broker.",
        epilog="A broker that cannot be reached (down, wrong address, login or TLS refused) is said "
        "in one line on stderr and at the top of the view, and tried again with backoff (up to "
        "every 10 s) for as long as the monitor runs; it says so again when the broker is back. "
        "Piped (stdout not a terminal: tee, a log, a service manager) it writes a line per change as "
        "it happens and the whole view when it stops. SIGTERM stops it as --duration does. "
        "Exit status: 0; 1 when the broker was out of reach as the monitor stopped (--duration, "
        "SIGTERM), so a scripted check fails; 2 for a usage error; 130 after Ctrl-C.",
    )
    p.add_argument("--broker", required=True, help="mqtt://host:port or mqtts://host:port")
    p.add_argument("--ca-file", type=Path, help="CA certificate for an mqtts:// broker")
    p.add_argument("--refresh", type=float, default=0.5, help="seconds between redraws (default 0.5)")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="also serve the fleet view as a web page there, e.g. 127.0.0.1:8080 (default: off). It has "
        "no login and shows what the broker publishes to monitors: bind it to localhost or behind the "
        "ops network's proxy",
    )
    p.add_argument(
        "--http-allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="with --http: also answer requests for this host name, e.g. the ops proxy's name or this "
        "machine's DNS name (repeatable). IP addresses and localhost are always answered; any other "
        "name gets 421, so that a web site cannot point its own name at the page (DNS rebinding)",
    )
    p.add_argument(
        "--no-terminal",
        action="store_true",
        help="do not draw the terminal view (with --http: serve the page only, e.g. as a service)",
    )
    return p


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    try:
        tls, host, port = parse_broker_url(args.broker)
        if args.ca_file is not None and not args.ca_file.is_file():
            raise TablectlError(f"monitor: --ca-file {args.ca_file}: no such file")
        http = parse_http(args.http) if args.http is not None else None
        if args.no_terminal and http is None:
            raise TablectlError("monitor: --no-terminal needs --http (there would be nothing to show)")
        allow_hosts = [parse_allow_host(name) for name in args.http_allow_host]
        if allow_hosts and http is None:
            raise TablectlError("monitor: --http-allow-host needs --http (there is no page to answer for)")
        username, password = os.environ.get(ENV_USERNAME), os.environ.get(ENV_PASSWORD)
        settings = BrokerSettings(host, port, tls, args.ca_file, username, password)
        terminal = not args.no_terminal
        view = asyncio.run(
            run(settings, args.refresh, args.duration, http=http, terminal=terminal, allow_hosts=allow_hosts)
        )
    except TablectlError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # piped into a reader that has gone (`| head`): nothing more to show
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (so the exit's flush cannot fail again)
        return 0
    if not view.broker_connected:
        problem = view.broker_problem or f"broker {settings.url} not reached before the monitor stopped"
        print(f"monitor: {problem.removesuffix('; retrying')}", file=sys.stderr)
        return 1
    return 0
