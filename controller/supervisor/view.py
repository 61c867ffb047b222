"""The demo's live terminal view, drawn from the supervisor's public snapshot only (what an ops
screen may show: no card identities), plus the dealer's counters."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table as RichTable
from rich.text import Text

from controller.supervisor.rig import Rig

_HEALTH_STYLE = {
    "online": "green",
    "connecting": "yellow",
    "degraded": "yellow",
    "fault": "bold red",
    "out_of_order": "bold magenta",
}


def render(rig: Rig, broker: str) -> Group:
    snap: dict[str, Any] = rig.supervisor.snapshot()
    stats = rig.dealer.stats
    head = Text.assemble(
        (f"{snap['table']} ", "bold"),
        (f"{rig.config.options.spec.title}", "cyan"),
        f"  round {snap.get('round', 0)}  ",
        ("in round" if snap.get("in_round") else "between rounds", "dim"),
        f"  table time {rig.clock.now() / 3600:.2f} h",
        f"  telemetry to {broker}",
    )
    shoe = RichTable(title="Shoe and batches", expand=True)
    shoe.add_column("batch")
    shoe.add_column("where")
    shoe.add_column("shuffler")
    for back, b in snap.get("batches", {}).items():
        in_shoe = back == snap.get("batch_in_shoe")
        where = b["location"] + (f" ({snap['cards_in_shoe']} cards)" if in_shoe else "")
        shoe.add_row(Text(back, style=back if back in ("red", "blue") else ""), where, b["shuffler"])
    if snap.get("cover_card_reached"):
        shoe.caption = "cover card out: reshuffle after this round"
    devices = RichTable(title="Devices", expand=True)
    devices.add_column("device")
    devices.add_column("health")
    for name, health in snap.get("devices", {}).items():
        devices.add_row(name, Text(health, style=_HEALTH_STYLE.get(health, "")))
    boxes = RichTable(title="Boxes (sensed wagers)", expand=True)
    boxes.add_column("box")
    boxes.add_column("main")
    boxes.add_column("side / progressive")
    bets = rig.supervisor.translator.bets
    for box in range(1, rig.config.options.boxes + 1):
        boxes.add_row(str(box), "●" if (box, 1) in bets else "·", "●" if (box, 2) in bets else "·")
    alarms = RichTable(title="Alarms", expand=True)
    alarms.add_column("id")
    alarms.add_column("section")
    alarms.add_column("message")
    alarms.add_column("floor action")
    for a in snap.get("alarms", []):
        alarms.add_row(str(a["id"]), a["section"], a["message"], a["floor_action"])
    counters = Text(
        f"rounds {stats.rounds}   cards drawn {stats.cards_drawn}   keys {stats.keys_pressed}"
        f"   shoes {stats.shoes}   stub counts {stats.stub_counts}   Ctrl-C stops",
        style="dim",
    )
    return Group(
        Panel(head),
        _row(shoe, devices, boxes),
        alarms,
        counters,
    )


def _row(*tables: RichTable) -> RichTable:
    grid = RichTable.grid(expand=True)
    for _ in tables:
        grid.add_column(ratio=1)
    grid.add_row(*tables)
    return grid
