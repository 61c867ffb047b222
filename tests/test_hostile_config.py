"""Issue 11 item 7: config and journal inputs that gave tracebacks or were silently accepted.
Each is refused by ``tablectl config check`` with exit 2 and one line naming the file, the key
and the rule."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.supervisor.cli import check_main
from controller.supervisor.rig import ROOT

TABLE = "tables/double-attack.toml"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A copy of the shipped config tree, to spoil one file of."""
    shutil.copytree(
        ROOT / "config", tmp_path / "config", ignore=shutil.ignore_patterns("mosquitto", "systemd")
    )
    return tmp_path / "config"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def _not_utf8(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"# ", b"# caf\xe9 ", 1))


CASES: list[tuple[str, Callable[[Path], None], str, str, str]] = [
    # (id, spoil the tree, file that must be named, key, rule)
    ("table file not UTF-8", lambda c: _not_utf8(c / TABLE), TABLE, "", "not UTF-8 (byte"),
    (
        "game file not UTF-8",
        lambda c: _not_utf8(c / "games/double-attack.toml"),
        "games/double-attack.toml",
        "",
        "not UTF-8 (byte",
    ),
    (
        "sim number of the wrong type",
        lambda c: _edit(c / TABLE, "cycle_s = 30", 'cycle_s = "fast"'),
        TABLE,
        "devices.shuffler.sim.cycle_s",
        "must be a number of seconds",
    ),
    (
        "sim decks of the wrong type",
        lambda c: _edit(c / TABLE, "decks = 8", "decks = 8.5"),
        TABLE,
        "devices.shuffler.sim.decks",
        "whole number of decks",
    ),
    (
        "deeply nested TOML",
        lambda c: _append(c / TABLE, "\n[extra]\nx = " + "[" * 5000 + "]" * 5000 + "\n"),
        TABLE,
        "",
        "nested deeper than 32 levels",
    ),
    (
        "ca_file that is not a certificate",
        lambda c: (
            (c / "tables/not-a-ca.pem").write_text("hello\n", encoding="utf-8"),
            _append(
                c / TABLE, '\n[telemetry]\nbroker = "mqtts://127.0.0.1:8883"\nca_file = "not-a-ca.pem"\n'
            ),
        ),
        TABLE,
        "telemetry.ca_file",
        "not a usable CA certificate",
    ),
    (
        "unknown [telemetry] key",
        lambda c: _append(c / TABLE, "\n[telemetry]\nrequier_tls = true\n"),
        TABLE,
        "telemetry.requier_tls",
        "unknown key",
    ),
    (
        "duplicate RTU id on one line",
        lambda c: _edit(c / TABLE, "device_id = 3", "device_id = 2"),
        TABLE,
        "devices.keypad.device_id",
        "one id per RTU line",
    ),
    (
        "negative cycle_s",
        lambda c: _edit(c / TABLE, "cycle_s = 30", "cycle_s = -30"),
        TABLE,
        "devices.shuffler.sim.cycle_s",
        "above 0",
    ),
    (
        "cover_fraction = 2",
        lambda c: _edit(c / TABLE, "cover_fraction = 0.25", "cover_fraction = 2"),
        TABLE,
        "devices.shoe.sim.cover_fraction",
        "fraction of the shoe",
    ),
]


@pytest.mark.parametrize(("spoil", "named", "key", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_in_one_line_naming_file_key_and_rule(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    spoil: Callable[[Path], None],
    named: str,
    key: str,
    rule: str,
) -> None:
    assert check_main([str(config / TABLE)]) == 0
    capsys.readouterr()
    spoil(config)
    assert check_main([str(config / TABLE)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert str(config / named) in err or named.split("/")[-1] in err, err
    assert not key or f"{key}: " in err, err
    assert rule in err, err


def test_the_cli_exits_2_with_the_one_line(config: Path) -> None:
    _edit(config / TABLE, "cover_fraction = 0.25", "cover_fraction = 2")
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli", "config", "check", str(config / TABLE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().endswith(
        "devices.shoe.sim.cover_fraction: must be a fraction of the shoe between 0.01 and 0.99"
    )
