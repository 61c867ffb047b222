"""The ``tablectl`` command.

Every failure a user can cause (a bad script, a bad config, an illegal action) ends with exit
status 2 and one line on stderr naming the rule or the key; tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from controller.errors import TablectlError
from controller.gaming_day import PENNSYLVANIA

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and found a fault (e.g. a journal that does not verify)
EXIT_USAGE = 2  # the input was refused


def _cmd_round(args: argparse.Namespace) -> int:
    from controller.script import run_script

    path = Path(args.script)
    try:
        text = sys.stdin.read() if args.script == "-" else path.read_text(encoding="utf-8")
    except OSError as e:
        raise TablectlError(f"{path}: cannot read: {e.strerror}") from None
    print(json.dumps(run_script(text), indent=2 if args.pretty else None))
    return EXIT_OK


def _cmd_simulate(args: argparse.Namespace) -> int:
    from controller.simulate import main as simulate_main

    return simulate_main(args)


def _cmd_journal_verify(args: argparse.Namespace) -> int:
    from controller.journal import verify_main

    return verify_main(args.path)


def _cmd_journal_show(args: argparse.Namespace) -> int:
    from controller.journal import BrokenChainError
    from controller.journal.damage import DamagedJournalError

    try:
        return _show_round(args)
    except (BrokenChainError, DamagedJournalError) as e:
        # Evidence from an edited or damaged journal is not shown (673a.7(u) asks for the record).
        print(f"{e} (journal show prints nothing from a journal that does not verify)", file=sys.stderr)
        return EXIT_FAILED


def _show_round(args: argparse.Namespace) -> int:
    from controller.journal import Journal
    from controller.table.dispute import format_round, reconstruct, round_records
    from controller.table.recorder import options_of

    path = Path(args.path)
    if not path.exists():
        raise TablectlError(f"{path}: no such journal")
    with Journal.open(path, create=False, readonly=True) as journal:
        records = journal.verified_records()  # checked up to the round's last record
        first = next(records, None)
        if first is None:
            raise TablectlError(f"{path}: the journal is empty")
        options, table_id = options_of(first)
        rnd = reconstruct(*round_records(records, args.round), args.time_zone)
    if args.json:
        print(json.dumps(rnd, indent=2))
    else:
        print(format_round(rnd, f"{table_id} ({options.spec.title})"))
    return EXIT_OK


def _time_zone(name: str) -> str:
    """An IANA zone name for ``--time-zone``; argparse's one-line usage error otherwise."""
    from controller.gaming_day import zone

    try:
        zone(name)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tablectl",
        description="Table-side controller for Pennsylvania table games.",
        epilog="Where a help text or an error names a page docs/PAGE, tablectl docs PAGE prints it.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("round", help="play one scripted round and print its settlement as JSON")
    p.add_argument("--script", required=True, help="the round script (JSON), or - for stdin")
    p.add_argument("--pretty", action="store_true", help="indent the JSON")
    p.set_defaults(func=_cmd_round)

    p = sub.add_parser("simulate", help="play many rounds headless and report edges")
    from controller.simulate import add_arguments

    add_arguments(p)
    p.set_defaults(func=_cmd_simulate)

    sub.add_parser("sim", help="start the simulated devices of a table (tablectl sim --help)")
    sub.add_parser("run", help="run the controller of one table (tablectl run --help)")
    sub.add_parser("demo", help="a whole table on this machine, played by a virtual dealer")
    sub.add_parser(
        "broker", help="a local MQTT broker for sim, run and monitor on one machine (prints its URL)"
    )
    sub.add_parser("config", help="tablectl config check FILE: validate a table config")
    sub.add_parser("archive", help="every table's events into PostgreSQL; archive verify, archive report")
    sub.add_parser("users", help="people who may sign in to the table console (tablectl users --help)")
    sub.add_parser("device", help="tablectl device check: a device against its page in docs/devices/")
    sub.add_parser("monitor", help="live view of every table on an MQTT broker (tablectl monitor --help)")
    sub.add_parser("docs", help="the manual: tablectl docs lists its pages, tablectl docs PAGE prints one")

    journal = sub.add_parser("journal", help="verify a journal or show a round from it")
    jsub = journal.add_subparsers(dest="journal_command", required=True, metavar="ACTION")
    p = jsub.add_parser("verify", help="exit 0 when the hash chain is intact, 1 naming the first bad record")
    p.add_argument("path")
    p.set_defaults(func=_cmd_journal_verify)
    p = jsub.add_parser("show", help="a round rebuilt for a question or dispute (673a.7(u))")
    p.add_argument("path")
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--time-zone",
        default=PENNSYLVANIA.time_zone,
        type=_time_zone,
        help="the IANA zone times are shown in, the table file's [table] time_zone "
        f"(default {PENNSYLVANIA.time_zone})",
    )
    p.set_defaults(func=_cmd_journal_show)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        # Ctrl-C while a command is still importing or setting up: an exit status, not a
        # traceback through the import machinery.
        return 130


def _main(argv: list[str]) -> int:
    if argv[:1] in (["run"], ["demo"], ["broker"], ["config"]):
        # The appliance's commands parse their own arguments (controller/appliance/).
        from controller.appliance.cli import dispatch

        return dispatch(argv)
    if argv[:1] == ["sim"]:
        # The simulator has its own parser; argparse.REMAINDER would swallow "--config" here.
        from sim.cli import main as sim_main

        return sim_main(argv[1:])
    if argv[:1] == ["archive"]:
        from controller.archive.cli import main as archive_main

        return archive_main(argv[1:])
    if argv[:1] == ["users"]:
        from controller.console.users import main as users_main

        return users_main(argv[1:])
    if argv[:1] == ["device"]:
        from controller.devcheck.cli import main as device_main

        return device_main(argv[1:])
    if argv[:1] == ["docs"]:
        from controller.manual import main as docs_main

        return docs_main(argv[1:])
    if argv[:1] == ["monitor"]:
        from controller.telemetry.monitor import main as monitor_main

        return monitor_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except TablectlError as e:
        print(e, file=sys.stderr)  # one line, starting with the section
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
