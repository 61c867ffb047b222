"""The HTML report's charts as a browser lays them out (Debian's chromium through Playwright),
held to layout rules for a busy day at any span (issue 37: one tick for two hours of data, alarm
labels overlapping into a blur, halting bars hidden under others):

- no two pieces of text of a chart overlap (tick labels, titles, legends, alarm labels);
- every time axis has at least MIN_TICKS labels, all different, in time order;
- every halting alarm's bar is drawn, and no other bar lies over it."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from controller.archive.report_html import MIN_TICKS, alarm_lanes, fold, render
from tests.support.busy_day import DAY, busy_rows, summary_rows

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HALT = "#c0392b"

# Per figure: every text's box and words, the x tick labels, and the alarm bars' boxes and fill.
_MEASURE = """
figs => figs.map(f => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const texts = [...f.querySelectorAll("text")].filter(t => t.textContent.trim() !== "")
    .map(t => ({text: t.textContent, box: box(t)}));
  const ticks = [...f.querySelectorAll("g[id^=xtick] text")].map(t => t.textContent);
  const bars = [...f.querySelectorAll("g[id^=PolyCollection] path")]
    .map(p => ({fill: (p.getAttribute("style") || "") + (p.getAttribute("fill") || ""), box: box(p)}));
  return {id: f.id, texts, ticks, bars};
})
"""


def layout(page_file: Path) -> list[dict[str, Any]]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(page_file.as_uri())
            figures: list[dict[str, Any]] = page.locator("figure").evaluate_all(_MEASURE)
        finally:
            browser.close()
    return figures


def _overlap(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack


def overlapping_texts(figure: dict[str, Any]) -> list[tuple[str, str]]:
    texts = figure["texts"]
    return [
        (a["text"], b["text"])
        for i, a in enumerate(texts)
        for b in texts[i + 1 :]
        if _overlap(a["box"], b["box"])
    ]


@pytest.mark.parametrize("span_h", [1 / 3, 2, 18], ids=["20 minutes", "2 hours", "18 hours"])
def test_a_busy_day_in_chromium_keeps_the_layout_rules(span_h: float, tmp_path: Path) -> None:
    floor = fold(DAY, busy_rows(timedelta(hours=span_h)), {})
    halting = sum(1 for a in floor.alarms if a.halts)
    assert halting >= 20 and len(floor.alarms) >= 50  # busy: clusters on every table
    out = tmp_path / "day.html"
    out.write_text(render(DAY, summary_rows(), floor), encoding="utf-8")
    figures = {f["id"]: f for f in layout(out)}
    assert list(figures) == ["pace-tables", "pace-dealers", "house", "alarms"]
    for name, figure in figures.items():
        assert overlapping_texts(figure) == [], name
        ticks = figure["ticks"]
        assert len(ticks) >= MIN_TICKS and len(set(ticks)) == len(ticks), (name, ticks)
    bars = figures["alarms"]["bars"]
    red = [b for b in bars if HALT in b["fill"]]
    assert len(red) == halting  # every halting alarm drawn
    for bar in red:
        assert bar["box"][2] - bar["box"][0] >= 3  # wide enough to see
        others = [b for b in bars if b is not bar]
        assert not any(_overlap(bar["box"], b["box"], slack=0.0) for b in others), bar


def test_alarm_lanes_put_overlapping_intervals_apart_and_reuse_a_free_lane() -> None:
    spans = [(0.0, 5.0), (1.0, 2.0), (2.0, 3.0), (6.0, 7.0), (4.0, 6.5)]
    lanes = alarm_lanes(spans)
    assert lanes == [0, 1, 1, 0, 1]
    for i, a in enumerate(spans):
        for j, b in enumerate(spans[i + 1 :], i + 1):
            if lanes[i] == lanes[j]:
                assert a[1] <= b[0] or b[1] <= a[0], (a, b)
