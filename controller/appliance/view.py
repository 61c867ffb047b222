"""The demo's live terminal view, and its one-line-per-round form for a pipe.

It shows what a player standing at the table sees, and nothing more: the supervisor's public
snapshot (devices, batches, alarms), the cards on the layout (the boxes' cards and the dealer's up
card; the hole card only once it is turned or exposed, 673a.7(n), 665a.7(l), 685a.7(h),(l)),
hand totals and results, and each settled round as the journal's public ``round_settled`` record
has it. Never the order of a shoe, a reader's answer or a stub's contents: none of them is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from rich.console import Group
from rich.table import Table as RichTable
from rich.text import Text

from controller.console.display import turn
from controller.journal.model import Classification
from controller.supervisor.rig import Rig
from controller.supervisor.supervisor import Supervisor
from controller.table.asking import layout
from controller.table.batches import Place, ShufflerState
from controller.table.core import Table

_HEALTH_STYLE = {
    "online": "green",
    "connecting": "yellow",
    "degraded": "yellow",
    "fault": "bold red",
    "out_of_order": "bold magenta",
}
_RESULT_STYLE = {"win": "green", "blackjack": "bold green", "lose": "red", "push": "", "surrender": "dim"}
RECENT_ROUNDS = 3


class RoundFeed:
    """The rounds settled since the last call, from the journal's public records (read after a
    cursor, so each refresh reads only what is new)."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.seq = 0
        self._stub: dict[str, Any] | None = None  # DJ Wild: this round's stub count, when made

    def new(self) -> list[dict[str, Any]]:
        jt = self.supervisor.jt
        if jt is None or jt.journal.last_seq <= self.seq:
            return []
        settled: list[dict[str, Any]] = []
        for record in list(jt.journal.records(after_seq=self.seq)):
            self.seq = record.seq
            if record.classification is not Classification.PUBLIC:
                continue
            if record.kind == "stub_counted":
                self._stub = record.payload
            elif record.kind == "round_settled":
                settled.append({**record.payload, "stub": self._stub})
                self._stub = None
        return settled


def _amount(x: Fraction) -> str:
    return f"{int(x):+d}" if x.denominator == 1 else f"{float(x):+.1f}"


def house_net(settled: Mapping[str, Any]) -> Fraction:
    """What the players lost minus what they won in one settled round, in table units."""
    return -sum(
        (Fraction(str(s["stake"])) * s["halves"] / 2 for s in settled.get("settlements", [])), Fraction(0)
    )


def _side_wagers(settled: Mapping[str, Any]) -> str:
    """The side wagers' results (any wager but the main bet), e.g. ``box 1 match the dealer won
    15``: what the players won or lost on each, in table units."""
    parts = []
    # By box, as the layout reads (settlements come in the dealer's order of settling).
    for s in sorted(settled.get("settlements", []), key=lambda s: (s.get("seat") or 0, s.get("hand") or 0)):
        if s.get("wager") == "bet":
            continue
        amount = Fraction(str(s["stake"])) * s["halves"] / 2
        verdict = (
            f"won {_amount(amount)[1:]}"
            if amount > 0
            else f"lost {_amount(-amount)[1:]}"
            if amount
            else "push"
        )
        parts.append(f"box {s.get('seat')} {str(s.get('wager')).replace('_', ' ')} {verdict}")
    return ", ".join(parts)


