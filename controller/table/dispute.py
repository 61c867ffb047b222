"""``tablectl journal show PATH --round N``: one round rebuilt from the journal for a question or a
dispute (673a.7(u), 665a.7(q), 685a.7(s): cards placed so that each hand can be reconstructed).

Shows each box's cards in the order they were dealt and the decisions taken, the dealer's cards,
the reader's use and answer, every offer, every wager's settlement with the section that decided
it, and the alarms raised during the round. It is for the people settling the dispute, after the
round: by then the hole card and the reader's answer are public at the table.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from controller.errors import TablectlError
from controller.journal import Record

DURING_ROUND = {
    "card_dealt",
    "hole_card_dealt",
    "decision",
    "offer_answered",
    "reader_used",
    "reader_result",
    "hole_card_exposed",
    "hole_card_turned",
    "card_held",
    "card_discarded_face_up",
    "card_discarded_extra",
    "alarm_raised",
    "alarm_acknowledged",
    "round_settled",
    "round_voided",
    "bet_sensed",
    "progressive_locked",
    "progressive_collected",
    "wild_round_dealt",
    "stub_counted",
    "deck_removed",
    "cards_unaccounted",  # cards that left the shoe unseen mid-round (a restart, a reset shoe)
}


def round_records(records: Iterable[Record], round_no: int) -> list[Record]:
    """From the round's round_started to its settlement or void, and what happened in between."""
    out: list[Record] = []
    inside = False
    for r in records:
        if r.kind == "round_started":
            if inside:
                break
            inside = r.payload.get("round") == round_no
        if inside and (r.kind == "round_started" or r.kind in DURING_ROUND):
            out.append(r)
            if r.kind in ("round_settled", "round_voided"):
                break
    if not out:
        raise TablectlError(f"round {round_no} is not in this journal")
    return out


def reconstruct(records: list[Record]) -> dict[str, Any]:
    start = records[0]
    boxes: dict[int, dict[str, Any]] = {}
    wagers = start.payload.get("wagers") or [{"seat": b} for b in start.payload.get("wild_boxes", [])]
    for w in wagers:
        boxes[w["seat"]] = {
            "seat": w["seat"],
            "wagers": {k: v for k, v in w.items() if k != "seat" and v},
            "cards": [],
            "decisions": [],
            "offers": [],
        }
    dealer: list[dict[str, Any]] = []
    out: dict[str, Any] = {
        "round": start.payload["round"],
        "started": {"seq": start.seq, "at": start.at, "dealer": start.payload.get("dealer")},
        "boxes": boxes,
        "dealer": dealer,
        "reader": [],
        "alarms": [],
        "irregularities": [],
        "actions": [],  # who took a dealer or floor action (the console's keys for a failed keypad)
        "settlement": None,
    }
    for r in records[1:]:
        p = r.payload
        if r.kind in ("card_dealt", "hole_card_dealt"):
            entry = {
                "seq": r.seq,
                "card": p["card"],
                "hand": p["hand"],
                "face": "up" if r.kind == "card_dealt" else "down",
            }
            if p.get("purpose"):
                entry["purpose"] = p["purpose"]
            if p.get("held"):
                entry["drawn_in_error"] = True
            (dealer if p["seat"] == 0 else boxes[p["seat"]]["cards"]).append(entry)
        elif r.kind == "decision":
            boxes[p["seat"]]["decisions"].append({"seq": r.seq, "hand": p["hand"], "action": p["action"]})
        elif r.kind == "offer_answered":
            boxes.setdefault(
                p["seat"], {"seat": p["seat"], "wagers": {}, "cards": [], "decisions": [], "offers": []}
            )["offers"].append({"seq": r.seq, "offer": p["offer"], "answer": p["value"]})
        elif r.kind in ("reader_used", "reader_result", "hole_card_exposed", "hole_card_turned"):
            out["reader"].append(
                {"seq": r.seq, "event": r.kind, **{k: v for k, v in p.items() if k != "round"}}
            )
        elif r.kind in ("alarm_raised", "alarm_acknowledged"):
            out["alarms"].append({"seq": r.seq, "event": r.kind, **p})
        elif r.kind in ("card_held", "card_discarded_face_up", "card_discarded_extra"):
            out["irregularities"].append({"seq": r.seq, "event": r.kind, "card": p["card"]})
        elif r.kind in ("round_settled", "round_voided"):
            out["settlement"] = {
                "seq": r.seq,
                "event": r.kind,
                **{k: v for k, v in p.items() if k != "round"},
            }
        elif r.kind == "action_taken":
            out["actions"].append({"seq": r.seq, **p})
        else:
            out["irregularities"].append({"seq": r.seq, "event": r.kind, **p})
    return out


