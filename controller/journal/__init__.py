"""The table's journal: append-only, hash-chained, in one SQLite file; also the telemetry outbox.

See docs/journal.md for the file format, the hash and how verification decides.
"""

from __future__ import annotations

from controller.journal.model import (
    GENESIS_HASH,
    BrokenChainError,
    Classification,
    JournalError,
    Record,
    canonical_json,
    hash_input,
    record_hash,
)
from controller.journal.store import Journal
from controller.journal.verify import VerifyResult, verify_journal, verify_main

__all__ = [
    "GENESIS_HASH",
    "BrokenChainError",
    "Classification",
    "Journal",
    "JournalError",
    "Record",
    "VerifyResult",
    "canonical_json",
    "hash_input",
    "record_hash",
    "verify_journal",
    "verify_main",
]