def round_line(settled: Mapping[str, Any], *, house_first: bool = False) -> str:
    """One settled round in one line, e.g. ``round 7: dealer 10H 7C (17); box 1 9S 9D (18) win;
    side: box 1 match the dealer won 15; house +10 units``; ``box 2.1`` is box 2's first hand after
    a split. For DJ Wild, the stub count (the dealer settles the hands, 687a)."""
    head = f"round {settled.get('round')}"
    if settled.get("wild"):
        stub = settled.get("stub")
        if stub is None:
            return f"{head}: hands dealt by hand; stub put away uncounted"
        verdict = "right" if stub.get("ok") else "WRONG (687a.9(h))"
        return f"{head}: hands dealt by hand; stub counted {stub.get('count')}, {verdict}"
    dealer = settled.get("dealer", {})
    parts = [f"dealer {' '.join(dealer.get('cards', []))} ({dealer.get('total')})"]
    for box in settled.get("boxes", []):
        for i, hand in enumerate(box.get("hands", [])):
            which = f"box {box.get('seat')}" + (f".{i + 1}" if len(box.get("hands", [])) > 1 else "")
            parts.append(
                f"{which} {' '.join(hand.get('cards', []))} ({hand.get('total')}) {hand.get('result')}"
            )
    side = _side_wagers(settled)
    if side:
        parts.append(f"side: {side}")
    house = f"house {_amount(house_net(settled))} units"
    if house_first:  # the live view cuts long lines at the terminal's edge: the result first
        return f"{head}, {house}: {'; '.join(parts)}"
    return f"{head}: {'; '.join(parts)}; {house}"


def batch_state(table: Table, back: str) -> str:
    """Where a batch is and what it is waiting for, in the dealer's words. The batch in play says
    so (its shuffler state is reset once it leaves the shuffler, which is not 'unshuffled')."""
    b = table.batches[back]
    wild = not table.blackjack
    if b.location is Place.SHOE:
        if not wild:
            return f"in the shoe, being dealt ({b.places[Place.SHOE]} cards left)"
        w = table.wild
        if w is not None and w.dealt:
            return "hands dealt; the stub is set aside for the stub counter"
        return "the deck in play, dealt by hand"
    if b.location is Place.DISCARD:
        return "dealt; in the discard rack, to be shuffled"
    if b.location is Place.SHUFFLER:
        return {
            ShufflerState.UNSHUFFLED: "in the shuffler, waiting to be shuffled",
            ShufflerState.SHUFFLING: "in the shuffler, shuffling",
            ShufflerState.READY: "in the shuffler, shuffled and ready",
            ShufflerState.JAMMED: "in the shuffler, jammed: to be shuffled again",
        }[b.shuffler]
    if b.location is Place.NEW:
        return "new, not yet in play"
    return "out of play"


def layout_rows(
    table: Table, bets: set[tuple[int, int]], boxes: int
) -> list[tuple[str, str, str, str, Text]]:
    """(who, wagers sensed, cards, total, result) for the dealer and each box, as the table shows
    them now (``controller.table.asking.layout``, which the dealer display draws too): the
    dealer's hole card stays 'hole' until it is turned or exposed."""
    board = layout(table, bets, boxes)
    rows: list[tuple[str, str, str, str, Text]] = []
    if table.round is not None:
        dealer = board["dealer"]
        total = "" if dealer["total"] is None else str(dealer["total"])
        rows.append(("dealer", "", " ".join(dealer["cards"]), total, Text("")))
    for box in board["boxes"]:
        main, side = box["spots"]
        sensed = ("●" if main else "·") + " " + ("●" if side else "·")
        hands = box.get("hands", [])
        if not hands:
            dealt = "hand dealt" if box.get("wild", {}).get("dealt") else ""
            rows.append((f"box {box['seat']}", sensed, dealt, "", Text("")))
        for i, hand in enumerate(hands):
            who = f"box {box['seat']}" + (f".{i + 1}" if len(hands) > 1 else "")
            result = Text(hand["result"], style=_RESULT_STYLE.get(hand["result"], ""))
            total = "" if hand["total"] is None else str(hand["total"])
            rows.append((who, sensed if i == 0 else "", " ".join(hand["cards"]), total, result))
    return rows


