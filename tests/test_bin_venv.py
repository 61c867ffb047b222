"""bin/_venv.sh (bin/test, bin/tablectl): one install stamp for both, dev a superset of run, so
switching between the two commands installs nothing (issue 26), and a change of pins installs
again. Run against a stand-in venv whose python records what it was asked to do."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _checkout(tmp: Path) -> Path:
    root = tmp / "checkout"
    (root / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "bin" / "_venv.sh", root / "bin" / "_venv.sh")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copy(ROOT / "constraints.txt", root / "constraints.txt")
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\necho "$*" >> {root}/installs\n', encoding="utf-8")
    python.chmod(0o755)
    return root


def _source(root: Path, mode: str) -> None:
    subprocess.run(
        ["bash", "-c", f'source "{root}/bin/_venv.sh" {mode}'], check=True, timeout=30, env=os.environ
    )


def _installs(root: Path) -> list[str]:
    log = root / "installs"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [line for line in lines if " -e " in line]


def test_switching_between_bin_test_and_bin_tablectl_installs_once(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    _source(root, "dev")
    _source(root, "run")
    _source(root, "dev")
    _source(root, "run")
    (install,) = _installs(root)
    assert install.endswith(f"-e {root}[dev]")


def test_run_then_dev_adds_the_dev_tools_once_and_new_pins_install_again(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    _source(root, "run")
    _source(root, "run")
    _source(root, "dev")
    _source(root, "run")
    assert [line.rsplit(" ", 1)[-1] for line in _installs(root)] == [f"{root}[report]", f"{root}[dev]"]
    with (root / "constraints.txt").open("a", encoding="utf-8") as f:
        f.write("# a new pin\n")
    _source(root, "run")
    assert len(_installs(root)) == 3


def test_the_first_run_says_what_it_is_doing_and_a_later_one_says_nothing(tmp_path: Path) -> None:
    """Issue 37: the first bin/tablectl was silent for 75 s while it built the venv."""
    root = _checkout(tmp_path)
    command = ["bash", "-c", f'source "{root}/bin/_venv.sh" run']
    said = [subprocess.run(command, check=True, timeout=30, capture_output=True, text=True) for _ in range(2)]
    first = said[0].stderr
    assert "bin: installing tablectl and the pinned dependencies" in first, first
    assert first.rstrip().endswith(f"bin: {root}/.venv is ready"), first
    assert said[0].stdout == ""  # stdout stays the command's
    assert said[1].stderr == "" and said[1].stdout == ""  # installed: nothing to say
