"""The dealer display as JSON: built by pure functions from the table's public state only.

``display(snapshot, kinds, turn)`` is what ``GET /api/display`` returns and what the page
draws: whose turn it is and what is asked or offered, the reader and the progressive, the shoe
and the batches, and every open alarm with the floor action it needs and its section. Its inputs
are the supervisor's public snapshot (no card identities), the kind of each device, and
``turn(ask)``: the table's own public ask (``controller.table.asking``, the snapshot's
``asking``) in the dealer's words. A hole card, a reader's answer or a stub's contents are not
public until the table shows them, so none of them is ever read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.rules.requests import DEALER

_OFFERS = {
    "insurance": "insurance offered",
    "even_money": "even money offered",
    "surrender": "surrender offered",
    "double_attack": "Double Attack wager offered",
    "second_chance": "Second Chance offered",
}


def _who(seat: object) -> str:
    return "dealer" if seat in (DEALER, "dealer", None) else f"box {seat}"


def turn(ask: Mapping[str, Any]) -> dict[str, Any]:
    """The table's ask (``controller.table.asking``, the ``asking`` of the public snapshot) in
    the dealer's words: ``who`` (the dealer, a box, the players, the floor), ``what`` (one line),
    and the section, hand and legal decisions where there are some."""
    what = ask.get("what")
    sec = {"section": ask["section"]} if "section" in ask else {}
    if what == "floor":
        return {"who": "floor", "what": f"dealing is stopped: {ask.get('message')}", **sec}
    if what == "cut":
        who = _who(ask.get("seat"))
        return {"who": who, "what": f"the cut of the {ask.get('back')} batch is offered to {who}", **sec}
    if what == "cover_card":
        return {"who": "dealer", "what": "place the cover card", **sec}
    if what == "cut_to_shoe":
        return {"who": "dealer", "what": f"the cut {ask.get('back')} batch goes into the shoe"}
    if what == "decision":
        return {
            "who": _who(ask.get("seat")),
            "hand": int(ask.get("hand", 0)) + 1,
            "what": "decision",
            "legal": list(ask.get("legal", [])),
            **({"double_limit": ask["double_limit"]} if "double_limit" in ask else {}),
        }
    if what == "card":
        seat = ask.get("seat")
        where = _who(seat) + ("" if _who(seat) == "dealer" else f" hand {int(ask.get('hand', 0)) + 1}")
        face = "" if ask.get("face_up", True) else " (face down)"
        return {"who": "dealer", "what": f"deal a card to {where}{face}"}
    if what == "reader":
        return {"who": "dealer", "what": "the hole card into the reader"}
    if what == "offer":
        return {"who": _who(ask.get("seat")), "what": _OFFERS.get(str(ask.get("offer")), "offer")}
    if what == "wild_deal":
        return {"who": "dealer", "what": "deal the hands" if ask.get("locked") else "Start Game"}
    if what == "stub":
        return {"who": "dealer", "what": "count the stub"}
    if what == "batch":
        return {"who": "dealer", "what": "waiting for a batch in the shoe"}
    if what == "burn":
        return {"who": "dealer", "what": f"burn {ask.get('cards')} card(s)", **sec}
    if what == "bets":
        return {"who": "players", "what": "place wagers, then Start Game"}
    return {"who": "dealer", "what": str(what)}


def display(
    snapshot: Mapping[str, Any], kinds: Mapping[str, str], turn: Mapping[str, Any], dealer: str | None = None
) -> dict[str, Any]:
    """The dealer display from the public snapshot, each device's kind, ``turn``'s wording of the ask and
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
