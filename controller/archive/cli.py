"""``tablectl archive`` (run a worker), ``archive verify`` and ``archive report``."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from controller.errors import TablectlError
from controller.telemetry.topics import check_level

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
    p.add_argument("--ca-file", help="CA certificate for an mqtts:// broker")
    p.add_argument(
        "--gap-grace", type=float, default=10.0, help="seconds before a gap is asked for (default 10)"
    )
    p.add_argument(
        "--ack-wait",
        type=float,
        default=30.0,
        help="--nats: seconds before a message a dead worker took goes to another (default 30)",
    )
    return p


def _verify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl archive verify",
        description="Exit 0 when the journal agrees with the archive, 1 naming the "
        "first record that does not.",
    )
    p.add_argument("--db", required=True, help=_DB_HELP)
    p.add_argument("--journal", required=True, help="the table's journal file")
    p.add_argument("--site", help="the table's site (default: the one site the archive has it under)")
    p.add_argument("--table", help="the table id (default: from the journal's table_opened record)")
    return p


def _report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl archive report", description="Per table, one day.")
    p.add_argument("--db", required=True, help=_DB_HELP)
    p.add_argument("--day", help="YYYY-MM-DD, UTC (default today)")
    p.add_argument("--json", action="store_true")
    return p


def _run_nats(args: argparse.Namespace) -> int:
    from controller.archive.jetstream import JetStreamSettings, JetStreamWorker

    servers = [s.strip() for s in args.nats.split(",") if s.strip()]
    client_id = args.client_id or f"tablectl-archive-{socket.gethostname()}"
    check_level("archive group", args.group)
    settings = JetStreamSettings(
        servers, args.db, client_id, durable=args.group, gap_grace_s=args.gap_grace, ack_wait_s=args.ack_wait
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await JetStreamWorker(settings).run(stop)

    asyncio.run(main())
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.nats:
        return _run_nats(args)
    from controller.archive.worker import ArchiveSettings, ArchiveWorker
    from controller.telemetry.broker import broker_settings

    check_level("archive group", args.group)
    section = {"ca_file": str(Path(args.ca_file).resolve())} if args.ca_file else {}
    broker = broker_settings(args.broker, section, Path.cwd(), os.environ)
    client_id = args.client_id or f"tablectl-archive-{socket.gethostname()}"
    settings = ArchiveSettings(broker, args.db, args.group, client_id, gap_grace_s=args.gap_grace)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await ArchiveWorker(settings).run(stop)

    asyncio.run(main())
    return 0


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    try:
        if argv[:1] == ["verify"]:
            from controller.archive.verify import verify_main

            a = _verify_parser().parse_args(argv[1:])
            return verify_main(a.db, a.journal, a.site, a.table)
        if argv[:1] == ["report"]:
            from controller.archive.report import report_main

            a = _report_parser().parse_args(argv[1:])
            return report_main(a.db, a.day, a.json)
        return _run(_run_parser().parse_args(argv))
    except TablectlError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