class LiveView:
    """The terminal view of one demo table; keeps the last few settled rounds between redraws."""

    def __init__(self, rig: Rig, broker: str) -> None:
        self.rig, self.broker = rig, broker
        self.feed = RoundFeed(rig.supervisor)
        self.recent: list[str] = []

    def render(self) -> Group:
        """The view, in 80 columns and 24 lines for six boxes without splits (a standard terminal):
        a line per item, long ones cut with an ellipsis rather than wrapped."""
        rig = self.rig
        snap: dict[str, Any] = rig.supervisor.snapshot()
        table = rig.supervisor.table
        stats = rig.dealer.stats
        self.recent = (self.recent + [round_line(s, house_first=True) for s in self.feed.new()])[
            -RECENT_ROUNDS:
        ]
        ask = turn(snap.get("asking", {}))
        head = Text.assemble(
            (f"{snap['table']} ", "bold"),
            (f"{rig.config.options.spec.title}", "cyan"),
            f"  round {snap.get('round', 0)}  ",
            ("in round" if snap.get("in_round") else "between rounds", "dim"),
            f"  table time {rig.clock.now() / 3600:.2f} h\n",
            (f"{ask.get('who')}: {ask.get('what')}", "bold"),
            no_wrap=True,
            overflow="ellipsis",
        )
        title = "Shoe and batches" if table.blackjack else "Decks (dealt by hand) and stub"
        batches = _compact(title)
        batches.add_column("batch", no_wrap=True, min_width=4)
        batches.add_column("state", no_wrap=True, overflow="ellipsis")
        for back in snap.get("batches", {}):
            batches.add_row(
                Text(back, style=back if back in ("red", "blue") else ""), batch_state(table, back)
            )
        if snap.get("cover_card_reached"):
            batches.add_row("", Text("cover card out: reshuffle after this round", style="bold"))
        devices = _compact("Devices")
        devices.add_column("device")
        devices.add_column("health")
        for name, health in snap.get("devices", {}).items():
            devices.add_row(name, Text(health, style=_HEALTH_STYLE.get(health, "")))
        layout = _compact("Layout (what the players see; ● a wager sensed)", header=True)
        for column in ("", "wagers", "cards", "total", "result"):
            layout.add_column(column, no_wrap=True, overflow="ellipsis")
        for row in layout_rows(table, rig.supervisor.translator.bets, rig.config.options.boxes):
            layout.add_row(*row)
        rounds = _compact("Last rounds (house result in table units; box 2.1: box 2's first split hand)")
        rounds.add_column("round", no_wrap=True, overflow="ellipsis")
        for line in self.recent or ["none settled yet"]:
            rounds.add_row(line)
        alarms: Text | RichTable
        if snap.get("alarms"):
            alarms = _compact("Alarms", header=True)
            for column in ("id", "section", "message", "floor action"):
                alarms.add_column(column, no_wrap=True, overflow="ellipsis")
            for a in snap.get("alarms", [])[-3:]:
                alarms.add_row(str(a["id"]), a["section"], a["message"], a["floor_action"])
        else:
            alarms = Text("Alarms: none", style="dim")
        # What the devices counted, for this game only: a DJ Wild table deals from the hand (no
        # shoe) and a blackjack table has no stub to count.
        counted = [f"rounds {stats.rounds}"]
        if table.blackjack:
            counted.append(f"cards from the shoe {stats.cards_drawn}")
        counted += [f"keypad presses {stats.keys_pressed}", f"shoes {stats.shoes}"]
        if not table.blackjack:
            counted.append(f"stubs counted {stats.stub_counts}")
        counters = Text(
            "   ".join(counted) + f"\nCtrl-C stops; telemetry to {self.broker}",
            style="dim",
            no_wrap=True,
            overflow="ellipsis",
        )
        return Group(head, _row((batches, 3), (devices, 2)), layout, rounds, alarms, counters)


def _compact(title: str, *, header: bool = False) -> RichTable:
    """A table drawn without borders, its title on the left: a line of title, the rows."""
    return RichTable(
        title=title, title_justify="left", title_style="bold", box=None, show_header=header,
        expand=True, padding=(0, 1), pad_edge=False,
    )  # fmt: skip


def _row(*tables: tuple[RichTable, int]) -> RichTable:
    grid = RichTable.grid(expand=True, padding=(0, 2))
    for _, ratio in tables:
        grid.add_column(ratio=ratio)
    grid.add_row(*(t for t, _ in tables))
    return grid
