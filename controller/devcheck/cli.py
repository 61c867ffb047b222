"""``tablectl device check --config TABLE --device NAME [--json] [--sim-control URL]``.

Prints one line per requirement (pass, fail with what was expected and what came, or not
checked and why); with ``--json`` one JSON document instead. The steps the person at the device
is asked to do go to stderr, one line each, starting ``ask <step>:``, so a script or a test can
follow them. Exit 0 only when every requirement checked passed, 1 when one failed, 2 for a bad
command line or table file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from controller.devcheck.check import check_device, transport_note
from controller.devcheck.sim_port import parse_control_url
from controller.errors import TablectlError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl device check",
        description="Check one device of a table, real or simulated, against its page in docs/devices/.",
    )
    p.add_argument("--config", required=True, metavar="TABLE", help="the table file that names the device")
    p.add_argument("--device", required=True, metavar="NAME", help="the device's section name, e.g. shoe")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout instead of lines")
    p.add_argument(
        "--step-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds the person at the device has for each physical step (default 120)",
    )
    p.add_argument("--no-steps", action="store_true", help="ask for no physical step (those are not checked)")
    p.add_argument(
        "--out-of-order",
        action="store_true",
        help="also mark the shuffler out of order (only its vendor's service procedure clears it)",
    )
    p.add_argument(
        "--sim-control",
        default=None,
        metavar="URL",
        help="a simulated device: its simulator's control port (as `tablectl sim --control` prints it),"
        " through which the check puts it into the states a real device is put into by hand (a jam,"
        " a device fault, a failed reader)",
    )
    return p


def _ask(step: str, text: str, seconds: float) -> None:
    print(f"ask {step}: {text} (waiting up to {seconds:g} s)", file=sys.stderr, flush=True)


USAGE = "usage: tablectl device check --config TABLE --device NAME [--json]"


def main(argv: Sequence[str]) -> int:
    if list(argv[:1]) in (["-h"], ["--help"]):  # asked for: on stdout, exit 0
        print(f"{USAGE}\n\nactions:\n  check  {build_parser().description} (tablectl device check --help)")
        return EXIT_OK
    if list(argv[:1]) != ["check"]:
        print(USAGE, file=sys.stderr)
        return EXIT_USAGE
    args = build_parser().parse_args(list(argv[1:]))
    from controller.supervisor.config import load_table_config

    try:
        sim_control = None if args.sim_control is None else parse_control_url(args.sim_control)
    except ValueError as e:
        print(f"tablectl device check: {e}", file=sys.stderr)
        return EXIT_USAGE

    try:
        table = load_table_config(args.config)
    except TablectlError as e:
        print(e, file=sys.stderr)
        return EXIT_USAGE
    device = next((d for d in table.devices if d.name == args.device), None)
    if device is None:
        names = ", ".join(d.name for d in table.devices)
        print(
            f"{args.config}: devices.{args.device}: no such device (the table has {names})", file=sys.stderr
        )
        return EXIT_USAGE
    others = [d for d in table.devices if d.name != device.name]
    step_timeout = 0.0 if args.no_steps else args.step_timeout
    report = asyncio.run(
        check_device(
            device,
            ask=_ask,
            step_timeout_s=step_timeout,
            neighbours=others,
            out_of_order=args.out_of_order,
            sim_control=sim_control,
        )
    )
    if args.json:
        print(
            json.dumps(
                {
                    "device": device.name,
                    "kind": device.kind.value,
                    "profile": device.profile.name,
                    "at": transport_note(device),
                    "passed": report.passed,
                    "results": [o.as_json() for o in report.outcomes],
                },
                indent=2,
            )
        )
    else:
        print(
            f"device {device.name} ({device.kind.value}, {device.profile.name}) at {transport_note(device)}"
        )
        for o in report.outcomes:
            print(o.line())
        counts = {s: sum(o.status == s for o in report.outcomes) for s in ("pass", "fail", "not checked")}
        print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['not checked']} not checked")
    return EXIT_OK if report.passed else EXIT_FAILED
