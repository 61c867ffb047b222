"""``tablectl run --config FILE [--journal PATH] [--console HOST:PORT --users FILE]``: the appliance
at one table, with its table console (dealer display and floor console) when asked for.

Runs until SIGTERM or SIGINT, then leaves the devices safe (sensors locked), closes the journal,
tells telemetry and exits 0. A bad config or a journal that belongs to another table exits 2 with
one line on stderr; logs are JSON lines on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from controller import logs
from controller.appliance.preflight import check_for_run
from controller.appliance.wiring import build_telemetry
from controller.errors import ConfigError, TablectlError
from controller.realtime import priority_refused
from controller.server_settings import ConsoleSettings, console_settings
from controller.supervisor.config import TableConfig, load_table_config
from controller.supervisor.supervisor import Supervisor
from controller.supervisor.telemetry import Telemetry
from devices.config import add_relocation_arguments, relocated
from devices.transport.block_watch import set_watch_priority

if TYPE_CHECKING:
    from controller.console.process import ConsoleProcess
    from controller.telemetry.metrics_process import MetricsProcess

JOURNAL_DIR = Path("/var/lib/tablectl")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl run", description="Run the controller of one table.")
    p.add_argument("--config", required=True, type=Path, help="config/tables/<table>.toml")
    add_relocation_arguments(p)
    p.add_argument("--journal", type=Path, default=None, help=f"journal file (default {JOURNAL_DIR}/<id>.db)")
    p.add_argument(
        "--broker",
        default=None,
        help="mqtt:// or mqtts:// URL for ops telemetry (credentials from the config or the environment)",
    )
    p.add_argument(
        "--console",
        default=None,
        metavar="HOST:PORT",
        help="serve the table console here (default [console] listen, else 127.0.0.1:8470)",
    )
    p.add_argument("--users", type=Path, default=None, help="the console's users file (tablectl users add)")
    p.add_argument(
        "--metrics",
        default=None,
        metavar="HOST:PORT",
        help="serve /metrics (Prometheus text format) and /healthz here (default [metrics] listen, else"
        " none; docs/metrics.md)",
    )
    p.add_argument(
        "--realtime-priority",
        type=int,
        default=None,
        metavar="N",
        help="run the keypad's key watch process under SCHED_FIFO at priority N (1-99): the Start Game"
        " window holds on a busy box (docs/design.md); the shipped systemd unit grants it",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def main(argv: list[str], telemetry: Telemetry | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = load_table_config(args.config)
        if args.port_base is not None or args.run_dir is not None:
            devices = relocated(
                config.devices, config.table_id, port_base=args.port_base, run_dir=args.run_dir
            )
            config = dataclasses.replace(config, devices=devices)
        settings = _console_settings(config, args.console, args.users)
        check_for_run(config, settings, users_flag=args.users is not None)
    except TablectlError as e:
        print(f"tablectl run: {e}", file=sys.stderr)
        return 2
    journal = args.journal or JOURNAL_DIR / f"{config.table_id}.db"
    # The journal's directory is the operator's to make, with its owner and mode: a mistyped path
    # must not leave a new tree behind, nor the default appear unannounced.
    if not journal.parent.is_dir():
        where = f"--journal {journal}" if args.journal else f"no --journal given, and the default {journal}"
        print(
            f"tablectl run: {where}: directory {journal.parent} does not exist"
            " (create it for the appliance's user, or give --journal PATH)",
            file=sys.stderr,
        )
        return 2
    if args.journal is None:  # said once, so nobody wonders where the table's record went
        print(f"tablectl run: journal {journal} (--journal PATH to choose)", file=sys.stderr)
    # From here on the table logs (JSON lines on stdout); a refusal above is one line on stderr.
    logs.configure(getattr(logging, args.log_level.upper()))
    if args.realtime_priority is not None:
        # The key watch's process alone (devices/transport/watch_process.py): the table's own
        # process gains nothing from it (docs/design.md), and a refusal is said by the watch.
        refused = priority_refused(args.realtime_priority)
        log = structlog.get_logger("tablectl.run")
        if refused is None:
            set_watch_priority(args.realtime_priority)
            log.info("realtime_priority", policy="fifo", priority=args.realtime_priority, scope="key watch")
        else:
            log.warning("realtime_priority_refused", error=refused)
    try:
        forwarder = None
        if telemetry is None:
            telemetry, forwarder = build_telemetry(config, args.broker, journal)
        supervisor = Supervisor(config, journal, telemetry=telemetry)
        if forwarder is not None:
            forwarder.supervisor = supervisor
        listen = args.metrics or config.metrics_listen
        where = "--metrics" if args.metrics else f"{config.path}: metrics.listen"
        metrics = None
        if listen is not None:
            # aiohttp with it: a tenth of run's imports, paid only by a table that serves /metrics
            # (the table is dark until it is ready; what can wait does).
            from controller.server_settings import parse_metrics_listen

            metrics = parse_metrics_listen(listen, where)
        level = getattr(logging, args.log_level.upper())
        return asyncio.run(_run(supervisor, settings, level, metrics))
    except TablectlError as e:
        print(f"tablectl run: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tablectl run: {e}", file=sys.stderr)
        return 1


def _console_settings(config: TableConfig, listen: str | None, users: Path | None) -> ConsoleSettings | None:
    return console_settings(dict(config.doc), config.path.parent, str(config.path), listen, users)


async def _run(
    supervisor: Supervisor,
    settings: ConsoleSettings | None,
    log_level: int,
    metrics_at: tuple[str, int] | None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    console: ConsoleProcess | None = None
    await supervisor.start()
    metrics: MetricsProcess | None = None
    try:
        if metrics_at is not None:
            from controller.telemetry.metrics_process import MetricsProcess

            # In a process of its own: no flood of scrapers can take the table's pace or its files.
            metrics = MetricsProcess(supervisor.metrics.registry, lambda: _health(supervisor), log_level)
            host, port = await metrics.start(*metrics_at)
            supervisor.log.info("metrics_listening", url=f"http://{host}:{port}/metrics")
        if settings is not None:
            from controller.console.process import ConsoleProcess

            console = ConsoleProcess(supervisor, settings, log_level)
            await console.start()  # in a process of its own: it cannot take the table's pace
        await stop.wait()
    finally:
        if metrics is not None:
            await metrics.stop()
        if console is not None:
            await console.stop()
        await supervisor.stop()
    return 0


def _health(supervisor: Supervisor) -> tuple[bool, str]:
    """/healthz: ok once the journal is replayed and every device has answered (``ready``), and
    while the journal takes its commits."""
    outage = supervisor.stepper.outage
    if outage.down:
        return False, f"halted: {outage.message()}"
    if not supervisor.ready.is_set():
        waiting = sorted(n for n, h in supervisor.health.items() if h.value == "connecting")
        return False, f"starting: waiting for {', '.join(waiting) or 'the journal'}"
    return True, "ok"


def dispatch(argv: list[str]) -> int:
    """Entry from controller/cli.py for ``run``, ``demo``, ``broker`` and ``config``."""
    if argv[:1] == ["run"]:
        return main(argv[1:])
    if argv[:1] == ["demo"]:
        from controller.appliance.demo import main as demo_main

        return demo_main(argv[1:])
    if argv[:1] == ["broker"]:
        from controller.appliance.local_broker import main as broker_main

        return broker_main(argv[1:])
    args = _config_parser().parse_args(argv[1:])  # `tablectl config` alone: usage, exit 2
    return check_main([args.file])


def check_main(argv: list[str]) -> int:
    """``tablectl config check FILE``: exit 0 with a summary line, 2 with the one-line problem."""
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: tablectl config check FILE", file=sys.stderr)
        return 2
    try:
        cfg = load_table_config(argv[0])
        # What `run --config FILE` refuses, by the same checks (the shipped unit runs this first).
        check_for_run(cfg, _console_settings(cfg, None, None))
        # The [telemetry] section is checked too (the broker URL, CA file, site and table id).
        build_telemetry(cfg, None, cfg.path.with_suffix(".db"))
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 2
    names = ", ".join(f"{d.name} ({d.kind.value})" for d in cfg.devices)
    print(f"{cfg.path}: ok: table {cfg.table_id} at {cfg.site}, {cfg.options.spec.title}, devices: {names}")
    return 0


def _config_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl config", description="Table config files.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = sub.add_parser(
        "check",
        help="validate a table config: exit 0 with a summary line, 2 with the one-line problem",
        description="Validate a table config (config/tables/<table>.toml) and everything it names.",
    )
    c.add_argument("file", help="the table config file")
    return p


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
