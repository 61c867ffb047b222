"""``tablectl broker [--port N]``: a broker for trying tablectl on one machine.

Debian's mosquitto, started as the demo starts its own (``demo.broker``): on 127.0.0.1 only,
anonymous, no persistence, its own config in a temporary folder, never the system's broker on
1883. It prints its URL as the one line on stdout (for ``--broker``) and runs until Ctrl-C or
SIGTERM. A broker for a casino floor is configured with TLS, passwords and the table ACL
(docs/mqtt.md, config/mosquitto/), not this.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path

from controller.errors import TablectlError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl broker",
        description="A local MQTT broker (Debian's mosquitto on 127.0.0.1, anonymous, for trying "
        "tablectl sim, run and monitor on one machine). Prints its URL on stdout and runs until "
        "Ctrl-C or SIGTERM. A floor's broker has TLS, passwords and the ACL: docs/mqtt.md.",
    )
    p.add_argument(
        "--port", type=int, default=0, help="the port on 127.0.0.1 (default 0: a free one, said in the URL)"
    )
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"tablectl broker: --port {args.port}: a port from 0 to 65535", file=sys.stderr)
        return 2
    from controller.appliance.demo import broker

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        with (
            tempfile.TemporaryDirectory(prefix="tablectl-broker-") as work,
            broker(Path(work), args.port) as port,
        ):
            print(f"mqtt://127.0.0.1:{port}", flush=True)
            print(
                f"tablectl broker: mosquitto on 127.0.0.1:{port}; stop with Ctrl-C or SIGTERM",
                file=sys.stderr,
                flush=True,
            )
            stop.wait()
    except TablectlError as e:
        print(f"tablectl broker: {e}", file=sys.stderr)
        return 2
    return 0
