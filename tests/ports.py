"""Free TCP ports for the servers tests start (brokers, simulators, databases, consoles).

A port the kernel picks with ``bind(("127.0.0.1", 0))`` comes from its ephemeral range, the same
range it hands every outgoing connection as its local port: between the pick and the server's own
bind, a client connecting anywhere on the machine could be given it ("address already in use",
seen when a test's simulator started while a soak ran beside it). So ports are picked below the
ephemeral range, where only a deliberate bind can take them, and each once per process. Under
pytest-xdist each worker draws from its own slice of that range, so two workers never pick the same
port between one's check and its server's bind.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOW = 10_000  # above the well-known and most registered services' ports
_given: set[int] = set()
_rng = random.Random()  # not the global generator: a test seeding it must not pick our ports


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _worker_slice(low: int, high: int) -> tuple[int, int]:
    """This process's share of [low, high): the whole range alone, slice k of n under xdist
    (PYTEST_XDIST_WORKER is gw<k>, PYTEST_XDIST_WORKER_COUNT is n)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return low, high
    k = int(worker[2:]) % count
    width = (high - low) // count
    return low + k * width, low + (k + 1) * width


def free_port() -> int:
    """A port nothing listens on now, outside the kernel's ephemeral range, not given before."""
    low, high = _worker_slice(LOW, _ephemeral_start())
    for _ in range(1000):
        port = _rng.randrange(low, high)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port between {low} and {high}")
