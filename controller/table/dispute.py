"""``tablectl journal show PATH --round N``: one round rebuilt from the journal for a question or a
dispute (673a.7(u), 665a.7(q), 685a.7(s): cards placed so that each hand can be reconstructed).

The text is an account a floorperson reads out: the wagers each box placed, then what happened in
the order it happened (each card with the box and hand it went to, each offer and its answer,
each decision, the reader), then the hands and every wager's result in words and money with the
section that decided it, and the alarms. Hands are numbered as the console numbers them, from 1.
DJ Wild's ordinary steps (a Progressive wager sensed, the wagers locked, the hands dealt, the stub
counted) are told as what happened; only what went wrong is called an irregularity. ``--json``
gives the same account as data for machines (hands numbered from 1 there too). It is for the
people settling the dispute, after the round: by then the hole card and the reader's answer are
public at the table.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo

from controller.errors import TablectlError
from controller.games import wager_kinds
from controller.gaming_day import PENNSYLVANIA, zone
from controller.journal import Record
from controller.rules.requests import OFFER_KINDS

SEEN_KEY = "device_seen"  # the device counters a record carries (controller/table/recorder.py)

# What happens in a round, told in order.
PLAY = {
    "card_dealt",
    "hole_card_dealt",
    "decision",
    "offer_answered",
    "reader_used",
    "reader_result",
    "hole_card_exposed",
    "hole_card_turned",
    "bet_sensed",
    "progressive_locked",
    "progressive_collected",
    "wild_round_dealt",
    "stub_counted",
    "action_taken",
}
# What went wrong (673a.13, 665a.13, 685a.12, 687a.9(h)): told in order and listed again.
IRREGULAR = {
    "card_held",
    "card_discarded_face_up",
    "card_discarded_extra",
    "held_card_exposed",
    "exposed_card_refused",
    "exposed_card_discarded",
    "dealer_card_missed",
    "hand_called_dead",
    "card_missed",
    "cards_unaccounted",
    "deck_removed",
}
DURING_ROUND = PLAY | IRREGULAR | {"alarm_raised", "alarm_acknowledged", "round_settled", "round_voided"}


def wager_name(key: str) -> str:
    """A wager as the account names it: the name its game registered (controller.games); a key
    no registered game has (a journal of a game this build does not know) as it is written."""
    kind = wager_kinds().get(key)
    return key if kind is None else kind.name


def offer_described(name: str) -> str:
    """An offer as the account names it: as its registration describes it (controller.rules.requests;
    a journal written before the public names carries the class's name); an offer this build does
    not know as it is written."""
    kind = next((k for k in OFFER_KINDS.values() if name in (k.name, k.cls.__name__)), None)
    return name if kind is None else kind.described


DECISIONS = {
    "hit": "hits",
    "stand": "stands",
    "double": "doubles down",
    "split": "splits",
    "surrender": "surrenders",
}
RESULTS = {
    "blackjack": "Blackjack",
    "win": "won",
    "lose": "lost",
    "push": "push",
    "surrender": "surrendered",
    "dead": "dead hand",
}
LIGHTS = {"small": "blue (2-5)", "medium": "red (6-9)", "large": "yellow (10-A)"}


def round_records(records: Iterable[Record], round_no: int) -> tuple[list[Record], str | None]:
    """From the round's round_started to its settlement or void, and what happened in between;
    and the back of the batch in the shoe (DJ Wild: in the dealer's hand) when it started, so
    that surveillance footage of that batch can be found (None: no batch was recorded)."""
    out: list[Record] = []
    inside = False
    batch: str | None = None
    for r in records:
        if not inside:
            if r.kind == "batch_to_shoe":
                batch = r.payload.get("back")
            elif r.kind == "shoe_ended":
                batch = None
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
    return out, batch


def _hand(index: Any) -> int | None:
    """A hand as the console numbers it (from 1); None for a box's wager (Bust It, insurance)."""
    return None if index is None else int(index) + 1


def _net(stake: int, halves: int) -> int | float:
    net = Fraction(stake) * halves / 2
    return int(net) if net.denominator == 1 else float(net)


def _money(value: float) -> str:
    text = str(int(value)) if float(value).is_integer() else f"{value:.1f}"
    return f"+{text}" if value > 0 else text


def _time(at: float, zone: ZoneInfo) -> str:
    """The instant on the casino's wall clock with its UTC offset, to the millisecond: what a
    surveillance recording is searched by."""
    return datetime.fromtimestamp(at, zone).isoformat(timespec="milliseconds")


def reconstruct(
    records: list[Record], batch: str | None = None, time_zone: str = PENNSYLVANIA.time_zone
) -> dict[str, Any]:
    """The round as data: the account ``format_round`` tells, and ``--json`` prints. ``batch`` is
    the back in play when the round started (:func:`round_records`); every record's instant is
    given as ``at`` (seconds since the epoch, UTC) and ``time`` (``time_zone``'s wall clock)."""
    tz = zone(time_zone)
    start = records[0]
    wild = "wild_boxes" in start.payload
    boxes: dict[int, dict[str, Any]] = {}

    def box(seat: int) -> dict[str, Any]:
        return boxes.setdefault(
            seat, {"seat": seat, "wagers": {}, "cards": [], "decisions": [], "offers": []}
        )

    for w in start.payload.get("wagers") or []:
        box(w["seat"])["wagers"] = {k: v for k, v in w.items() if k != "seat" and v}
    for seat in start.payload.get("wild_boxes") or []:
        box(seat)["wagers"] = {"ante_and_blind": True}  # 687a.9(b): the main wagers, not sensed in chips
    dealer: list[dict[str, Any]] = []
    out: dict[str, Any] = {
        "round": start.payload["round"],
        "game": "dj-wild" if wild else "blackjack",
        "started": {
            "seq": start.seq,
            "at": start.at,
            "time": _time(start.at, tz),
            "dealer": start.payload.get("dealer"),
        },
        "time_zone": time_zone,
        "batches": [batch] if batch else [],  # the backs in play, in the order they were used
        "boxes": boxes,
        "dealer": dealer,
        "happened": [],
        "irregularities": [],
        "alarms": [],
        "settlement": None,
    }
    for r in records[1:]:
        p = {k: v for k, v in r.payload.items() if k not in (SEEN_KEY, "round")}
        entry: dict[str, Any] = {"seq": r.seq, "at": r.at, "time": _time(r.at, tz), "event": r.kind, **p}
        if "hand" in entry:
            entry["hand"] = _hand(entry["hand"])
        back = p.get("back")
        if r.kind in ("card_dealt", "hole_card_dealt") and back and back not in out["batches"]:
            out["batches"].append(back)
        if r.kind in ("card_dealt", "hole_card_dealt"):
            card = {"seq": r.seq, "card": p["card"], "hand": _hand(p["hand"])}
            card["face"] = "up" if r.kind == "card_dealt" else "down"
            if p.get("purpose"):
                card["purpose"] = p["purpose"]
            (dealer if p["seat"] == 0 else box(p["seat"])["cards"]).append(card)
        elif r.kind == "decision":
            made = {"seq": r.seq, "hand": _hand(p["hand"]), "action": p["action"]}
            if p.get("amount") is not None:
                made["amount"] = p["amount"]
            box(p["seat"])["decisions"].append(made)
        elif r.kind == "progressive_locked":  # 687a.9(b): the wagers the lights show
            for seat in p["boxes"]:
                box(seat)["wagers"]["progressive_bonus"] = True
        elif r.kind == "offer_answered":
            box(p["seat"])["offers"].append({"seq": r.seq, "offer": p["offer"], "answer": p["value"]})
        elif r.kind in ("alarm_raised", "alarm_acknowledged"):
            out["alarms"].append(entry)
            continue
        elif r.kind in ("round_settled", "round_voided"):
            out["settlement"] = _settlement(entry)
            continue
        if r.kind in IRREGULAR:
            out["irregularities"].append(entry)
        out["happened"].append(entry)
    return out


def _settlement(entry: dict[str, Any]) -> dict[str, Any]:
    s = dict(entry)
    if "settlements" in s:
        s["settlements"] = [
            {**line, "hand": _hand(line["hand"]), "net": _net(line["stake"], line["halves"])}
            for line in s["settlements"]
        ]
        s["dealer_order"] = [{**o, "hand": _hand(o.get("hand"))} for o in s.get("dealer_order", [])]
    return s


# -- the account in words ---------------------------------------------------------------------
def _who(seat: int, hand: int | None = None, hands: int = 1) -> str:
    if seat == 0:
        return "Dealer"
    return f"Box {seat}" + (f" hand {hand}" if hand is not None and hands > 1 else "")


def _wagers(w: dict[str, Any]) -> str:
    if w.get("ante_and_blind"):
        return "Ante and Blind" + (", Progressive Bonus" if w.get("progressive_bonus") else "")
    return ", ".join(f"{wager_name(k)} {v}" for k, v in w.items()) or "none"


def _line(e: dict[str, Any], rnd: dict[str, Any]) -> str:
    kind = e["event"]
    seat: int = int(e.get("seat") or 0)
    hands = _hands_of(rnd, seat) if seat else 1
    if kind == "card_dealt":
        if seat == 0:
            up = bool(rnd["dealer"]) and rnd["dealer"][0]["seq"] == e["seq"]
            return f"Dealer's {'up card' if up else 'card'} {e['card']}"
        purpose = {
            "double": " (the double's one card)",
            "split": " (to the split hand)",
            "second_chance": " (Second Chance card)",
            "later": " (the card missed, dealt after the others)",
        }
        return f"{_who(seat, e['hand'], hands)} dealt {e['card']}{purpose.get(e.get('purpose', ''), '')}"
    if kind == "hole_card_dealt":
        return f"Dealer's hole card dealt face down (it was {e['card']})"
    if kind == "decision":
        amount = ""
        if e["action"] == "double":
            amount = f" for {e['amount']}" if e.get("amount") is not None else " for the most allowed"
        return f"{_who(seat, e['hand'], hands)} {DECISIONS.get(e['action'], e['action'])}{amount}"
    if kind == "offer_answered":
        offer, value = offer_described(e["offer"]), e["value"]
        if isinstance(value, bool):
            return f"{_who(seat)} offered {offer}: {'took it' if value else 'declined'}"
        return f"{_who(seat)} offered {offer}: {f'wagered {value}' if value else 'declined'}"
    if kind == "reader_used":
        return "Hole card into the reader"
    if kind == "reader_result":
        result = e.get("result", e.get("light", e.get("blackjack")))
        if isinstance(result, str):  # the Masque reader's light (685a.7(h))
            return f"Reader's light: {LIGHTS.get(result, result)}"
        return f"Reader: {'dealer Blackjack' if result else 'no dealer Blackjack'}"
    if kind == "hole_card_exposed":
        return f"Hole card turned at once, both dealer cards Large (685a.7(h)): {e.get('hole', '')}".rstrip()
    if kind == "hole_card_turned":
        return f"Hole card turned: {e.get('hole', '')}".rstrip()
    if kind == "bet_sensed":
        return f"Box {e['box']} Progressive Bonus wager {'placed' if e['present'] else 'taken off'}"
    if kind == "progressive_locked":
        boxes = ", ".join(str(b) for b in e["boxes"]) or "none"
        return f"Start Game: Progressive Bonus wagers locked (boxes {boxes})"
    if kind == "progressive_collected":
        return "Progressive Bonus wagers collected (boxes " + ", ".join(str(b) for b in e["boxes"]) + ")"
    if kind == "wild_round_dealt":
        return f"Hands dealt from the hand ({e['cards']} cards)"
    if kind == "stub_counted":
        ok = "as expected" if e["ok"] else f"expected {e['expected']}: WRONG (687a.9(h))"
        return f"Stub counted: {e['count']} cards, {ok}"
    if kind == "action_taken":
        return f"{e['action']} by {e['who']} ({e['role']})"
    if kind == "card_missed":
        who = _who(seat, e["hand"], hands)
        return f"{who}: the dealer missed its card ({e['section']}, reported by {e['by']})"
    if kind == "hand_called_dead":
        return f"{_who(seat)} hand called dead under {e['section']} by {e['by']}"
    if kind == "cards_unaccounted":
        return f"{e['count']} card(s) left the {e['device']} unseen"
    if kind == "dealer_card_missed":
        return f"Dealer missed his {e['card']} card (reported by {e['by']})"
    if kind == "exposed_card_refused":
        return f"{_who(seat)} refused the exposed card"
    card = f" {e['card']}" if "card" in e else ""
    return f"Irregularity: {kind.replace('_', ' ')}{card}"


def _hands_of(rnd: dict[str, Any], seat: int) -> int:
    s = rnd["settlement"] or {}
    for b in s.get("boxes", []):
        if b["seat"] == seat:
            return len(b["hands"])
    return max([c["hand"] or 1 for c in rnd["boxes"].get(seat, {}).get("cards", [])] or [1])


def _clock(e: dict[str, Any]) -> str:
    """An entry's seq and its time of day (HH:MM:SS on the wall clock ``time`` was given in)."""
    return f"{e['seq']:>6}  {e['time'][11:19]}"


def format_round(rnd: dict[str, Any], title: str) -> str:
    s = rnd["settlement"]
    last = s["seq"] if s else "?"
    started = rnd["started"]
    ended = f" to {s['time'][11:19]}" if s else ""
    batches = " and ".join(rnd["batches"]) or "no"
    lines = [
        f"Round {rnd['round']} at {title}, dealer {started['dealer'] or 'not recorded'} "
        f"(journal records {started['seq']}-{last})",
        f"{batches} batch; {started['time'][:10]} from {started['time'][11:19]}{ended} "
        f"{rnd['time_zone']} (UTC{started['time'][23:]})",
        "",
        "Wagers placed:",
    ]
    for b in rnd["boxes"].values():
        lines.append(f"  Box {b['seat']}: {_wagers(b['wagers'])}")
    lines += ["", "What happened, in order:"]
    for e in rnd["happened"]:
        lines.append(f"  {_clock(e)}  {_line(e, rnd)}")
    if rnd["irregularities"]:
        lines += ["", "Irregularities:"]
        lines += [f"  {_clock(e)}  {_line(e, rnd)}" for e in rnd["irregularities"]]
    if rnd["alarms"]:
        lines += ["", "Alarms:"]
        for a in rnd["alarms"]:
            if a["event"] == "alarm_raised":
                said = f"alarm {a['id']} {a['section']}: {a['message']}; floor: {a['floor_action']}"
                lines.append(f"  {_clock(a)}  {said}")
            else:
                lines.append(f"  {_clock(a)}  alarm {a['id']} acknowledged by {a['by']}")
    lines.append("")
    if s is None:
        lines.append("Not settled: the journal ends during the round.")
    elif s["event"] == "round_voided":
        lines.append(f"VOID under {s['section']} (ordered by {s['by']}): every wager returned.")
    elif "settlements" in s:
        lines += _results(s)
    else:
        lines.append("Settled at the table (DJ Wild: the hands are settled there; 687a.9 governs the deal).")
    return "\n".join(lines)


def _results(s: dict[str, Any]) -> list[str]:
    d = s["dealer"]
    lines = [
        f"Dealer: {' '.join(d['cards'])} = {d['total']}{', Blackjack' if d['blackjack'] else ''}",
        "Hands:",
    ]
    for b in s["boxes"]:
        for i, h in enumerate(b["hands"], start=1):
            who = _who(b["seat"], i, len(b["hands"]))
            lines.append(
                f"  {who}: {' '.join(h['cards'])} = {h['total']}, {RESULTS.get(h['result'], h['result'])}"
            )
    lines.append("Money (+ paid to the player, - collected), with the section that decided it:")
    totals: dict[int, float] = {}
    hands = {b["seat"]: len(b["hands"]) for b in s["boxes"]}
    bets_seen: set[tuple[int, int]] = set()
    for line in s["settlements"]:
        hand = "" if line["hand"] is None or hands.get(line["seat"], 1) < 2 else f" hand {line['hand']}"
        name = wager_name(line["wager"])
        if line["wager"] == "bet" and line["hand"] is not None:
            # A hand's second Bet line is its Double Down (settled with it, rules/state.py).
            key = (line["seat"], line["hand"])
            name = "Double Down" if key in bets_seen else name
            bets_seen.add(key)
        net = line["net"]
        what = "returned" if net == 0 else ("paid" if net > 0 else "lost")
        lines.append(
            f"  Box {line['seat']}{hand} {name} {line['stake']}: {what} {_money(net) if net else ''}".rstrip()
            + f"  ({line['section']})"
        )
        totals[line["seat"]] = totals.get(line["seat"], 0) + net
    lines.append(
        "In all: " + "; ".join(f"Box {seat} {_money(v) if v else '0'}" for seat, v in sorted(totals.items()))
    )
    return lines
