"""The rules that decide whether a run of stored rows is an intact chain.

Shared by ``Journal.open`` (the tail only) and ``verify_journal`` (every record), so both name a
broken record in the same words. Rows come straight from SQLite, so nothing about their types is
assumed: a tamperer with the sqlite3 shell can put anything in a column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.bounded import MAX_RECORD_BYTES, InputRefused, load_json
from controller.journal.model import GENESIS_HASH, Classification, record_hash

ROW_COLUMNS = "seq, at, kind, classification, payload, prev_hash, hash"
Row = tuple[Any, ...]

_CLASSIFICATIONS = frozenset(c.value for c in Classification)


@dataclass(frozen=True, slots=True)
class Problem:
    first_bad_seq: int | None
    reason: str


def _invalid_field(row: Row) -> str | None:
    _, at, kind, classification, payload, prev_hash, hash_ = row
    if not isinstance(at, float):
        return "at is not a number"
    if not isinstance(kind, str):
        return "kind is not text"
    if classification not in _CLASSIFICATIONS:
        return "classification is not one of public, until_revealed, secret"
    if not isinstance(prev_hash, str) or not isinstance(hash_, str):
        return "hash columns are not text"
    if not isinstance(payload, str):
        return "payload is not text"
    try:
        decoded = load_json(payload, max_bytes=MAX_RECORD_BYTES)
    except InputRefused as e:
        return f"payload: {e}"
    if not isinstance(decoded, dict):
        return "payload is not a JSON object"
    return None


class ChainWalker:
    """Feed rows in ascending seq; the first problem found is kept, later ones are not looked for.

    ``prev_hash=None`` starts mid-chain (the tail check on open), where the link of the first row
    cannot be checked because its predecessor was not read.
    """

    def __init__(self, expected_seq: int = 1, prev_hash: str | None = GENESIS_HASH) -> None:
        self.expected_seq = expected_seq
        self.prev_hash = prev_hash
        self.rows = 0
        self.last_seq = expected_seq - 1
        self.last_hash = prev_hash
        self.problem: Problem | None = None

    def feed(self, row: Row) -> None:
        self.rows += 1
        if self.problem is None:
            self.problem = self._check(row)
        self.last_seq, self.last_hash = row[0], row[6]

    def _check(self, row: Row) -> Problem | None:
        seq = row[0]
        expected = self.expected_seq
        if seq != expected:
            if seq > expected and expected == 1:
                return Problem(1, f"records start at {seq}, not 1 (removed?)")
            if seq > expected:
                return Problem(expected, f"records jump from {expected - 1} to {seq} (removed?)")
            return Problem(expected, f"record {seq} found where record {expected} should be (reordered?)")
        self.expected_seq = expected + 1

        invalid = _invalid_field(row)
        link_ok = self.prev_hash is None or row[5] == self.prev_hash
        if invalid is not None:
            return Problem(seq, f"record {seq}: {invalid} (edited?)")
        _, at, kind, classification, payload, prev_hash, hash_ = row
        contents_ok = record_hash(seq, at, kind, classification, payload, prev_hash) == hash_
        self.prev_hash = hash_
        if not contents_ok:
            if link_ok:
                return Problem(seq, f"record {seq}: hash does not match its contents (edited?)")
            return Problem(seq, f"record {seq}: neither its hash nor its previous-hash link holds (moved?)")
        if not link_ok:
            # The record's own hash covers its prev_hash, so that link is what was written when the
            # record was appended: it is the record before it that no longer is what it was.
            return Problem(
                seq - 1,
                f"record {seq - 1}: not the record that record {seq} is chained to "
                "(edited and rehashed, replaced or reordered?)",
            )
        return None

    def finish(self, head: tuple[Any, Any] | None, published_seq: Any) -> Problem | None:
        """Check the end of the chain against the head marker and the telemetry cursor.

        The chain alone cannot show that its last records were cut off; the head marker (written in
        the same transaction as every append) and the broker's acknowledgement can.
        """
        if self.problem is not None:
            return self.problem
        last = self.last_seq
        if head is None:
            return Problem(None, "the journal head marker is missing (edited?)")
        head_seq, head_hash = head
        if not isinstance(head_seq, int):
            return Problem(None, "the journal head marker is not valid (edited?)")
        if head_seq > last:
            return Problem(last + 1, f"records end at {last} but the journal head says {head_seq} (removed?)")
        if head_seq < last:
            extra = head_seq + 1
            return Problem(extra, f"record {extra}: written after the journal head (added behind its back?)")
        if head_hash != self.last_hash:
            return Problem(last, f"record {last}: does not match the journal head (edited and rehashed?)")
        if isinstance(published_seq, int) and published_seq > last:
            return Problem(
                last + 1, f"records end at {last} but the broker acknowledged {published_seq} (removed?)"
            )
        return None
