"""`tablectl round` reproduces every hand-derived script in tests/scripts/ (issue 2, §4).

Each case was worked out by hand from the regulation text and docs/rulings.md, independently of
the engine; its "cite" names the sections it exercises. A legal case must settle exactly as
written; an illegal one must be refused with a one-line error that starts with the section named.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.errors import TablectlError
from controller.games import blackjack_games
from controller.script import run_script

SCRIPTS = sorted((Path(__file__).parent / "scripts").glob("*/*.json"))


def _case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def load(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text())
    assert case.get("cite"), f"{path.name} cites no section"
    assert ("expect" in case) != ("error" in case), f"{path.name} needs exactly one of expect/error"
    return case


def test_there_are_enough_hand_derived_cases() -> None:
    assert len(SCRIPTS) >= 60
    games = {p.parent.name for p in SCRIPTS}
    assert games == set(blackjack_games())  # every game the rules engine plays


@pytest.mark.parametrize("path", SCRIPTS, ids=_case_id)
def test_script(path: Path) -> None:
    case = load(path)
    text = json.dumps(case["script"])
    if "error" in case:
        with pytest.raises(TablectlError) as refused:
            run_script(text)
        line = str(refused.value)
        assert "\n" not in line
        assert line.startswith(case["error"]), f"refused for the wrong rule: {line}"
        return
    got = run_script(text)
    want = case["expect"]
    assert got["dealer"] == want["dealer"], case["why"]
    assert [s["seat"] for s in got["seats"]] == [s["seat"] for s in want["seats"]]
    for g, w in zip(got["seats"], want["seats"], strict=True):
        assert g["hands"] == w["hands"], f"seat {w['seat']}: {case['why']}"
        assert g["net"] == {**dict.fromkeys(g["net"], 0), **w["net"]}, f"seat {w['seat']}: {case['why']}"
        assert g["total"] == w["total"]


def _tablectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def test_cli_prints_the_settlement_and_exits_0() -> None:
    path = next(p for p in SCRIPTS if "expect" in load(p))
    proc = _tablectl("round", "--script", str(path.with_suffix(".json")), stdin=None)
    # The case file wraps the script; the CLI reads a bare script, here from stdin.
    proc = _tablectl("round", "--script", "-", stdin=json.dumps(load(path)["script"]))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["dealer"] == load(path)["expect"]["dealer"]


@pytest.mark.parametrize(
    ("script", "starts"),
    [
        ('{"game": "down-under", "shoe": ["KS"], "seats": [', "script: not valid JSON"),
        ('{"game": "baccarat", "shoe": ["KS"], "seats": []}', "game: unknown game 'baccarat'"),
        ('{"game": "down-under", "shoe": ["ZZ"], "seats": [{"seat": 1}]}', "script: shoe: no such"),
        (
            '{"game": "down-under", "shoe": ["KS","5H","9D","7C"], '
            '"seats": [{"seat": 1, "wagers": {"bet": 10}, "actions": ["surrender"]}]}',
            "685a.7(i)(2): players may not surrender in Down Under Blackjack",
        ),
    ],
)
def test_cli_refuses_with_one_line_and_exit_2(script: str, starts: str) -> None:
    proc = _tablectl("round", "--script", "-", stdin=script)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), proc.stderr


def test_cli_names_an_unreadable_file(tmp_path: Path) -> None:
    proc = _tablectl("round", "--script", str(tmp_path / "missing.json"))
    assert proc.returncode == 2
    assert "missing.json: cannot read" in proc.stderr


def test_every_case_file_is_accepted_by_round_script_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    """`tablectl round --script FILE` plays a case file's script (its cite, why and expect aside)."""
    from controller.cli import main

    for path in SCRIPTS:
        case = load(path)
        code = main(["round", "--script", str(path)])
        out, err = capsys.readouterr()
        if "error" in case:
            assert code == 2 and err.startswith(case["error"]), path.name
        else:
            assert code == 0 and json.loads(out) == run_script(json.dumps(case["script"])), path.name


def test_a_case_file_with_an_unknown_key_is_refused() -> None:
    with pytest.raises(TablectlError, match=r"^case: unknown key 'note'"):
        run_script(json.dumps({"cite": ["A1"], "note": "x", "script": {}}))
