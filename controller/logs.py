"""structlog for the appliance: one JSON object per line on stdout, each with the table id and
the device it is about (``null`` for the table itself).

The table id comes from a context variable bound before any task starts, so the drivers' own
lines (devices/) carry it too. Nothing logged may hold a card, a reader answer, stub contents or
a shuffle order: we log kinds of events and one-line refusals, never payloads.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog


def _device_on_every_line(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    event_dict.setdefault("device", None)
    event_dict.setdefault("table", None)
    return event_dict


# pymodbus appends its recent frames to ERROR lines ("\n>>>>> recv: 0x3 0x3 ..."), and at DEBUG
# logs each frame ("send: ...", "recv: ..."): register words, that is card codes before they are
# public. Anything after the first line, and any run of hex bytes, never leaves this module.
_HEX_RUN = re.compile(r"(?:\b0x[0-9a-fA-F]{1,2}\b[\s,]*){2,}|\b(?:[0-9a-fA-F]{2}[\s:]?){4,}\b")
_FRAME_LINE = re.compile(r"^\s*(?:send|recv|extra)\s*:", re.IGNORECASE)
MAX_LIBRARY_TEXT = 200


def library_text(message: str) -> str | None:
    """What may be logged of a library's message: its first line, frames and hex runs removed;
    None for a line that is nothing but a frame."""
    first = message.split("\n", 1)[0].strip()
    if _FRAME_LINE.match(first):
        return None
    return _HEX_RUN.sub("[bytes redacted] ", first).strip()[:MAX_LIBRARY_TEXT]


def _said_by_us(logger: str, text: str) -> bool:
    """A library line that our own code says better, once: pymodbus logs "Failed to connect ..."
    for each failed connect, and the bus (devices/transport/modbus.py) logs the same failure as
    ``connect_failed`` with the bus and the next attempt. One line per failure, ours."""
    return logger.startswith("pymodbus") and text.startswith("Failed to connect")


class _ToStructlog(logging.Handler):
    """Every standard-library log record (pymodbus, aiomqtt/paho, asyncio, serial) as one of our
    JSON lines, through ``library_text``; an exception is named by type only (its text and
    traceback can quote a payload)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = library_text(record.getMessage())
            if text is None or _said_by_us(record.name, text):
                return
            fields: dict[str, Any] = {"logger": record.name}
            if record.exc_info and record.exc_info[0] is not None:
                fields["exc_type"] = record.exc_info[0].__name__
            structlog.get_logger("library").log(record.levelno, text, **fields)
        except Exception:  # a logging failure must not take the caller down
            self.handleError(record)


def route_stdlib_logging(level: int) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _ToStructlog):
            root.removeHandler(handler)
    root.addHandler(_ToStructlog())
    root.setLevel(level)
    # Never DEBUG for pymodbus, whatever the level: at DEBUG it logs every frame it sends and reads.
    logging.getLogger("pymodbus").setLevel(max(level, logging.INFO))
    logging.captureWarnings(True)


# Where configure() sent the lines: a child process that logs for us (the console's) sends its own
# to the same one, so a command whose stdout is its result (demo --no-ui) keeps stdout clean.
_to_stderr = False


def logs_to_stderr() -> bool:
    return _to_stderr


def configure(level: int = logging.INFO, stream: TextIO | None = None, *, cache: bool = True) -> None:
    global _to_stderr
    _to_stderr = stream is sys.stderr
    route_stdlib_logging(level)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _device_on_every_line,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stdout),
        cache_logger_on_first_use=cache,
    )


def bind_table(table_id: str) -> None:
    structlog.contextvars.bind_contextvars(table=table_id)
