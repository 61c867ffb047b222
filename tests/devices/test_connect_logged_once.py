"""A device that cannot be reached is logged once per failed connect (issue 37: pymodbus' own
"Failed to connect" line came beside our ``connect_failed``, two lines for each failure)."""

from __future__ import annotations

import io
import json
import socket

import pytest

from controller import logs
from controller.backoff import BackoffPolicy
from devices.config import Endpoint, TransportKind
from devices.errors import LinkDown
from devices.transport.modbus import ModbusBus
from sim.clock import VirtualClock


def _closed_port() -> int:
    """A port nobody listens on: bound to learn a free one, then closed (a connect is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_each_failed_connect_is_one_log_line() -> None:
    out = io.StringIO()
    logs.configure(stream=out, cache=False)
    clock = VirtualClock()
    bus = ModbusBus(
        Endpoint(TransportKind.MODBUS_TCP, host="127.0.0.1", port=_closed_port()),
        backoff=BackoffPolicy(initial_s=0.1, max_s=0.1, jitter=0.0),
        clock=clock,
    )
    try:
        for _ in range(3):
            with pytest.raises(LinkDown, match="cannot connect"):
                await bus.read_holding(1, 0, 1, timeout_s=1.0)
            clock.advance(0.2)  # past the backoff: the next read tries to connect again
    finally:
        bus.close()
        logs.configure()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    about_connect = [line for line in lines if "connect" in line["event"].lower()]
    assert [line["event"] for line in about_connect] == ["connect_failed"] * 3, lines
