"""The wire soak, shortened for CI (issue 21's acceptance test of the whole product): every
shipped table, and DJ Wild at a shuffler that does not count its cards, played by `tablectl sim
--dealer` beside `tablectl run` as separate processes with a real mosquitto, the devices' timing
varied by a seed; `run` killed -9 four times while the dealer plays (the first during the first
shuffle of the fresh journal, the second at the first burn), then the simulators restarted, the
keypad switched off and on through the control port, and one more kill. Each blackjack game plays
at least 2 shoes, DJ Wild 20 rounds. It fails on any alarm nobody caused, any key refused, a card
the shoe's counters gave that the journal does not have (or the other way), a journal that does not
verify, or a table that stops moving (tests/support/wire_soak.py; bench/wire_soak.py runs it long).

The games run at once (under one core in all, about 45 s of CPU; 100-130 s of wall time on the
2-core machine: each game's processes mostly wait on the wire), with the simulated shuffler's cycle
at 2 s so that no round waits on a 30-second shuffle."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from controller.shipped import shipped_names
from tests.support.wire_soak import UNCOUNTED, Plan, soak

GAMES = (*shipped_names("tables"), UNCOUNTED)  # every shipped table, as the registry of tables has them
GUARD_S = 30.0  # failure guard only: a table that does not move for this long is stuck


def _findings(report: dict[str, Any]) -> list[str]:
    """What is wrong with one game's run, one line each (empty when it is clean)."""
    game, out = report["game"], []
    if report.get("stuck"):
        out.append(f"{game}: stuck: {report['stuck']}")
    for a in report.get("alarms_by_nobody", []):
        out.append(f"{game}: alarm nobody caused: {a['section']}: {a['message']} (after {a['before'][-3:]})")
    for k in report.get("keys_refused", []):
        out.append(f"{game}: key refused: {k['input']}: {k['error']}")
    cards = report.get("cards") or {}
    if cards and not cards["accounted"]:
        out.append(
            f"{game}: the shoe gave {cards['drawn_per_shoe_counter']}, the journal has {cards['journalled']}"
        )
    if not report.get("journal_verified"):
        out.append(f"{game}: the journal does not verify")
    if not report.get("ok") and not out:
        out.append(f"{game}: too little played: {report.get('shoes')} shoes, {report.get('rounds')} rounds")
    return out


@pytest.mark.slow
# Its own guards end it within GUARD_S of a table not moving; its wall time is its CPU (about 45 s)
# over the share of the cores it gets: 100-130 s alone, 560 s with two spinners per core beside it
# at load 18-22 (docs/benchmarks.md). The suite's 300 s per test would fail it for being slow, not
# stuck; this bound only catches a hang of the harness itself.
@pytest.mark.timeout(1800)
async def test_every_table_over_the_wire_with_kills_raises_no_alarm_nobody_caused(
    broker: str, tmp_path: Path
) -> None:
    plans = [
        Plan(game=g, shoes=2, rounds=20, seed=i + 1, timing_seed=i + 1, kills=4, restart_sim=True,
             idle_guard_s=GUARD_S, guard_s=GUARD_S)
        for i, g in enumerate(GAMES)
    ]  # fmt: skip
    reports = await asyncio.gather(*(soak(p, broker, tmp_path / p.game) for p in plans))
    print(json.dumps(reports, indent=1))  # the figures and the journal excerpts, for whoever chases a failure
    assert all(r["ran"] for r in reports), [r for r in reports if not r["ran"]]
    findings = [f for r in reports if r["ran"] for f in _findings(r)]
    assert not findings, "\n".join(findings)
