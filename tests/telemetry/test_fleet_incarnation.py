"""Issue 21: the fleet view shows a table's retained state, alarms and devices only for the process
its retained status names (docs/mqtt.md, "Incarnation"), never what an earlier process left."""

from __future__ import annotations

import json
from typing import Any

from controller.telemetry.fleet import FleetView

BASE = "tablectl/s1/t1"


def _feed(view: FleetView, leaf: str, body: dict[str, Any]) -> None:
    view.ingest(f"{BASE}/{leaf}", json.dumps(body).encode())


def test_an_earlier_process_retained_state_is_not_shown() -> None:
    view = FleetView()
    _feed(view, "state", {"incarnation": "old", "game": "dj-wild", "snapshot": {"round": 40}})
    _feed(view, "alarms", {"incarnation": "old", "alarms": [{"id": 1, "halts_dealing": True}]})
    _feed(view, "status", {"online": True, "incarnation": "new", "game": "dj-wild"})
    table = view.tables[("s1", "t1")]
    assert table.state == {} and table.current_alarms == []
    _feed(view, "state", {"incarnation": "new", "game": "dj-wild", "snapshot": {"round": 0}})
    assert table.state == {"round": 0}
    _feed(view, "state", {"incarnation": "newer", "snapshot": {"round": 1}})  # before its status
    assert table.state == {"round": 0}
    _feed(view, "status", {"online": True, "incarnation": "newer"})
    assert table.state == {"round": 1}
