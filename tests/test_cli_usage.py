"""A newcomer's first commands: usage mistakes end in a usage line and exit 2, never a
traceback, and --help works on every subcommand."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main


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
    assert main(["simulate", "--game", "dj-wild", "--rounds", "10", "--seed", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        "\n" not in err
        and "687a" in err
        and err.endswith("tablectl demo --game dj-wild plays it through its devices")
    )
