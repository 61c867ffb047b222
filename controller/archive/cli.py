"""``tablectl archive`` (run a worker), ``archive verify`` and ``archive report``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller import logs
from controller.bounded import InputRefused, read_text
from controller.errors import TablectlError
from controller.telemetry.topics import TableTopics, check_level

if TYPE_CHECKING:
    from controller.archive.ingest import Ingest

_DB_HELP = "PostgreSQL URL, postgresql://user@host:port/db (a password from PGPASSWORD or ~/.pgpass)"


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl archive",
        description="Archive every table's events in PostgreSQL (also: archive verify, archive report).",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--broker", help="mqtt://host:port or mqtts://host:port (mosquitto: one site)")
    where.add_argument(
        "--nats",
        help="nats://host:port,nats://host:port,... every node of a JetStream cluster (docs/scale-out.md)",
    )
    p.add_argument("--db", required=True, help=_DB_HELP)
    p.add_argument("--group", default="archive", help="the shared subscription's group (default archive)")
    p.add_argument("--client-id", help="fixed per worker: the broker keeps its queue under this id")
    p.add_argument("--ca-file", help="CA certificate for an mqtts:// broker or tls:// NATS servers")
    p.add_argument(
        "--setup",
        action="store_true",
        help="--nats: make the stream and the workers' consumer, then exit (as the admin user: "
        "TABLECTL_NATS_USERNAME=admin and TABLECTL_NATS_PASSWORD)",
    )
    p.add_argument(
        "--gap-grace", type=float, default=10.0, help="seconds before a gap is asked for (default 10)"
    )
    p.add_argument(
        "--ack-wait",
        type=float,
        default=30.0,
        help="--nats: seconds before a message a dead worker took goes to another (default 30)",
    )
    p.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="SITE/TABLE",
        help="a table whose events are archived (repeat; added to known_tables, as an operator may)",
    )
    p.add_argument(
        "--tables-from",
        metavar="PASSWORD_FILE",
        help="the broker's mosquitto password file: every account named SITE/TABLE is a known table",
    )
    p.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve /metrics (Prometheus text format: ingest rate, lag) and /healthz here",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def known_tables(names: Sequence[str], password_file: str | None) -> list[tuple[str, str]]:
    """(site, table) from ``--table`` values and the appliance accounts of a password file; a name
    that is not two topic levels (or is the archive's) is refused in one line."""
    found: list[tuple[str, str]] = []
    lines: list[str] = list(names)
    if password_file is not None:
        path = Path(password_file)
        try:
            text = read_text(path)
        except InputRefused as e:
            raise TablectlError(f"archive: --tables-from {path}: {e}") from None
        users = [line.split(":", 1)[0] for line in text.splitlines() if ":" in line]
        lines += [u for u in users if "/" in u]
    for name in lines:
        site, _, table = name.partition("/")
        try:
            TableTopics(check_level("site", site), check_level("table id", table))
        except TablectlError as e:
            raise TablectlError(f"archive: table {ascii(name)[1:-1][:80]}: {e}") from None
        found.append((site, table))
    return found


def _verify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl archive verify",
        description="Exit 0 when the journal agrees with the archive, 1 naming the first record that "
        "does not (a journal cut short or damaged too), 2 when it cannot run. For a contested record "
        "(two copies kept in quarantine) it says which one the journal holds.",
    )
    p.add_argument("--db", required=True, help=_DB_HELP)
    p.add_argument("--journal", required=True, help="the table's journal file")
    p.add_argument("--site", help="the table's site (default: the one site the archive has it under)")
    p.add_argument("--table", help="the table id (default: from the journal's table_opened record)")
    return p


def _accounts_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl archive nats-accounts",
        description="Print the NATS cluster's accounts block (config/nats/node.conf includes it): "
        "each user's permissions by its name (SITE/TABLE, archive-*, floor-*, monitor-*, admin).",
    )
    p.add_argument("--passwords", required=True, help="a file of NAME:PASSWORD lines, one per user")
    return p


