"""``tablectl archive report``: per table and day, from the views a dashboard reads too
(migrations/0002_views.sql)."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import psycopg

from controller.errors import TablectlError


def day_report(conn: psycopg.Connection[Any], day: date) -> list[dict[str, Any]]:
    tables: dict[tuple[str, str], dict[str, Any]] = {}

    def entry(site: str, table_id: str) -> dict[str, Any]:
        return tables.setdefault(
            (site, table_id),
            {
                "site": site,
                "table": table_id,
                "rounds": 0,
                "rounds_voided": 0,
                "shoes": 0,
                "events": 0,
                "withheld": 0,
                "first_seq": None,
                "last_seq": None,
                "alarms_by_section": {},
                "devices_out_of_order": {},
                "chain_alarms": {},
                "gaps": 0,
            },
        )

    for row in conn.execute(
        "SELECT site, table_id, rounds, rounds_voided, shoes, events, withheld, first_seq, last_seq "
        "FROM archive_table_day WHERE day = %s",
        (day,),
    ):
        e = entry(row[0], row[1])
        e.update(
            zip(
                ("rounds", "rounds_voided", "shoes", "events", "withheld", "first_seq", "last_seq"),
                row[2:],
                strict=True,
            )
        )
    sections: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for site, table_id, section, n in conn.execute(
        "SELECT site, table_id, section, alarms FROM archive_alarms_by_section WHERE day = %s", (day,)
    ):
        sections[(site, table_id)][str(section)] = n
    for (site, table_id), by_section in sections.items():
        entry(site, table_id)["alarms_by_section"] = by_section
    for site, table_id, device, n in conn.execute(
        "SELECT site, table_id, device, times FROM archive_devices_out_of_order WHERE day = %s", (day,)
    ):
        entry(site, table_id)["devices_out_of_order"][device] = n
    for site, table_id, kind, n in conn.execute(
        "SELECT site, table_id, kind, alarms FROM archive_chain_alarms_by_day WHERE day = %s", (day,)
    ):
        e = entry(site, table_id)
        e["chain_alarms"][kind] = n
        if kind == "gap":
            e["gaps"] = n
    return [tables[k] for k in sorted(tables)]


def _text(day: date, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return f"{day}: nothing archived"
    head = f"{'table':<28} {'rounds':>7} {'shoes':>6} {'events':>8} {'gaps':>5}  alarms / devices out / chain"
    lines = [f"archive report for gaming day {day} (each table's local time)", head]
    for r in rows:
        alarms = ",".join(f"{k}:{v}" for k, v in sorted(r["alarms_by_section"].items())) or "-"
        devices = ",".join(f"{k}:{v}" for k, v in sorted(r["devices_out_of_order"].items())) or "-"
        chain = ",".join(f"{k}:{v}" for k, v in sorted(r["chain_alarms"].items())) or "-"
        name = f"{r['site']}/{r['table']}"
        lines.append(
            f"{name:<28} {r['rounds']:>7} {r['shoes']:>6} {r['events']:>8} {r['gaps']:>5}  "
            f"{alarms} / {devices} / {chain}"
        )
    return "\n".join(lines)


def latest_day(conn: psycopg.Connection[Any]) -> date:
    """The latest gaming day anything was archived for (events_day_kind's first column: one index
    probe), or the UTC date when the archive is empty: the tables' days, not the archive host's."""
    row = conn.execute("SELECT max(day) FROM events").fetchone()
    return row[0] if row is not None and row[0] is not None else datetime.now(UTC).date()


def parse_day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise TablectlError(f"archive report: --day {text!r} is not a date (YYYY-MM-DD)") from None


def report_main(dsn: str, day_text: str | None, as_json: bool, html_path: Path | None = None) -> int:
    chosen = None if day_text is None else parse_day(day_text)
    if html_path is not None:
        from controller.archive.report_html import require_matplotlib

        require_matplotlib()
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            day = chosen or latest_day(conn)
            rows = day_report(conn, day)
            if html_path is not None:
                from controller.archive.report_html import write_html

                write_html(conn, day, html_path)
                print(f"archive report: gaming day {day} as pictures in {html_path}", file=sys.stderr)
    except psycopg.Error as e:
        raise TablectlError(f"archive report: database: {str(e).splitlines()[0][:200]}") from None
    print(json.dumps({"day": day.isoformat(), "tables": rows}, indent=2) if as_json else _text(day, rows))
    return 0