def _net(stake: int, halves: int) -> str:
    net = Fraction(stake) * halves / 2
    text = str(int(net)) if net.denominator == 1 else f"{float(net):.1f}"
    return f"+{text}" if net > 0 else text


def format_round(rnd: dict[str, Any], title: str) -> str:
    lines = [
        f"Round {rnd['round']} at {title} (records {rnd['started']['seq']}-"
        f"{(rnd['settlement'] or {}).get('seq', '?')}), dealer {rnd['started']['dealer'] or '-'}"
    ]
    for box in rnd["boxes"].values():
        wagers = ", ".join(f"{k} {v}" for k, v in box["wagers"].items()) or "-"
        lines.append(f"  seat {box['seat']}: wagers {wagers}")
        cards = " ".join(
            f"{c['card']}"
            + (f"[h{c['hand']}]" if c["hand"] else "")
            + (f"({c['purpose']})" if c.get("purpose") else "")
            for c in box["cards"]
        )
        lines.append(f"    cards in order dealt: {cards or '-'}")
        if box["offers"]:
            lines.append("    offers: " + "; ".join(f"{o['offer']} -> {o['answer']}" for o in box["offers"]))
        if box["decisions"]:
            lines.append(
                "    decisions: " + ", ".join(f"h{d['hand']} {d['action']}" for d in box["decisions"])
            )
    dealer = " ".join(f"{c['card']}{'' if c['face'] == 'up' else ' (hole)'}" for c in rnd["dealer"])
    lines.append(f"  dealer: {dealer or '-'}")
    for r in rnd["reader"]:
        detail = {k: v for k, v in r.items() if k not in ("seq", "event")}
        lines.append(f"  {r['event']} (record {r['seq']}) {detail if detail else ''}".rstrip())
    for a in rnd["actions"]:
        lines.append(f"  {a['action']} by {a['who']} ({a['role']}, record {a['seq']})")
    for i in rnd["irregularities"]:
        lines.append(f"  irregularity: {i['event']} (record {i['seq']})")
    for a in rnd["alarms"]:
        if a["event"] == "alarm_raised":
            lines.append(f"  alarm {a['id']} {a['section']}: {a['message']} -> {a['floor_action']}")
        else:
            lines.append(f"  alarm {a['id']} acknowledged by {a['by']}")
    s = rnd["settlement"]
    if s is None:
        lines.append("  not settled (the journal ends mid-round)")
    elif s["event"] == "round_voided":
        lines.append(f"  VOID under {s['section']} (ordered by {s['by']}): every wager returned")
    elif "settlements" in s:
        d = s["dealer"]
        lines.append(f"  dealer total {d['total']}{' Blackjack' if d['blackjack'] else ''}")
        for b in s["boxes"]:
            for i, h in enumerate(b["hands"]):
                lines.append(
                    f"  seat {b['seat']} hand {i}: {' '.join(h['cards'])} = {h['total']} {h['result']}"
                )
        lines.append("  settlement:")
        for line in s["settlements"]:
            hand = "" if line["hand"] is None else f" hand {line['hand']}"
            lines.append(
                f"    seat {line['seat']}{hand} {line['wager']} {line['stake']}: "
                f"{_net(line['stake'], line['halves'])}  ({line['section']})"
            )
    else:
        lines.append("  settled (DJ Wild: hands are settled at the table; 687a.9 governs the deal)")
    return "\n".join(lines)
