"""A busy gaming day for the HTML report's layout rules: many tables, rounds through the span, and
alarms in clusters (raised a minute apart, halting ones open long, advisory ones short, one still
open at the end, one raised at the chart's right edge), as rows of the report's own query, so
the report's own fold and drawing take them. The span is a parameter: the time axes must read
at twenty minutes as at a whole day."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

DAY = date(2026, 11, 20)
SECTIONS = ("673a.13(j)", "685a.7(a)", "665a.3(c)", "673a.13(l)")


def busy_rows(span: timedelta, tables: int = 6, alarms: int = 8) -> list[tuple[Any, ...]]:
    """Rows as report_html._EVENTS returns them: (site, table, kind, payload, local time)."""
    start = datetime(2026, 11, 20, 9, 7)
    rows: list[tuple[Any, ...]] = []
    for t in range(tables):
        name = f"table-{t:02d}"
        rows.append(("floor", name, "new_dealer", {"name": f"dealer-{t}"}, start))
        for i in range(60):
            won = 2 if (i + t) % 3 == 0 else -2
            settlement = {"wager": "bet", "stake": 10, "halves": won}
            rows.append(
                ("floor", name, "round_settled", {"settlements": [settlement]}, start + span * i / 60)
            )
        for k in range(alarms):  # a cluster, a minute apart at a day's span
            payload = {"id": k + 1, "section": SECTIONS[k % 4], "halts": k % 2 == 0}
            rows.append(("floor", name, "alarm_raised", payload, start + span * (0.3 + 0.004 * k)))
        for k in range(alarms - 1):  # the last of the cluster stays open
            held = span * (0.2 if k % 2 == 0 else 0.01)
            rows.append(
                ("floor", name, "alarm_acknowledged", {"id": k + 1}, start + span * (0.3 + 0.004 * k) + held)
            )
        late = {"id": 99, "section": "687a.9(b)", "halts": True}
        rows.append(("floor", name, "alarm_raised", late, start + span * 0.999))
    rows.sort(key=lambda r: (r[1], r[4]))
    return rows


def summary_rows(tables: int = 6) -> list[dict[str, Any]]:
    """What day_report gives the page's table (the layout test needs no database)."""
    return [
        {"site": "floor", "table": f"table-{t:02d}", "rounds": 60, "rounds_voided": 0, "shoes": 1,
         "events": 80, "alarms_by_section": {}}
        for t in range(tables)
    ]  # fmt: skip
