"""The package a user installs works anywhere: the wheel alone, in a fresh venv, from an empty
folder, finds its shipped games, device profiles and example tables and plays a demo."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Every command of tablectl and the actions of those that have some (tests/test_cli_usage.py walks
# the same from the parser).
COMMANDS = [
    "round",
    "simulate",
    "sim",
    "run",
    "demo",
    "broker",
    "config",
    "archive",
    "users",
    "device",
    "monitor",
    "docs",
    "journal",
]
NESTED = ["config check", "archive verify", "archive report", "users add", "users list", "users remove",
          "device check", "journal verify", "journal show"]  # fmt: skip


def _run(*cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600)


# Runs each argv given (a JSON list) through the installed entry point, as `tablectl ARGV` would,
# and prints {argv: [exit status, stdout]} as JSON.
_WALK = """
import contextlib, io, json, sys
from controller.cli import main
sys.argv[0] = "tablectl"  # argparse names the program from it, as the installed script does
out = {}
for argv in json.loads(sys.argv[1]):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    out[" ".join(argv)] = [code, buf.getvalue()]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_wheel_installed_alone_plays_a_demo_from_an_empty_folder(tmp_path: Path) -> None:
    dist, env, empty, src = tmp_path / "dist", tmp_path / "venv", tmp_path / "empty", tmp_path / "src"
    empty.mkdir()
    # Built from a copy: setuptools leaves build/ and *.egg-info in the tree it builds.
    junk = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("controller", "devices", "sim", "config", "docs"):
        shutil.copytree(ROOT / part, src / part, symlinks=True, ignore=junk)
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, src / part)
    built = _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, src, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("tablectl-*.whl")
    venv.create(env, with_pip=True)
    installed = _run(env / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    # The shipped files are inside the installed package, not read from this checkout.
    where = _run(
        env / "bin" / "python",
        "-c",
        "from controller.shipped import table_file; print(table_file('down-under'))",
        cwd=empty,
    )
    assert where.returncode == 0, where.stderr
    assert str(env) in where.stdout and str(ROOT) not in where.stdout
    # A shipped table by name, as README says (issue 26), and the alert rules as package data.
    check = _run(env / "bin" / "tablectl", "config", "check", "down-under", cwd=empty)
    assert check.returncode == 0 and str(env) in check.stdout, check.stderr
    rules = _run(
        env / "bin" / "python", "-c",
        "from controller.shipped import shipped_dir as d; print(len(list(d('prometheus').glob('*.yml'))))",
        cwd=empty,
    )  # fmt: skip
    assert rules.stdout.strip() == "2", rules.stderr
    demo = _run(env / "bin" / "tablectl", "demo", "--no-ui", "--rounds", "20", "--seed", "3", cwd=empty)
    assert demo.returncode == 0, demo.stderr
    summary = json.loads(demo.stdout)
    assert summary["rounds"] == 20
    assert list(empty.iterdir()) == []  # nothing written where it was started

    # Every command's --help exits 0 from the wheel, and every docs/ page a help text points to is
    # printed by `tablectl docs` from the installed package. The walk runs the installed entry point
    # (controller.cli:main) in one interpreter of the wheel's venv: some fifty separate starts cost
    # 40 s quiet and ran this test past its limit on a loaded machine.
    tablectl = env / "bin" / "tablectl"
    assert _run(tablectl, "--help", cwd=empty).stdout.startswith("usage: tablectl")  # the script itself
    argvs = json.dumps([[*c.split(), "--help"] for c in ["", *COMMANDS, *NESTED]])
    walked = _run(env / "bin" / "python", "-c", _WALK, argvs, cwd=empty)
    assert walked.returncode == 0, walked.stderr
    shown: dict[str, list[object]] = json.loads(walked.stdout)
    pointers: set[str] = set()
    for command, (code, out) in shown.items():
        assert code == 0 and str(out).startswith("usage: tablectl"), (command, out)
        pointers.update(re.findall(r"docs/[a-z0-9_./-]*[a-z0-9_/]", str(out)))
    assert {"docs/install.md", "docs/console.md"} <= pointers, pointers
    pages = _run(
        env / "bin" / "python", "-c", _WALK, json.dumps([["docs", p] for p in sorted(pointers)]), cwd=empty
    )
    assert pages.returncode == 0, pages.stderr
    for pointer, (code, out) in json.loads(pages.stdout).items():
        assert code == 0 and str(out).startswith("# "), (pointer, out)
    where = _run(tablectl, "docs", "install", "--path", cwd=empty)
    assert where.stdout.startswith(str(env)), where.stdout  # the installed copy, not the checkout's
    listing = _run(tablectl, "docs", cwd=empty).stdout
    assert "devices/shoe.md" in listing and "scale-out.md" in listing
    assert "tablectl[report]" in _run(tablectl, "docs", "install", cwd=empty).stdout  # the extra is said
