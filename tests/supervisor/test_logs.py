"""Library log lines (pymodbus, asyncio, ...) come out as our JSON lines, without frame dumps."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from pymodbus.logging import Log

from controller import logs

FRAME = bytes([0x03, 0x03, 0x04, 0x00, 0x2A, 0x01, 0x0C, 0x55, 0xAA])  # a reader answer, card words


@pytest.fixture
def out() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    logs.configure(logging.INFO, stream, cache=False)
    yield stream
    logs.configure(logging.INFO, cache=False)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_pymodbus_error_keeps_its_first_line_and_loses_its_frames(out: io.StringIO) -> None:
    Log.transport_dump(Log.RECV_DATA, FRAME, b"")
    Log.transport_dump(Log.SEND_DATA, FRAME, b"")
    Log.error("ERROR: request ask for id={} but got id={}, Skipping.", 3, 2)
    (line,) = _lines(out)
    assert line["event"] == "ERROR: request ask for id=3 but got id=2, Skipping."
    assert line["level"] == "error" and line["logger"] == "pymodbus.logging"
    text = out.getvalue()
    assert ">>>>>" not in text and "recv" not in text and "0x2a" not in text.lower()


def test_pymodbus_is_never_at_debug_where_it_logs_every_frame(out: io.StringIO) -> None:
    logs.configure(logging.DEBUG, out, cache=False)
    Log.transport_dump(Log.SEND_DATA, FRAME, b"")
    assert out.getvalue() == ""


@pytest.mark.parametrize(
    "message",
    ["recv: 0x3 0x3 0x4 0x0 0x2a", "bad packet 0x3 0x3 0x4 0x0 0x2a 0x1", "bad packet 0303 0400 2a01 0c55"],
)
def test_hex_runs_and_frame_lines_never_reach_the_log(out: io.StringIO, message: str) -> None:
    logging.getLogger("somelib").warning(message)
    assert "2a" not in out.getvalue().lower()
    assert all(isinstance(line, dict) for line in _lines(out))


def test_an_exception_is_named_by_type_without_its_text(out: io.StringIO) -> None:
    try:
        raise ValueError("card 7H in the payload")
    except ValueError:
        logging.getLogger("asyncio").exception("Task exception was never retrieved")
    (line,) = _lines(out)
    assert line["exc_type"] == "ValueError" and "7H" not in out.getvalue()
