"""A wire soak judged (tests/support/wire_soak.py): from the journal, what was played, every alarm
and who caused it, the stub counts, the cards the shoe's own counters say it gave against the
cards journalled, and whether the chain verifies; from ``run``'s log, every refusal.

An alarm raised inside a window in which the soak acted as a person (the simulators restarted, a
device switched off) is that person's; any other was caused by nobody and is a failure, shown with
the records that led to it so that it can be chased."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.journal import Journal, verify_journal

if TYPE_CHECKING:
    from tests.support.wire_soak import Plan, Timeline

CARD_KINDS = ("card_dealt", "hole_card_dealt", "card_burned", "card_held", "card_discarded_face_up",
              "card_discarded_extra")  # fmt: skip
EXCERPT = 8  # records shown before an alarm nobody caused


def judge(plan: Plan, path: Path, lines: list[dict[str, Any]], line: Timeline) -> dict[str, Any]:
    report: dict[str, Any] = {
        "game": plan.game,
        "ran": True,
        "seed": plan.seed,
        "timing_seed": plan.timing_seed,
        "kills": line.kills,
        "simulators_restarted": plan.restart_sim,
        "stuck": line.stuck,
        "dealer_exit": line.dealer_exit,
    }
    if not path.exists():
        return {**report, "journal_verified": False, "ok": False}
    with Journal.open(path, create=False, readonly=True) as j:
        records = list(j.records())
    kinds = Counter(r.kind for r in records)
    first_person = min((a for a, _, _ in line.person), default=float("inf"))
    dealt = [r for r in records if r.at < first_person]
    rounds = kinds["round_settled"]
    alarms = [_alarm(records, i, line) for i, r in enumerate(records) if r.kind == "alarm_raised"]
    refused = [x for x in lines if x.get("event") == "refused"]
    keys_refused = [x for x in refused if x.get("device") == "keypad"]
    shoe = _shoe_accounting(dealt)
    verified = verify_journal(path)
    report |= {
        "shoes": kinds["shoe_ended"],
        "rounds": rounds,
        "dealing_s": round(line.dealt_s, 1),
        "rounds_per_hour": round(rounds / line.dealt_s * 3600) if line.dealt_s else None,
        "alarms_by_a_person": [a for a in alarms if a["by"] != "nobody"],
        "alarms_by_nobody": [a for a in alarms if a["by"] == "nobody"],
        "keys_refused": [_refusal(x) for x in keys_refused],
        "other_refusals": [_refusal(x) for x in refused if x not in keys_refused],
        # Device commands a device refused or never got (an eject the shuffler did not carry out).
        "commands_not_carried_out": [
            {k: x.get(k) for k in ("timestamp", "incarnation", "device", "command", "error")}
            for x in lines
            if x.get("event") in ("command_rejected", "command_failed", "command_not_sent")
        ],
        "stub_counts": kinds["stub_counted"],
        "stub_counts_wrong": sum(1 for r in records if r.kind == "stub_counted" and not r.payload.get("ok")),
        "cards": shoe,
        "journal_records": len(records),
        "journal_verified": verified.ok,
    }
    report["ok"] = bool(
        not line.stuck
        and not report["alarms_by_nobody"]
        and not keys_refused
        and verified.ok
        and shoe.get("accounted", True)
        and (plan.wild or report["shoes"] >= plan.shoes)
        and (not plan.wild or rounds >= plan.rounds)
    )
    return report


def last_settled_at(path: Path) -> float:
    """When the journal's last round was settled (infinity before any)."""
    with Journal.open(path, create=False, readonly=True) as j:
        return max((r.at for r in j.records() if r.kind == "round_settled"), default=float("inf"))


def _alarm(records: list[Any], i: int, line: Timeline) -> dict[str, Any]:
    r = records[i]
    by = next((what for start, end, what in line.person if start <= r.at <= end), "nobody")
    if by == "nobody" and r.at >= line.stopped:
        by = "the soak, stopping its processes once the table or the dealer had stopped"
    out = {
        "seq": r.seq,
        "at_s": round(r.at - line.began, 2),
        "section": r.payload.get("section"),
        "message": r.payload.get("message"),
        "halts": r.payload.get("halts"),
        "by": by,
    }
    if by == "nobody":  # what led to it, kinds only (the payloads may be secret)
        out["before"] = [f"{x.seq} {x.kind}" for x in records[max(0, i - EXCERPT) : i]]
    return out


def _refusal(x: dict[str, Any]) -> dict[str, Any]:
    return {k: x.get(k) for k in ("timestamp", "incarnation", "device", "input", "error")}


def _shoe_accounting(records: list[Any]) -> dict[str, Any]:
    """The cards the shoe's own draw counter says it gave (its last count journalled less its
    first, the first reading's: 0 with a simulator fresh from power-up, or where a table's
    ``first_draw`` starts it) against the card records journalled: equal when none was lost and
    none invented. Only while the dealer played (before the simulators restarted)."""
    journalled = sum(1 for r in records if r.kind in CARD_KINDS)
    first: int | None = None
    last = 0
    for r in records:
        seen = r.payload.get("device_seen") if r.kind != "device_seen" else r.payload
        if isinstance(seen, dict) and seen.get("device") == "shoe":
            draw_seq = seen.get("counters", {}).get("draw_seq")
            if draw_seq is not None:
                first = int(draw_seq) if first is None else first
                last = max(last, int(draw_seq))
    counted = last - (first or 0)
    if not counted and not journalled:
        return {}
    return {
        "drawn_per_shoe_counter": counted,
        "journalled": journalled,
        "unaccounted_records": sum(1 for r in records if r.kind == "cards_unaccounted"),
        "accounted": counted == journalled,
    }
