"""What the archive's record checks (issue 23) cost per message, parsed as a worker parses them.

    .venv/bin/python bench/archive_parse.py [--messages 20000] [--rounds 5]

A real journal's events messages (tests/archive/conftest.py's cycle: public records with their
prev_hash, withheld placeholders), parsed by ``parse_event`` with the checks on and, interleaved
round by round in the same process, with ``refusal`` replaced by a no-op: the difference is the
cost of checking each record's kind, classification and payload shape. Printed as JSON: the best
round of each (microseconds per message) and the checks' share of a worker's parse time. CPU time
of one thread; a loaded machine moves both figures alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import sys
import tempfile
import time
from datetime import UTC, datetime

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from controller.archive import messages
from tests.archive.conftest import events_topic, fill_journal, journal_messages


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "j.db"
        fill_journal(path, "dab-01", args.messages)
        bodies = asyncio.run(journal_messages(path))
    topic, now = events_topic("dab-01"), datetime.now(UTC)
    checked = messages.refusal

    def run() -> float:
        t0 = time.thread_time()
        for body in bodies:
            messages.parse_event(topic, body, now)
        return (time.thread_time() - t0) / len(bodies) * 1e6

    best_on = best_off = float("inf")
    for _ in range(args.rounds):
        messages.refusal = checked
        best_on = min(best_on, run())
        messages.refusal = lambda *_: None  # type: ignore[assignment]
        best_off = min(best_off, run())
    messages.refusal = checked
    print(
        json.dumps(
            {
                "messages": len(bodies),
                "parse_us_with_checks": round(best_on, 2),
                "parse_us_without_checks": round(best_off, 2),
                "checks_us": round(best_on - best_off, 2),
                "checks_share": round((best_on - best_off) / best_on, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
