"""The Acme CS-2 example table (config/tables/acme-cs2.toml) over the wire: `tablectl sim
--dealer` beside `tablectl run` as separate processes with a real broker (the wire soak of
tests/support/wire_soak.py, without kills), one shoe played with the shoe's counter starting at
65,500 (its simulator's ``first_draw``), so it passes 65,536: no alarm nobody caused, every card
the shoe's 32-bit counter gave is in the journal, the journal verifies. The wire soak plays the
table as shipped, with kills and a restart of the simulators."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.relocated import relocated_table
from tests.supervisor.test_wire_soak import GUARD_S, _findings
from tests.support import wire_soak
from tests.support.wire_soak import Plan, soak


def _from_65500(table: str, folder: Path) -> Path:
    path = relocated_table(table, folder)
    text = path.read_text(encoding="utf-8")
    path.write_text(
        re.sub(r"(?m)^\[devices\.shoe\.sim\]$", "\\g<0>\nfirst_draw = 65500", text), encoding="utf-8"
    )
    return path


@pytest.mark.slow
async def test_the_acme_table_plays_a_shoe_past_draw_65536_over_the_wire(
    broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire_soak, "relocated_table", _from_65500)
    plan = Plan(game="acme-cs2", shoes=1, seed=2, timing_seed=2, idle_guard_s=GUARD_S, guard_s=GUARD_S)
    report = await soak(plan, broker, tmp_path)
    assert report["ran"], report
    assert not _findings(report), _findings(report)
    assert report["cards"]["drawn_per_shoe_counter"] > 36  # from 65,500 past 65,536
