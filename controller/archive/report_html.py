"""``tablectl archive report --html FILE``: a gaming day of the floor as pictures, in one HTML file
that needs nothing else (no script, no font, no fetch: every chart is an SVG written into the page).

What a pit manager looks at: the game pace (rounds settled per hour, per table and per dealer), the
house's result per wager through the day, and when alarms were raised and how long each stayed
open. Times are each table's local wall clock (its ``[table] time_zone``), hours of its gaming day.
Drawn with matplotlib (docs/design.md says why), on its Agg canvas only: no display, no pyplot
state shared between calls. The numbers come from the same archive as ``archive report``.
"""

from __future__ import annotations

import html
import io
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import psycopg

from controller.archive.report import day_report
from controller.errors import TablectlError

# One query for the day's events the pictures need (the (day, kind) index's first columns).
_EVENTS = (
    "SELECT site, table_id, kind, payload, (to_timestamp(at) AT TIME ZONE coalesce(tz, 'UTC')) "
    "FROM events WHERE day = %s AND at IS NOT NULL "
    "AND kind IN ('round_settled', 'new_dealer', 'alarm_raised', 'alarm_acknowledged') "
    "ORDER BY site, table_id, seq"
)
# Who was dealing when the gaming day began: each table's latest new_dealer of the week before.
_DEALER_BEFORE = (
    "SELECT DISTINCT ON (site, table_id) site, table_id, payload ->> 'name' FROM events "
    "WHERE kind = 'new_dealer' AND day < %s AND day >= %s ORDER BY site, table_id, seq DESC"
)
UNKNOWN_DEALER = "(dealer not recorded)"


@dataclass
class Alarm:
    table: str
    section: str
    halts: bool
    raised: datetime
    acknowledged: datetime | None = None


@dataclass
class FloorDay:
    """The day's events, folded into what the pictures show."""

    day: date
    rounds_by_table: dict[str, dict[datetime, int]] = field(default_factory=lambda: defaultdict(dict))
    rounds_by_dealer: dict[str, dict[datetime, int]] = field(default_factory=lambda: defaultdict(dict))
    house: dict[str, list[tuple[datetime, Fraction]]] = field(default_factory=lambda: defaultdict(list))
    alarms: list[Alarm] = field(default_factory=list)
    first: datetime | None = None
    last: datetime | None = None

    def seen(self, when: datetime) -> None:
        self.first = when if self.first is None else min(self.first, when)
        self.last = when if self.last is None else max(self.last, when)


def _count(by_hour: dict[datetime, int], when: datetime) -> None:
    hour = when.replace(minute=0, second=0, microsecond=0)
    by_hour[hour] = by_hour.get(hour, 0) + 1


def fold(day: date, rows: Iterable[tuple[Any, ...]], dealers_before: dict[str, str]) -> FloorDay:
    """``rows`` as _EVENTS returns them (by table, in seq order)."""
    out = FloorDay(day)
    dealer = dict(dealers_before)
    open_alarms: dict[tuple[str, int], Alarm] = {}
    results: list[tuple[datetime, str, Fraction]] = []
    for site, table_id, kind, payload, when in rows:
        table = f"{site}/{table_id}"
        payload = payload or {}
        out.seen(when)
        if kind == "new_dealer":
            dealer[table] = str(payload.get("name", UNKNOWN_DEALER))
        elif kind == "round_settled":
            _count(out.rounds_by_table[table], when)
            _count(out.rounds_by_dealer[dealer.get(table, UNKNOWN_DEALER)], when)
            for s in payload.get("settlements", ()):
                # halves: the player's net in half-stakes; the house's result is its negative.
                house = -Fraction(int(s.get("stake", 0)) * int(s.get("halves", 0)), 2)
                results.append((when, str(s.get("wager")), house))
        elif kind == "alarm_raised":
            alarm = Alarm(table, str(payload.get("section", "?")), bool(payload.get("halts")), when)
            out.alarms.append(alarm)
            open_alarms[(table, int(payload.get("id", 0)))] = alarm
        elif kind == "alarm_acknowledged":
            found = open_alarms.pop((table, int(payload.get("id", 0))), None)
            if found is not None:
                found.acknowledged = when
    # The floor's result per wager in time order, all tables together (the rows come by table),
    # one point per wager every HOUSE_STEP: a floor's day is hundreds of thousands of settlements,
    # and the page stays the same size whatever the floor's.
    net: dict[str, Fraction] = defaultdict(Fraction)
    for when, wager, house in sorted(results, key=lambda r: r[0]):
        net[wager] += house
        step = _step_end(when)
        points = out.house[wager]
        if points and points[-1][0] == step:
            points[-1] = (step, net[wager])
        else:
            points.append((step, net[wager]))
    return out


