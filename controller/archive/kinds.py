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
from controller.table.events import CLASSIFICATION, DomainEvent, typed
from controller.table.recorder import SEEN_KEY

# Every kind a journal holds: the core's events, and the supervisor's snapshot of the table (secret).
KINDS: dict[str, Classification] = {**CLASSIFICATION, state_snapshot.KIND: Classification.SECRET}


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
    try:
        typed(DomainEvent(kind, dict(fields), 0.0))
    except (ValueError, TypeError, KeyError):
        return f"payload is not that of a {kind!r} record"
    return None


def _without_seen(payload: dict[str, Any]) -> dict[str, Any]:
    # The device counters ride in the payload of a step's last record (controller/table/recorder.py).
    return {k: v for k, v in payload.items() if k != SEEN_KEY}
