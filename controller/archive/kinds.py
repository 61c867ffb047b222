"""What a table's journal can hold, as the archive checks it: each kind's fixed classification and,
for a public record, the shape of its payload (the table core's own decoder must take it).

A message on a table's events topic is only as good as the account that published it; these
checks make sure that what the archive keeps is at least a record the table could have written:
a placeholder labelled ``round_settled`` but classified secret, a kind no table writes, or a
public payload that is not its kind's are refused (the ``refused`` alarm), never stored.
"""

from __future__ import annotations

from typing import Any

import controller.table.core  # noqa: F401  (registers every machine's events: the decoders below)
from controller.journal import Classification
from controller.table import state_snapshot
from controller.table.events import CLASSIFICATION, DECODERS, EVENT_TYPES, DomainEvent, typed
from controller.table.recorder import SEEN_KEY

# Every kind a journal holds: the core's events, and the supervisor's snapshot of the table (secret).
KINDS: dict[str, Classification] = {**CLASSIFICATION, state_snapshot.KIND: Classification.SECRET}


def _by_keys(kind: str) -> bool:
    """Whether a payload fits ``kind``'s event by its keys alone: the decoder is the event class,
    a dataclass whose ``__init__`` is the one dataclasses wrote (it takes any value for a field and
    checks nothing but the names), with no ``__post_init__``."""
    cls = EVENT_TYPES.get(kind)
    if cls is None or DECODERS.get(kind) is not cls or "__dataclass_fields__" not in cls.__dict__:
        return False
    init: Any = cls.__dict__.get("__init__")
    written = getattr(getattr(init, "__code__", None), "co_filename", None) == "<string>"
    return written and getattr(cls, "__post_init__", None) is None


# The kinds checked by their payload's keys, and the key sets that fitted: a worker sees the same
# few shapes in every record, so each is decoded once (bounded; a shape that did not fit is never
# kept, and is decoded again each time).
BY_KEYS = frozenset(k for k in CLASSIFICATION if _by_keys(k))
_FITTED: set[tuple[str, frozenset[str]]] = set()


def refusal(kind: str, classification: str, payload: dict[str, Any] | None) -> str | None:
    """Why a record of this kind, classification and (public) payload is not one a table writes;
    None when it is. One line, naming the kind and keys' count at most, never a value."""
    expected = KINDS.get(kind)
    if expected is None:
        return f"kind {kind!r} is not one a table journals"
    if classification != expected.value:
        return f"kind {kind!r} is {expected.value}, not {classification}"
    if payload is None or kind == state_snapshot.KIND:
        return None
    fields = payload if kind == "device_seen" or SEEN_KEY not in payload else _without_seen(payload)
    shape = (kind, frozenset(fields)) if kind in BY_KEYS else None
    if shape is not None and shape in _FITTED:
        return None
    try:
        typed(DomainEvent(kind, dict(fields), 0.0))
    except (ValueError, TypeError, KeyError):
        return f"payload is not that of a {kind!r} record"
    if shape is not None:
        if len(_FITTED) >= 10_000:
            _FITTED.clear()
        _FITTED.add(shape)
    return None


def _without_seen(payload: dict[str, Any]) -> dict[str, Any]:
    # The device counters ride in the payload of a step's last record (controller/table/recorder.py).
    return {k: v for k, v in payload.items() if k != SEEN_KEY}