HOUSE_STEP = timedelta(minutes=5)


def _step_end(when: datetime) -> datetime:
    start = when.replace(minute=when.minute - when.minute % 5, second=0, microsecond=0)
    return start + HOUSE_STEP


# -- the pictures ------------------------------------------------------------------------------

_WIDTH_IN, _HEIGHT_IN = 10.0, 3.6
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_LEGEND_MAX = 16  # beyond this many lines a legend is noise: the lines stay, the legend goes


def _svg(fig: Any) -> str:
    import matplotlib

    buffer = io.StringIO()
    # Text as text, not glyph outlines: a third of the size, and the page can be searched and read
    # by a screen reader.
    with matplotlib.rc_context({"svg.fonttype": "none", "font.family": "sans-serif"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    # Without the XML prolog and DOCTYPE (inline in the page) and the metadata block (the time it
    # was drawn: the same day draws the same page).
    return _METADATA.sub("", text[text.index("<svg") :])


def _figure() -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(_WIDTH_IN, _HEIGHT_IN), layout="constrained")
    return fig, fig.add_subplot()


# Ticks on the time axes: at least this many whatever the span (two hours of data had one tick at
# a fixed two-hour step), at most that many (past it "09:00" and "09:30" run into each other).
MIN_TICKS, MAX_TICKS = 4, 10


def _time_axis(ax: Any, floor: FloorDay) -> None:
    import matplotlib.dates as mdates

    # The locator picks the step (5 min, 15 min, 1 h, 2 h, ...) from the span shown.
    locator = mdates.AutoDateLocator(minticks=MIN_TICKS, maxticks=MAX_TICKS)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))  # type: ignore[no-untyped-call]
    # Further down than the default: the first time, at the chart's corner, ran into the value
    # axis's 0 (the layout test in Chromium measures it).
    ax.tick_params(axis="x", pad=8)
    ax.set_xlabel("local time")
    ax.grid(True, alpha=0.3)
    start, end = _span(floor)
    ax.set_xlim(start, end)


def _span(floor: FloorDay) -> tuple[datetime, datetime]:
    """The time shown: the day's first event to its last, from the quarter hour before to the
    quarter hour after (at least an hour), the same on every chart of the page."""
    if floor.first is None or floor.last is None:
        midnight = datetime.combine(floor.day, datetime.min.time())
        return midnight, midnight + timedelta(hours=1)
    start = floor.first.replace(minute=floor.first.minute - floor.first.minute % 15, second=0, microsecond=0)
    end = max(floor.last, start + timedelta(minutes=45))
    end = end.replace(minute=end.minute - end.minute % 15, second=0, microsecond=0) + timedelta(minutes=15)
    return start, end


def _per_hour(title: str, series: dict[str, dict[datetime, int]], floor: FloorDay, unit: str) -> str:
    fig, ax = _figure()
    for name in sorted(series):
        hours = sorted(series[name])
        # Plotted at the middle of the hour it counts.
        ax.plot(
            [h + timedelta(minutes=30) for h in hours],
            [series[name][h] for h in hours],
            marker="o",
            label=name,
        )
    ax.set_title(title)
    ax.set_ylabel(f"rounds settled per hour ({unit})")
    ax.set_ylim(bottom=0)
    _time_axis(ax, floor)
    if 0 < len(series) <= _LEGEND_MAX:
        ax.legend(loc="upper left", fontsize="small", ncols=2)
    if not series:
        ax.text(0.5, 0.5, "no rounds settled", transform=ax.transAxes, ha="center")
    return _svg(fig)


