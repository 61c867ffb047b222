"""``tablectl monitor --broker URL``: a live terminal view of every table on the broker.

Alarms first and highlighted (halting ones in red), then tables whose event stream has a gap,
then offline tables, then the rest; as many rows as the terminal has, and a summary line for
the whole fleet. Credentials come from TABLECTL_MQTT_USERNAME / TABLECTL_MQTT_PASSWORD (a
monitor-* account is read-only by the broker's ACL).

Receiving and drawing are separate: messages are folded into the FleetView as they arrive
(cheap), and the screen is redrawn a few times a second from whatever the view holds, so a
burst of 5,000 messages a second never waits on rich.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import aiomqtt
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table as RichTable
from rich.text import Text

from controller.errors import TablectlError
from controller.telemetry.broker import ENV_PASSWORD, ENV_USERNAME, BrokerSettings, parse_broker_url
from controller.telemetry.fleet import FleetView, TableView
from controller.telemetry.topics import ROOT


async def consume(settings: BrokerSettings, view: FleetView, *, topic: str = f"{ROOT}/#") -> None:
    """Fold every message of the tree into ``view``, reconnecting for ever (cancel to stop)."""
    delay = 0.5
    while True:
        client = settings.client(f"tablectl-monitor-{os.getpid()}", max_queued_incoming=0)
        try:
            async with client:
                delay = 0.5
                await client.subscribe(topic, qos=1)
                async for message in client.messages:
                    payload = message.payload
                    view.ingest(message.topic.value, payload if isinstance(payload, bytes) else b"")
        except aiomqtt.MqttError:
            await asyncio.sleep(delay)  # the broker is away: try again, more slowly each time
            delay = min(delay * 2, 10.0)


def _shoe(view: TableView) -> str:
    s = view.state
    if not s:
        return ""
    cover = " cover" if s.get("cover_card_reached") else ""
    return f"{s.get('batch_in_shoe') or '-'} {s.get('cards_in_shoe', 0)} left{cover}"


def _status(view: TableView) -> Text:
    if view.online is None:
        return Text("?", style="dim")
    if view.online:
        return Text("online", style="green")
    return Text("offline" if view.clean_exit else "LOST", style="yellow" if view.clean_exit else "bold red")


def render(view: FleetView, rows: int, rate: float) -> Group:
    tables = view.ordered()
    online = sum(1 for t in tables if t.online)
    alarmed = sum(1 for t in tables if t.alarms)
    gaps = sum(t.gaps for t in tables)
    summary = Text(
        f"{len(tables)} tables, {online} online, {alarmed} with alarms, {gaps} stream gaps; "
        f"{view.messages} messages ({rate:,.0f}/s)",
        style="bold",
    )
    grid = RichTable(expand=True, pad_edge=False)
    for name in ("table", "status", "game", "round", "shoe", "alarms", "devices", "seq", "gaps"):
        grid.add_column(name, overflow="ellipsis", no_wrap=True)
    for t in tables[: max(rows, 1)]:
        alarm = "; ".join(f"{a.get('section')}: {a.get('floor_action')}" for a in t.alarms)
        style = "bold white on red" if t.halted else ("bold yellow" if t.alarms else "")
        bad = {n: h for n, h in t.devices.items() if h not in ("online", "ok")}
        devices = ", ".join(f"{n}={h}" for n, h in sorted(bad.items())) or f"{len(t.devices)} ok"
        grid.add_row(
            f"{t.site}/{t.table}",
            _status(t),
            t.game,
            str(t.state.get("round", "")),
            _shoe(t),
            Text(alarm, style=style),
            devices,
            str(t.last_seq),
            Text(f"{t.gaps} ({t.missing} missing)", style="bold red") if t.gaps else Text("0", style="dim"),
        )
    hidden = len(tables) - min(len(tables), max(rows, 1))
    footer = Text(f"... and {hidden} quieter tables" if hidden else "", style="dim")
    return Group(summary, grid, footer)


async def run(settings: BrokerSettings, refresh_s: float, duration_s: float | None) -> None:
    view = FleetView()
    console = Console()
    consumer = asyncio.create_task(consume(settings, view))
    try:
        with Live(console=console, auto_refresh=False, screen=False) as live:
            last_count, last_t = 0, time.monotonic()
            started = last_t
            while duration_s is None or time.monotonic() - started < duration_s:
                await asyncio.sleep(refresh_s)  # the redraw period
                now = time.monotonic()
                rate = (view.messages - last_count) / max(now - last_t, 1e-9)
                last_count, last_t = view.messages, now
                rows = shutil.get_terminal_size((120, 40)).lines - 7
                live.update(render(view, rows, rate), refresh=True)
    finally:
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl monitor", description="Live view of all tables on the broker.")
    p.add_argument("--broker", required=True, help="mqtt://host:port or mqtts://host:port")
    p.add_argument("--ca-file", type=Path, help="CA certificate for an mqtts:// broker")
    p.add_argument("--refresh", type=float, default=0.5, help="seconds between redraws (default 0.5)")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    return p


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    try:
        tls, host, port = parse_broker_url(args.broker)
        if args.ca_file is not None and not args.ca_file.is_file():
            raise TablectlError(f"monitor: --ca-file {args.ca_file}: no such file")
        username, password = os.environ.get(ENV_USERNAME), os.environ.get(ENV_PASSWORD)
        settings = BrokerSettings(host, port, tls, args.ca_file, username, password)
        asyncio.run(run(settings, args.refresh, args.duration))
    except TablectlError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
