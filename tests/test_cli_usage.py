"""A newcomer's first commands: usage mistakes end in a usage line and exit 2, never a
traceback, and --help works on every subcommand."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from pathlib import Path

import pytest

from controller.cli import build_parser, main


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(argv)
    return int(info.value.code or 0)


def test_config_alone_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["config"]) == 2
    err = capsys.readouterr().err
    assert "usage: tablectl config" in err and "Traceback" not in err


def test_config_check_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["config", "check", "--help"]) == 0
    assert "usage: tablectl config check" in capsys.readouterr().out


@pytest.mark.parametrize("rounds", ["-5", "0", "many"])
def test_demo_refuses_a_number_of_rounds_below_one(rounds: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["demo", "--no-ui", "--rounds", rounds]) == 2
    assert "--rounds: " in capsys.readouterr().err


def test_demo_refuses_an_existing_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "day.db"
    old.write_bytes(b"")
    assert _exit(["demo", "--no-ui", "--rounds", "1", "--journal", str(old)]) == 2
    assert f"--journal {old}: already exists" in capsys.readouterr().err


def test_simulate_dj_wild_is_refused_with_the_reason_and_the_demo_that_plays_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _exit(["simulate", "--game", "dj-wild", "--rounds", "10", "--seed", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "687a" in err and err.endswith("tablectl demo --game dj-wild plays it through its devices")
    assert "Traceback" not in err


def test_simulate_offers_only_the_games_it_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 37: --help offered dj-wild, which simulate then refused."""
    assert _exit(["simulate", "--help"]) == 0
    offered = re.search(r"--game \{([a-z,-]+)\}", capsys.readouterr().out)
    assert offered is not None
    games = offered.group(1).split(",")
    assert "dj-wild" not in games and len(games) == 3
    for game in games:
        assert main(["simulate", "--game", game, "--rounds", "2", "--seed", "1", "--json"]) == 0, game
        assert json.loads(capsys.readouterr().out)["game"] == game


# Every command and every action of one, as a user types them. The top level's commands are
# checked against the parser's own list, so a new command cannot be left out of the walk.
NESTED = {
    "config": ["check"],
    "archive": ["verify", "report"],
    "users": ["add", "list", "remove"],
    "device": ["check"],
    "journal": ["verify", "show"],
}


def _commands() -> list[list[str]]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    out: list[list[str]] = [[]]
    for name in sub.choices:
        out.append([name])
        out.extend([name, action] for action in NESTED.get(name, []))
    return out


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c) or "tablectl")
def test_every_help_exits_0_with_the_usage_on_stdout(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37: ``tablectl device --help`` exited 2."""
    try:
        code = main([*command, "--help"])
    except SystemExit as e:
        code = int(e.code or 0)
    said = capsys.readouterr()
    assert code == 0, said.err
    assert said.out.startswith(f"usage: tablectl {' '.join(command)}".rstrip()), said.out[:200]
    for action in NESTED.get(command[0], []) if len(command) == 1 else []:
        assert action in said.out  # a group's help names its actions


POINTER = re.compile(r"docs/[A-Za-z0-9_./#-]*")


def _help_text(command: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with contextlib.suppress(SystemExit):  # argparse's --help exits 0 (checked above)
        main([*command, "--help"])
    return capsys.readouterr().out


def test_every_pointer_to_docs_in_a_help_or_an_error_opens_with_tablectl_docs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 37: help texts pointed to docs/ pages the wheel does not ship. Every pointer in every
    --help, and in every message of the code (errors, log lines), names a page ``tablectl docs``
    prints; tests/package/test_wheel.py checks the same from an installed wheel."""
    helps = " ".join(_help_text(c, capsys) for c in _commands())
    root = Path(__file__).resolve().parents[1]
    sources = " ".join(
        p.read_text(encoding="utf-8")
        for part in ("controller", "devices", "sim")
        for p in (root / part).rglob("*.py")
    )
    placeholders = {"docs/PAGE", "docs/..."}  # the words that say what a pointer is
    pointers = (set(POINTER.findall(helps)) | set(POINTER.findall(sources))) - placeholders
    assert "docs/mqtt.md" in pointers and any(p in helps for p in pointers)
    for pointer in sorted(pointers):
        assert main(["docs", pointer]) == 0, pointer
        page = capsys.readouterr().out
        # A page, or for docs/ itself the list of pages.
        assert page.startswith("# ") or (pointer == "docs/" and "\nmqtt.md " in page), pointer


def test_tablectl_docs_lists_the_pages_and_refuses_what_is_not_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["docs"]) == 0
    listing = capsys.readouterr().out
    assert "\nmqtt.md " in listing and "devices/shoe.md" in listing
    assert main(["docs", "install", "--path"]) == 0
    assert capsys.readouterr().out.strip().endswith("install.md")
    for outside in ("../README.md", "../pyproject.toml", "/etc/passwd", "nothing-here"):
        assert main(["docs", outside]) == 2
        assert "tablectl docs: no page" in capsys.readouterr().err
