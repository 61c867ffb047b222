"""Logs carry no card (issue 11): full shoes played by ``tablectl demo`` in its own process while
the hole-card reader answers now and then under the keypad's unit id on their shared RTU line.
pymodbus then logs ``request ask for id=2 but got id=3`` with its recent frames appended in hex
(reader answers and shoe rings: card words before they are public). Every line the process
printed, on stdout and stderr, must be one of our JSON objects, with no frame and no card.

The check is stricter than "no card before it is public": the controller logs kinds of events,
never cards, so any card code in any line fails, whatever the journal says of its reveal.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from controller.supervisor.rig import ROOT

CARD = re.compile(r"(?<![A-Za-z0-9])(?:10|[2-9TJQKA])[CDHS](?![A-Za-z0-9])")
FRAME = re.compile(r">>>>>|\b(?:send|recv|extra)\s*:|(?:0x[0-9a-fA-F]{1,2}\s+){3,}")


def test_no_frame_and_no_card_reaches_any_line_of_the_process(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.supervisor.child_wrong_id", "--no-ui",
         "--game", "down-under", "--rounds", "40", "--seed", "11", "--journal", str(journal)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines() + proc.stderr.splitlines()
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["shoes"] >= 3 and summary["journal_verified"], summary
    mismatches = [line for line in lines if "but got id=" in line]
    assert mismatches, "the fault was not provoked: nothing to prove"
    with sqlite3.connect(journal) as db:
        cards = {json.loads(p)["card"] for (p,) in db.execute("SELECT payload FROM records") if '"card"' in p}
    assert len(cards) > 40  # full shoes: the journal names most of the deck
    for line in lines:
        doc = json.loads(line)  # one JSON object per line, never a raw library line
        assert (isinstance(doc, dict) and "event" in doc) or "game" in doc, line
        assert not FRAME.search(line), line
        leaked = set(CARD.findall(line)) & cards
        assert not leaked, (leaked, line)
