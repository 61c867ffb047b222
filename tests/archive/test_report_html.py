"""``tablectl archive report --html``: a floor's gaming day as pictures, opened in a real browser
(Debian's chromium through Playwright): four charts, every one an inline SVG, and the page asks
the network for nothing. With REPORT_SCREENSHOT=FILE the test saves the page as a PNG
(docs/scale-out.md's; tests/support/report_screenshot.py makes it on its own)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from controller.archive.report_html import fold
from controller.cli import main
from tests.support.floor_day import DAY, make_day

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def open_report(page_file: Path, screenshot: Path | None = None) -> dict[str, object]:
    """What a browser shows of the file: the charts, their titles, and every request made."""
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_file.as_uri())
            seen = {
                "title": page.title(),
                "figures": page.locator("figure").evaluate_all("fs => fs.map(f => f.id)"),
                "svgs": page.locator("figure > svg").count(),
                "texts": page.locator("figure svg text").all_text_contents(),
                "summary_rows": page.locator("#summary tr").count(),
                "widths": page.locator("figure > svg").evaluate_all(
                    "ss => ss.map(s => s.getBoundingClientRect().width)"
                ),
            }
            if screenshot is not None:
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    seen["requests"] = requests
    return seen


def test_the_day_as_pictures_in_one_self_contained_page(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make_day(tmp_path, db, rounds=24)
    out = tmp_path / "day.html"
    assert main(["archive", "report", "--db", db, "--day", DAY.isoformat(), "--html", str(out)]) == 0
    said = capsys.readouterr()
    assert "dub-01" in said.out  # the text report still prints
    assert said.err == f"archive report: gaming day {DAY} as pictures in {out}\n"
    text = out.read_text(encoding="utf-8")
    # Nothing to fetch: no script, stylesheet link, image source or external reference.
    assert not any(tag in text for tag in ("<script", "<link", "src=", 'href="http', "<metadata"))
    shot = os.environ.get("REPORT_SCREENSHOT")
    seen = open_report(out, Path(shot) if shot else None)
    assert seen["title"] == f"Gaming day {DAY}: the floor"
    assert seen["figures"] == ["pace-tables", "pace-dealers", "house", "alarms"] and seen["svgs"] == 4
    assert seen["requests"] == [out.as_uri()]  # nothing fetched beyond the file itself
    assert seen["summary_rows"] == 1 + 3
    assert all(isinstance(w, float | int) and w > 500 for w in seen["widths"])  # type: ignore[attr-defined]
    texts = " ".join(seen["texts"])  # type: ignore[arg-type]
    for words in ("example-floor/dub-01", "ann", "carla", "bet", "685a.7(a)", "local time"):
        assert words in texts, words

    # The layout rules of tests/archive/test_report_layout.py hold for the archived day too.
    from tests.archive.test_report_layout import layout, overlapping_texts

    for figure in layout(out):
        assert overlapping_texts(figure) == [], figure["id"]
        assert len(figure["ticks"]) >= 4, figure["id"]


def test_the_fold_counts_rounds_per_dealer_and_the_house_net(tmp_path: Path, db: str) -> None:
    import psycopg

    from controller.archive.report_html import _DEALER_BEFORE, _EVENTS

    make_day(tmp_path, db, rounds=12)
    with psycopg.connect(db) as conn:
        before = {f"{s}/{t}": n for s, t, n in conn.execute(_DEALER_BEFORE, (DAY, DAY))}
        floor = fold(DAY, conn.execute(_EVENTS, (DAY,)), before)
        settled = conn.execute("SELECT count(*) FROM events WHERE kind = 'round_settled'").fetchone()
    assert settled is not None
    by_dealer = {d: sum(h.values()) for d, h in floor.rounds_by_dealer.items()}
    # Each table: the first dealer deals the first half of its rounds, the second the rest.
    assert by_dealer == {"ann": 6, "bob": 6, "carla": 6, "dev": 6, "erin": 6, "finn": 6}
    assert sum(sum(h.values()) for h in floor.rounds_by_table.values()) == settled[0] == 36
    # Two alarms: the shoe's (halting, cleared when it came back) and the keypad's (acknowledged).
    assert sorted((a.table.split("/")[1], a.halts, a.acknowledged is not None) for a in floor.alarms) == [
        ("dab-01", False, True),
        ("dub-01", True, True),
    ]
    assert floor.house["bet"], "every blackjack round settles the bet"
    times = [when for when, _ in floor.house["bet"]]
    assert times == sorted(times)  # the floor's running total, all tables in time order
