"""structlog for the appliance: one JSON object per line on stdout, each with the table id and
the device it is about (``null`` for the table itself).

The table id comes from a context variable bound before any task starts, so the drivers' own
lines (devices/) carry it too. Nothing logged may hold a card, a reader answer, stub contents or
a shuffle order: we log kinds of events and one-line refusals, never payloads.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog


def _device_on_every_line(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    event_dict.setdefault("device", None)
    event_dict.setdefault("table", None)
    return event_dict


def configure(level: int = logging.INFO, stream: TextIO | None = None, *, cache: bool = True) -> None:
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