def _nats_accounts(path: str) -> int:
    from controller.archive.nats_accounts import render

    try:
        text = read_text(Path(path))
    except InputRefused as e:
        raise TablectlError(f"archive nats-accounts: {path}: {e}") from None
    pairs = [line.split(":", 1) for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if any(len(pair) != 2 for pair in pairs):
        raise TablectlError(f"archive nats-accounts: {path}: every line is NAME:PASSWORD")
    print(render({name.strip(): password.strip() for name, password in pairs}), end="")
    return 0


def _report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl archive report", description="Per table, one day.")
    p.add_argument("--db", required=True, help=_DB_HELP)
    p.add_argument(
        "--day",
        help="YYYY-MM-DD, a gaming day: the casino's 24 hours from its start time, in each table's"
        " local time ([table] time_zone, gaming_day_starts); default the latest archived",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--html",
        metavar="FILE",
        type=Path,
        help="also write the day as pictures (game pace per table and dealer, house result per"
        " wager, alarms): one self-contained HTML file",
    )
    return p


def _run_nats(args: argparse.Namespace) -> Callable[[], Ingest[Any]]:
    """The worker to run (made later, once logging is configured); refusals raised now."""
    from controller.archive.jetstream import JetStreamSettings, JetStreamWorker, setup
    from controller.telemetry.nats_link import nats_settings

    ca_file = Path(args.ca_file).resolve() if args.ca_file else None
    connection = nats_settings(args.nats, os.environ, username=args.client_id, ca_file=ca_file)
    servers = list(connection.servers)
    client_id = args.client_id or f"tablectl-archive-{socket.gethostname()}"
    check_level("archive group", args.group)
    tables = known_tables(args.table, args.tables_from)
    settings = JetStreamSettings(
        servers,
        args.db,
        client_id,
        durable=args.group,
        gap_grace_s=args.gap_grace,
        ack_wait_s=args.ack_wait,
        tables=tuple(tables),
        tables_source=f"--tables-from {args.tables_from}" if args.tables_from else "--table",
        nats=connection,
    )
    if args.setup:
        asyncio.run(setup(settings))
        print(f"stream {settings.stream} and consumer {settings.durable} are there")
        raise SystemExit(0)
    return lambda: JetStreamWorker(settings)


def _run_mqtt(args: argparse.Namespace) -> Callable[[], Ingest[Any]]:
    from controller.archive.worker import ArchiveSettings, ArchiveWorker
    from controller.telemetry.broker import broker_settings

    check_level("archive group", args.group)
    section = {"ca_file": str(Path(args.ca_file).resolve())} if args.ca_file else {}
    broker = broker_settings(args.broker, section, Path.cwd(), os.environ)
    client_id = args.client_id or f"tablectl-archive-{socket.gethostname()}"
    tables = known_tables(args.table, args.tables_from)
    source = f"--tables-from {args.tables_from}" if args.tables_from else "--table"
    settings = ArchiveSettings(
        broker,
        args.db,
        args.group,
        client_id,
        gap_grace_s=args.gap_grace,
        tables=tuple(tables),
        tables_source=source,
    )
    return lambda: ArchiveWorker(settings)


def _run(args: argparse.Namespace) -> int:
    """One worker, on either transport, with the same /metrics and /healthz."""
    import structlog

    from controller.archive.metrics import registry_for
    from controller.server_settings import parse_metrics_listen as parse_address
    from controller.telemetry.metrics_http import MetricsServer

    metrics_at = None if args.metrics is None else parse_address(args.metrics, "--metrics")
    make = _run_nats(args) if args.nats else _run_mqtt(args)
    # JSON lines on stdout, as `tablectl run` logs: one log pipeline for the whole floor. Not
    # cached: the worker logs a few lines an hour, and a logger cached on its first use would keep
    # the stream of that moment for good (a test's capture, in-process). The worker is made after,
    # so its bound logger writes to this configuration.
    logs.configure(getattr(logging, args.log_level.upper()), cache=False)
    worker = make()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        server = MetricsServer(registry_for(worker), worker.health)
        if metrics_at is not None:
            host, port = await server.start(*metrics_at)
            structlog.get_logger("tablectl.archive").info(
                "archive.metrics_listening", url=f"http://{host}:{port}/metrics"
            )
        try:
            await worker.run(stop)
        finally:
            await server.stop()

    asyncio.run(main())
    return 0


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    try:
        if argv[:1] == ["verify"]:
            from controller.archive.verify import verify_main

            a = _verify_parser().parse_args(argv[1:])
            return verify_main(a.db, a.journal, a.site, a.table)
        if argv[:1] == ["nats-accounts"]:
            a = _accounts_parser().parse_args(argv[1:])
            return _nats_accounts(a.passwords)
        if argv[:1] == ["report"]:
            from controller.archive.report import report_main

            a = _report_parser().parse_args(argv[1:])
            return report_main(a.db, a.day, a.json, a.html)
        return _run(_run_parser().parse_args(argv))
    except TablectlError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
