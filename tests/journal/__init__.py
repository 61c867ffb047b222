"""Helpers shared by the journal tests: real files, the real sqlite3 shell, an independent auditor."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from controller.journal import Classification, Journal, Record

SQLITE3 = "/usr/bin/sqlite3"
ROOT = Path(__file__).resolve().parents[2]  # child processes import controller from here
DROP_GUARDS = "DROP TRIGGER IF EXISTS records_no_update; DROP TRIGGER IF EXISTS records_no_delete;\n"

Entry = tuple[str, dict[str, Any], Classification, float]


def sample_entries(n: int, start: int = 0) -> list[Entry]:
    """A plausible mix of kinds and classifications; enough variety that every column matters."""
    out: list[Entry] = []
    kinds = [
        ("card_dealt", Classification.PUBLIC),
        ("hole_card_dealt", Classification.UNTIL_REVEALED),
        ("reader_result", Classification.SECRET),
        ("round_settled", Classification.PUBLIC),
    ]
    for i in range(start, start + n):
        kind, cls = kinds[i % len(kinds)]
        payload = {"round": i // 4 + 1, "box": i % 7, "card": "QH", "odds": [3, 2], "note": "é ✓", "w": 1.5}
        out.append((kind, payload, cls, 1_765_000_000.25 + i * 0.125))
    return out


def fill(path: Path, n: int) -> list[Record]:
    with Journal.open(path) as j:
        return j.append_many(sample_entries(n))


def shell(db: Path, sql: str) -> subprocess.CompletedProcess[str]:
    """Run SQL through the sqlite3 command-line shell, the tool an auditor (or a tamperer) has."""
    return subprocess.run([SQLITE3, "-bail", str(db)], input=sql, text=True, capture_output=True, check=False)


def tamper(db: Path, sql: str) -> None:
    """Edit the file behind the journal's back, dropping the append-only guards first as one must."""
    done = shell(db, DROP_GUARDS + sql)
    assert done.returncode == 0, done.stderr


def auditor_hashes_hold(db: Path) -> bool:
    """Recompute every hash exactly as docs/journal.md tells an auditor to, without controller code."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT seq, at, kind, classification, payload, prev_hash, hash FROM records ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    prev = "0" * 64
    for seq, at, kind, cls, payload, prev_hash, stored in rows:
        text = json.dumps(
            [seq, at, kind, cls, json.loads(payload), prev_hash],
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != stored or prev_hash != prev:
            return False
        prev = stored
    return True
