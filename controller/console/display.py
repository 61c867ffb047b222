"""The dealer display as JSON: built by pure functions from the table's public state only.

``display(snapshot, kinds, asking)`` is what ``GET /api/display`` returns and what the page
draws: whose turn it is and what is asked or offered, the reader and the progressive, the shoe
and the batches, and every open alarm with the floor action it needs and its section. Its inputs
are the supervisor's public snapshot (no card identities), the kind of each device, and
``asking(table)``: the request the table is waiting on, in public terms (seats, hands, legal
decisions, offers), never a card. A hole card, a reader's answer or a stub's contents are not
public until the table shows them, so none of them is ever read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.rules.requests import (
    DEALER,
    CardFor,
    Decision,
    DoubleAttackOffer,
    EvenMoneyOffer,
    InsuranceOffer,
    ReaderUse,
    SecondChanceOffer,
    SurrenderOffer,
)
from controller.table.core import Table
from controller.table.sections import section


def _who(seat: int) -> str:
    return "dealer" if seat == DEALER else f"box {seat}"


def asking(table: Table) -> dict[str, Any]:
    """What the table waits for next: ``who`` (the dealer, a box, the floor), ``what`` (one line)
    and, for a decision, the legal choices. Public information only."""
    if table.halted:
        a = table.halted[0]
        return {"who": "floor", "what": f"dealing is stopped: {a.message}", "section": a.section}
    cut = table.cut
    if cut is not None:
        if cut.cut_at is None:
            seat = cut.offer_order[0] if cut.offer_order else 0
            return {"who": _who(seat), "what": f"the cut of the {cut.back} batch is offered to {_who(seat)}",
                    "section": section(table.chapter, "5(c)")}  # fmt: skip
        if cut.cover_from_bottom is None:
            return {
                "who": "dealer",
                "what": "place the cover card",
                "section": section(table.chapter, "5(d)"),
            }
        return {"who": "dealer", "what": f"the cut {cut.back} batch goes into the shoe"}
    rnd = table.round
    if rnd is not None:
        req = rnd.request
        if isinstance(req, Decision):
            return {"who": _who(req.seat), "hand": req.hand + 1, "what": "decision",
                    "legal": sorted(a.value for a in req.legal)}  # fmt: skip
        if isinstance(req, CardFor):
            where = _who(req.seat) + (f" hand {req.hand + 1}" if req.seat != DEALER else "")
            face = "" if req.face_up else " (face down)"
            return {"who": "dealer", "what": f"deal a card to {where}{face}"}
        if isinstance(req, ReaderUse):
            return {"who": "dealer", "what": "the hole card into the reader"}
        offers: list[tuple[type, str]] = [
            (InsuranceOffer, "insurance offered"),
            (EvenMoneyOffer, "even money offered"),
            (SurrenderOffer, "surrender offered"),
            (DoubleAttackOffer, "Double Attack wager offered"),
            (SecondChanceOffer, "Second Chance offered"),
        ]
        for kind, what in offers:
            if isinstance(req, kind):
                return {"who": _who(getattr(req, "seat", 0)), "what": what}
        return {"who": "dealer", "what": type(req).__name__}  # pragma: no cover - a new request kind
    wild = table.wild
    if wild is not None:
        if not wild.locked:
            return {"who": "dealer", "what": "Start Game"}
        if not wild.dealt:
            return {"who": "dealer", "what": "deal the hands"}
        return {"who": "dealer", "what": "count the stub"}
    if table.shoe_back is None and table.blackjack:
        return {"who": "dealer", "what": "waiting for a batch in the shoe"}
    if table.burns_due:
        return {
            "who": "dealer",
            "what": f"burn {table.burns_due} card(s)",
            "section": section(table.chapter, "7(c)"),
        }
    return {"who": "players", "what": "place wagers, then Start Game"}


def display(
    snapshot: Mapping[str, Any], kinds: Mapping[str, str], turn: Mapping[str, Any], dealer: str | None = None
) -> dict[str, Any]:
    """The dealer display from the public snapshot, each device's kind, ``asking``'s answer and
    the dealer's name (public: the dealer stands at the table)."""
    devices: Mapping[str, str] = snapshot.get("devices", {})
    by_kind = {kinds[n]: (n, h) for n, h in devices.items() if n in kinds}

    def health(kind: str) -> str | None:
        return by_kind[kind][1] if kind in by_kind else None

    alarms = [
        {**a, "halts": any(h["id"] == a["id"] for h in snapshot.get("halted", []))}
        for a in snapshot.get("alarms", [])
    ]
    return {
        "table": snapshot.get("table"),
        "game": snapshot.get("game"),
        "round": snapshot.get("round", 0),
        "in_round": bool(snapshot.get("in_round")),
        "dealer": dealer,
        "turn": dict(turn),
        "dealing_stopped": bool(snapshot.get("halted")) or bool(snapshot.get("shoe_failed")),
        "reader": {"health": health("reader"), "failed": bool(snapshot.get("reader_failed"))},
        "progressive": {"health": health("keypad"), "open": not snapshot.get("progressive_closed", False)},
        "shoe": {
            "health": health("shoe"),
            "batch": snapshot.get("batch_in_shoe"),
            "cards": snapshot.get("cards_in_shoe", 0),
            "cover_card_reached": bool(snapshot.get("cover_card_reached")),
            "failed": bool(snapshot.get("shoe_failed")),
        },
        "shuffler": {
            "health": health("shuffler"),
            "out_of_order": bool(snapshot.get("shuffler_out_of_order")),
        },
        "batches": [{"back": back, **b} for back, b in snapshot.get("batches", {}).items()],
        "alarms": sorted(alarms, key=lambda a: (not a["halts"], a["id"])),
        "devices": [{"name": n, "kind": kinds.get(n), "health": h} for n, h in devices.items()],
    }
