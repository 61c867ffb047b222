"""Records, their classification and the canonical encoding the hash chain is computed over.

The encoding is the contract with an auditor: anyone with Python and the journal file must be able
to recompute every hash without this package (docs/journal.md shows how), so it is plain JSON with
fixed options and nothing clever.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from enum import StrEnum
from json.encoder import encode_basestring
from typing import Any

from controller.errors import TablectlError
from controller.ids import EVENT_KIND, matches

GENESIS_HASH = "0" * 64
# "tbcj" in the SQLite header marks the file as ours, so a stray database is never taken for a
# journal and `file`/hexdump show what it is.
APPLICATION_ID = 0x7462636A


class JournalError(TablectlError):
    """The journal cannot do what was asked. The message is one line and never quotes a payload."""


class BrokenChainError(JournalError):
    """The file's hash chain does not hold; ``first_bad_seq`` is the first record that cannot be trusted."""

    def __init__(self, message: str, first_bad_seq: int | None) -> None:
        super().__init__(message)
        self.first_bad_seq = first_bad_seq


class Classification(StrEnum):
    """Who may see a record. Telemetry publishes through this and nothing else."""

    PUBLIC = "public"  # may be published to ops MQTT
    UNTIL_REVEALED = "until_revealed"  # table-only until a later public event reveals it
    SECRET = "secret"  # never leaves the process (shuffle order, reader result, stub contents)


@dataclass(frozen=True, slots=True, repr=False)
class Record:
    seq: int
    at: float
    kind: str
    classification: Classification
    payload: dict[str, Any]
    prev_hash: str
    hash: str

    def __repr__(self) -> str:
        # A record lands in logs and tracebacks more easily than anyone intends; only a public
        # payload may be shown there (secrets stay in the journal).
        shown = repr(self.payload) if self.classification is Classification.PUBLIC else "<withheld>"
        return (
            f"Record(seq={self.seq}, at={self.at!r}, kind={self.kind!r}, "
            f"classification={self.classification.value}, payload={shown}, hash={self.hash[:12]}...)"
        )


# json.dumps with options builds an encoder per call; one made once writes the same text.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """The one JSON spelling of ``value`` the hash is computed over (floats are written by repr)."""
    return _CANONICAL.encode(value)


def _json_string(text: str) -> str:
    # What json.dumps(text, ensure_ascii=False) writes for a str, without its per-call overhead.
    return encode_basestring(text)


def hash_input(seq: int, at: float, kind: str, classification: str, payload_json: str, prev_hash: str) -> str:
    """``canonical_json([seq, at, kind, classification, payload, prev_hash])``, built from the stored text.

    The payload column holds ``canonical_json(payload)`` exactly, so splicing it in gives the same
    string as encoding the whole list, without decoding and re-encoding the payload; and a payload
    whose text was altered, even to an equivalent JSON spelling, no longer hashes the same.
    """
    return (
        f"[{seq},{float.__repr__(at)},{_json_string(kind)},{_json_string(classification)},"
        f"{payload_json},{_json_string(prev_hash)}]"
    )


def record_hash(
    seq: int, at: float, kind: str, classification: str, payload_json: str, prev_hash: str
) -> str:
    text = hash_input(seq, at, kind, classification, payload_json, prev_hash)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_JSON_HINT = "use dict (str keys), list, str, int, float, bool or None"


def _check_json(value: object, kind: str) -> None:
    # json.dumps would quietly turn int or None keys into strings (and collide "1" with 1), so a
    # payload would not read back as it was written; refuse instead. Messages name types only:
    # payloads carry table secrets and errors reach logs.
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JournalError(f"journal: payload of {kind!r} holds a NaN or infinite float; JSON has none")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise JournalError(
                    f"journal: payload of {kind!r} has a key of type {type(key).__name__}; JSON keys are str"
                )
            _check_json(item, kind)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_json(item, kind)
        return
    name = type(value).__name__
    raise JournalError(f"journal: payload of {kind!r} holds a value of type {name}, not JSON ({_JSON_HINT})")


@dataclass(frozen=True, slots=True)
class Entry:
    """An append request that passed validation: everything needed to chain it, already encoded."""

    kind: str
    payload_json: str
    classification: Classification
    at: float


def prepare(kind: object, payload: object, classification: object, at: object) -> Entry:
    """Validate and encode one append request, or refuse it with a one-line JournalError."""
    if not isinstance(kind, str) or not matches(EVENT_KIND, kind):
        raise JournalError(
            "journal: kind must be 1-64 characters of letters, digits, '_', '.', ':' or '-', "
            "starting with a letter"
        )
    if isinstance(classification, Classification):
        cls = classification
    else:
        try:
            cls = Classification(str(classification))
        except ValueError:
            raise JournalError(
                f"journal: {kind!r} has no valid classification (one of public, until_revealed, secret)"
            ) from None
    if isinstance(at, bool) or not isinstance(at, int | float):
        raise JournalError(f"journal: at of {kind!r} must be seconds since the epoch as a number")
    at_f = float(at)
    if not math.isfinite(at_f):
        raise JournalError(f"journal: at of {kind!r} must be a finite number")
    if not isinstance(payload, dict):
        raise JournalError(f"journal: payload of {kind!r} must be a dict, not {type(payload).__name__}")
    try:
        _check_json(payload, kind)
        payload_json = canonical_json(payload)
    except RecursionError:
        raise JournalError(f"journal: payload of {kind!r} is nested too deeply or refers to itself") from None
    except (TypeError, ValueError) as e:  # pragma: no cover - _check_json refuses these first
        raise JournalError(f"journal: payload of {kind!r} is not JSON: {type(e).__name__}") from None
    try:
        payload_json.encode("utf-8")
    except UnicodeEncodeError:
        # Python strings may hold lone surrogates; neither SQLite nor sha256-over-UTF-8 can take them.
        raise JournalError(f"journal: payload of {kind!r} holds text that is not valid Unicode") from None
    return Entry(kind, payload_json, cls, at_f)
