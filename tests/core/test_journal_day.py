"""A gaming day through the table core into a journal (issue 3, "Done when"):
`tablectl simulate --journal` then `journal verify` exits 0; any single record changed with the
sqlite3 shell makes it exit 1; the table rebuilt from the journal is the live table; a round can be
shown for a dispute; nothing secret is public."""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from controller.cli import main
from controller.game_config import default_options
from controller.journal import Classification, Journal
from controller.table.events import REVEALING_KINDS, SECRET_FIELDS
from controller.table.recorder import JournaledTable
from controller.table.virtual import VirtualTable
from tests.journal import tamper


def tablectl(*args: str) -> subprocess.CompletedProcess[str]:
    """``tablectl ARGS`` through the command's own ``main``, in this process: its exit status and
    what it wrote on stdout and stderr. (A process each cost a second of imports and, for the day,
    an fsync per record; tests/journal/test_files.py and tests/test_simulate.py run these commands
    as processes of their own.)"""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse's refusals
            code = e.code if isinstance(e.code, int) else 2
    return subprocess.CompletedProcess(["tablectl", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("day") / "day.db"
    proc = tablectl(
        "simulate",
        "--game",
        "down-under",
        "--seats",
        "2",
        "--rounds",
        "400",
        "--seed",
        "3",
        "--journal",
        str(path),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rounds"] == 400
    return path


def test_the_days_journal_verifies(day: Path) -> None:
    proc = tablectl("journal", "verify", str(day))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "chain intact" in proc.stdout


@pytest.mark.parametrize(
    ("sql", "bad"),
    [
        (
            "UPDATE records SET payload = replace(payload, '\"seat\":1', '\"seat\":2') WHERE seq = {mid}",
            "record {mid}:",
        ),
        ("UPDATE records SET classification = 'public' WHERE seq = {secret}", "record {secret}:"),
        ("UPDATE records SET at = at + 1 WHERE seq = 2", "record 2:"),
        ("DELETE FROM records WHERE seq = {mid}", "records jump from {before} to {after}"),
        ("UPDATE records SET kind = 'decision' WHERE seq = {last}", "record {last}:"),
    ],
)
def test_any_single_changed_record_makes_verify_exit_1(day: Path, tmp_path: Path, sql: str, bad: str) -> None:
    copy = tmp_path / "copy.db"
    copy.write_bytes(day.read_bytes())
    con = sqlite3.connect(day)
    last = con.execute("SELECT max(seq) FROM records").fetchone()[0]
    secret = con.execute("SELECT min(seq) FROM records WHERE classification = 'secret'").fetchone()[0]
    mid = con.execute(
        "SELECT min(seq) FROM records WHERE kind = 'card_dealt' AND payload LIKE '%\"seat\":1}' AND seq > ?",
        (last // 2,),
    ).fetchone()[0]
    con.close()
    values = {"mid": mid, "secret": secret, "last": last, "before": mid - 1, "after": mid + 1}
    tamper(copy, sql.format(**values))  # with the sqlite3 shell, the append-only triggers dropped first
    proc = tablectl("journal", "verify", str(copy))
    assert proc.returncode == 1, proc.stdout
    assert bad.format(**values) in proc.stdout, proc.stdout
    assert len(proc.stdout.splitlines()) == 1


def test_the_table_rebuilt_from_the_journal_is_the_live_table(tmp_path: Path) -> None:
    """Journal is the source of truth: after a restart, state = replay."""
    options = default_options("double-back-jack")
    path = tmp_path / "t.db"
    recorder = JournaledTable.open(path, options, "dbj-01", now=1_800_000_000.0)
    live = VirtualTable(options, random.Random(9), seats=3, recorder=recorder)
    live.open_table()
    for _ in range(150):
        live.play_round()
    recorder.close()
    rebuilt = JournaledTable.open(path, options, "dbj-01", now=1_800_000_000.0)
    assert rebuilt.table.fingerprint() == live.table.fingerprint()
    # ... and play goes on from there, into the same journal.
    again = VirtualTable(options, random.Random(10), seats=3, recorder=rebuilt)
    again.now = live.now
    again.stack, again.behind_cover = live.stack, live.behind_cover
    for _ in range(20):
        again.play_round()
    rebuilt.close()
    assert tablectl("journal", "verify", str(path)).returncode == 0


def test_a_journal_of_another_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    JournaledTable.open(path, default_options("down-under"), "du-01", now=0.0).close()
    with pytest.raises(Exception, match="belongs to table du-01"):
        JournaledTable.open(path, default_options("double-attack"), "da-01", now=0.0)


def test_journal_show_reconstructs_a_round_for_a_dispute(day: Path) -> None:
    """673a.7(u), 665a.7(q), 685a.7(s): each box's cards and decisions, the dealer's cards, the reader, every
    wager's settlement with its section."""
    proc = tablectl("journal", "show", str(day), "--round", "37")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith("Round 37 at sim-down-under (Down Under Blackjack)")
    for part in (
        "Box 1: Bet 10",
        "What happened, in order:",
        "Dealer's up card",
        "Hole card into the reader",
        "Reader's light:",
        "Money (+ paid to the player, - collected)",
        "685a.",
        "In all: Box 1",
    ):
        assert part in text
    # Surveillance footage is found by the batch's colour and the time of day (issue 34).
    hms = r"\d\d:\d\d:\d\d"
    when = rf"^\w+ batch; \d{{4}}-\d\d-\d\d from {hms} to {hms} America/New_York \(UTC[+-]\d\d:\d\d\)$"
    assert re.search(when, text, re.M), text
    assert re.search(r"^ +\d+  \d\d:\d\d:\d\d  Dealer's up card", text, re.M), text
    data = json.loads(tablectl("journal", "show", str(day), "--round", "37", "--json").stdout)
    assert set(data["boxes"]) == {"1", "2"}
    assert all(line["section"] for line in data["settlement"]["settlements"])
    assert len(data["batches"]) == 1 and f"{data['batches'][0]} batch; " in text
    assert all(e["time"][:10] == data["started"]["time"][:10] for e in data["happened"][:1])
    utc = json.loads(
        tablectl("journal", "show", str(day), "--round", "37", "--json", "--time-zone", "UTC").stdout
    )
    assert utc["started"]["at"] == data["started"]["at"] and utc["started"]["time"].endswith("+00:00")
    bad = tablectl("journal", "show", str(day), "--round", "37", "--time-zone", "Mars/Olympus")
    assert bad.returncode == 2 and "is not an IANA time zone" in bad.stderr.strip().splitlines()[-1]
    missing = tablectl("journal", "show", str(day), "--round", "99999")
    assert missing.returncode == 2 and "round 99999 is not in this journal" in missing.stderr


def test_no_secret_field_is_public_and_hole_cards_are_public_only_once_turned(day: Path) -> None:
    with Journal.open(day, create=False, readonly=True) as journal:
        records = list(journal.records())
    hole_dealt: dict[int, int] = {}
    for r in records:
        if r.classification is Classification.PUBLIC and r.kind not in REVEALING_KINDS:
            assert not SECRET_FIELDS & set(r.payload), r.kind
        if r.kind == "hole_card_dealt":
            assert r.classification is Classification.UNTIL_REVEALED
            hole_dealt[r.payload["round"]] = r.seq
        if r.kind in ("hole_card_turned", "hole_card_exposed"):
            assert r.seq > hole_dealt[r.payload["round"]]
        if r.kind in ("reader_result", "card_burned"):
            assert r.classification is not Classification.PUBLIC
    assert hole_dealt
