"""Make docs/archive-report.png: a small floor's gaming day (tests/support/floor_day.py) archived in
a throwaway PostgreSQL cluster, ``tablectl archive report --html``, and the page as Debian's
chromium shows it. Run from the checkout: ``.venv/bin/python -m tests.support.report_screenshot``."""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

import psycopg

from controller.cli import main as tablectl
from tests import postgres_fixtures
from tests.archive.test_report_html import open_report
from tests.support.floor_day import DAY, make_day

ROOT = Path(__file__).resolve().parents[2]


def make(out: Path) -> None:
    cluster = postgres_fixtures.make_cluster()
    try:
        name = f"shot_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        dsn = cluster.dsn.replace("/postgres?", f"/{name}?")
        with tempfile.TemporaryDirectory() as work:
            make_day(Path(work), dsn, rounds=90)
            page = Path(work) / "day.html"
            code = tablectl(["archive", "report", "--db", dsn, "--day", DAY.isoformat(), "--html", str(page)])
            if code != 0:
                raise SystemExit(code)
            open_report(page, screenshot=out)
    finally:
        postgres_fixtures.remove(cluster)


if __name__ == "__main__":
    make(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "archive-report.png")
