"""Regenerate docs/console.md's screenshots from a seeded table.

    .venv/bin/python tools/console_screenshots.py [DIR]     (default: docs/)

The console's browser tests play a virtual table from a fixed seed (tests/console/conftest.py) in
Debian's chromium at a 1024x768 tablet's size; with CONSOLE_SCREENSHOTS set they save each page at
the moment docs/console.md shows it: the dealer's flows (test_browser.py), each game mid-round and
each halting alarm with its way out (test_screens.py). Running them here makes the pictures the
tested flows, so a screenshot can never show a screen the tests do not check.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOTS = (
    "console-dealer.png",
    "console-dealer-bets.png",
    "console-dealer-settled.png",
    "console-keypad-failed.png",
    "console-floor.png",
    "console-floor-void.png",
    "console-lost.png",
    "console-double-back-jack.png",
    "console-double-attack.png",
    "console-down-under.png",
    "console-dj-wild.png",
    "console-alarm-cards-conflict.png",
    "console-alarm-reader-failed.png",
    "console-second-chance.png",
)
TESTS = ("test_browser.py", "test_screens.py")


def main(argv: list[str]) -> int:
    out = Path(argv[0]).resolve() if argv else ROOT / "docs"
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CONSOLE_SCREENSHOTS": str(out)}
    tests = [str(ROOT / "tests" / "console" / name) for name in TESTS]
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(argv, cwd=ROOT, env=env)
    if done.returncode != 0:
        print("console_screenshots: the browser tests failed; the screenshots may be stale", file=sys.stderr)
        return done.returncode
    missing = [name for name in SHOTS if not (out / name).is_file()]
    for name in SHOTS:
        print(out / name)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