def _house(floor: FloorDay) -> str:
    fig, ax = _figure()
    for wager in sorted(floor.house):
        points = floor.house[wager]
        ax.step([p[0] for p in points], [float(p[1]) for p in points], where="post", label=wager)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_title("House result per wager, cumulative through the day")
    ax.set_ylabel("house net (table units)")
    _time_axis(ax, floor)
    if floor.house:
        ax.legend(loc="upper left", fontsize="small", ncols=3)
    else:
        ax.text(
            0.5,
            0.5,
            "no settlements (DJ Wild hands are settled at the table)",
            transform=ax.transAxes,
            ha="center",
        )
    return _svg(fig)


# The alarms chart: one row per table, split into as many lanes as its alarms need so that no bar
# and no label lies over another (a label is as wide as its text; a browser's font is a little
# wider than matplotlib's, hence the margin).
_LANE_IN = 0.32  # the height of one lane
_LABEL_PT = 7.0  # the labels' font size
_LABEL_MARGIN = 1.35  # a browser's sans-serif against matplotlib's DejaVu Sans, and a gap
_MIN_BAR_PX = 4.0  # an alarm acknowledged within the minute is still seen


def alarm_lanes(spans: list[tuple[float, float]]) -> list[int]:
    """For intervals (start, end) in one row, in any order: each one's lane, the lowest whose
    intervals all end before it starts (first fit, by start). Pure, for the tests."""
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    ends: list[float] = []  # per lane, where its last interval ends
    lane = [0] * len(spans)
    for i in order:
        start, end = spans[i]
        free = next((n for n, e in enumerate(ends) if e <= start), None)
        if free is None:
            free = len(ends)
            ends.append(end)
        ends[free] = end
        lane[i] = free
    return lane


def _alarms(floor: FloorDay) -> str:
    import matplotlib.dates as mdates
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    tables = sorted({a.table for a in floor.alarms})
    start, end = _span(floor)
    x0, x1 = float(mdates.date2num(start)), float(mdates.date2num(end))  # type: ignore[no-untyped-call]
    # The plot's width in points, as the figure is laid out below (the table names on the left
    # take their share): a label's width in points, over this, is its width in days.
    width_pt = (_WIDTH_IN - 0.7 - 0.075 * max((len(t) for t in tables), default=6)) * 72
    per_pt = (x1 - x0) / width_pt
    font = FontProperties(family="sans-serif", size=_LABEL_PT)
    boxes: list[tuple[Alarm, float, float, str, bool]] = []  # alarm, bar start and width, label, at its right
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for alarm in floor.alarms:
        left = float(mdates.date2num(alarm.raised))  # type: ignore[no-untyped-call]
        right = float(mdates.date2num(alarm.acknowledged or floor.last or end))  # type: ignore[no-untyped-call]
        width = max(right - left, _MIN_BAR_PX * per_pt)
        label = f"{alarm.section} {alarm.raised:%H:%M}" + ("" if alarm.acknowledged else " (open)")
        text = (TextPath((0, 0), label, prop=font).get_extents().width * _LABEL_MARGIN + 4) * per_pt
        # The label starts at the bar's start, or ends at the chart's right edge when it would
        # run past it (an alarm late in the day).
        at_right = left + text > x1
        boxes.append((alarm, left, width, label, at_right))
        # What the alarm takes in its lane: its bar and its label.
        spans[alarm.table].append(
            (min(left, x1 - text) if at_right else left, max(left + width, left + text))
        )
    lanes: dict[int, int] = {}
    base: dict[str, int] = {}  # a table's first lane, counted from the top
    used = 0
    for table in tables:
        mine = [i for i, b in enumerate(boxes) if b[0].table == table]
        for i, lane in zip(mine, alarm_lanes(spans[table]), strict=True):
            lanes[i] = lane
        base[table] = used
        used += max((lanes[i] for i in mine), default=0) + 1
    rows = max(used, 1)
    fig = Figure(figsize=(_WIDTH_IN, 1.3 + rows * _LANE_IN), layout="constrained")
    ax = fig.add_subplot()
    # Halting alarms drawn last, over the rest, so none hides under an advisory one.
    # A lane (y to y + 1, the top of the chart at 0): the label in its upper half, the bar below.
    for i, (alarm, left, width, label, at_right) in sorted(enumerate(boxes), key=lambda b: b[1][0].halts):
        y = base[alarm.table] + lanes[i]
        colour = "#c0392b" if alarm.halts else "#e67e22"
        ax.broken_barh([(left, width)], (y + 0.52, 0.38), facecolors=colour, zorder=3 if alarm.halts else 2)
        ax.text(x1 if at_right else left, y + 0.06, label, fontsize=_LABEL_PT, va="top",
                ha="right" if at_right else "left")  # fmt: skip
    ax.set_yticks([base[t] + 0.5 for t in tables], tables)
    for table in tables[1:]:  # a line between tables, so a table's lanes read as one row
        ax.axhline(base[table], color="#999", linewidth=0.6)
    ax.set_ylim(rows, 0)  # the first table on top
    ax.set_title("Alarms: raised to acknowledged (red halts dealing, orange does not)")
    _time_axis(ax, floor)
    if not floor.alarms:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no alarms", transform=ax.transAxes, ha="center")
    return _svg(fig)


# -- the page ----------------------------------------------------------------------------------

_STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 0.5em 0; } figure svg { width: 100%; height: auto; }
"""


def _summary(rows: list[dict[str, Any]]) -> str:
    head = "<tr><th>table</th><th>rounds</th><th>voided</th><th>shoes</th><th>events</th><th>alarms</th></tr>"
    body = "".join(
        f"<tr><td>{html.escape(r['site'])}/{html.escape(r['table'])}</td><td>{r['rounds']}</td>"
        f"<td>{r['rounds_voided']}</td><td>{r['shoes']}</td><td>{r['events']}</td>"
        f"<td>{sum(r['alarms_by_section'].values())}</td></tr>"
        for r in rows
    )
    return f"<table id='summary'>{head}{body}</table>"


def render(day: date, rows: list[dict[str, Any]], floor: FloorDay) -> str:
    charts = [
        ("pace-tables", _per_hour("Game pace per table", floor.rounds_by_table, floor, "per table")),
        ("pace-dealers", _per_hour("Game pace per dealer", floor.rounds_by_dealer, floor, "per dealer")),
        ("house", _house(floor)),
        ("alarms", _alarms(floor)),
    ]
    figures = "".join(f"<figure id='{name}'>{svg}</figure>" for name, svg in charts)
    rounds = sum(r["rounds"] for r in rows)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Gaming day {day}: the floor</title><style>{_STYLE}</style></head><body>"
        f"<h1>Gaming day {day}: the floor</h1>"
        f"<p>{len(rows)} tables, {rounds} rounds settled, {len(floor.alarms)} alarms. Times are each "
        "table's local time; money in table units (a sensed spot is 10).</p>"
        f"{_summary(rows)}{figures}</body></html>\n"
    )


def write_html(conn: psycopg.Connection[Any], day: date, path: Path) -> FloorDay:
    rows = day_report(conn, day)
    before = {
        f"{site}/{table_id}": str(name)
        for site, table_id, name in conn.execute(_DEALER_BEFORE, (day, day - timedelta(days=7)))
    }
    floor = fold(day, conn.execute(_EVENTS, (day,)), before)
    page = render(day, rows, floor)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as e:
        raise TablectlError(f"archive report: --html {path}: {e.strerror or e}") from None
    return floor


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise TablectlError(
            "archive report: --html needs matplotlib: pip install 'tablectl[report]'"
        ) from None
