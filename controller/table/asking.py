"""What the table is asking for next, as the dealer display shows it: whose turn, which decision
or offer, which card is awaited. One pure function of the table's public state, used by the
table's public snapshot (so MQTT state carries it) and by anything that shows a dealer display.

Public only: the player cards and the dealer's up card are face up at the table; the hole card
appears only once it is turned or exposed (685a.7(h)); a reader result, the shoe's order and a
stub's contents never appear.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller.errors import RuleViolation
from controller.rules.requests import (
    DEALER,
    OFFER_ANSWERS,
    OFFER_NAMES,
    Action,
    CardFor,
    Decision,
    ReaderUse,
)
from controller.table.round import ready_for_round
from controller.table.sections import section

if TYPE_CHECKING:
    from controller.rules.state import RoundState
    from controller.table.core import Table


def dealer_cards(state: RoundState) -> list[str]:
    """The dealer's cards as the table sees them: the hole card only once turned or exposed."""
    cards = [str(c) for c in state.dealer]
    if len(cards) >= 2 and not (state.hole_turned or state.hole_exposed):
        cards[1] = "hole"
    return cards


def hand_cards(state: RoundState, seat: int, hand: int) -> list[str]:
    box = next((b for b in state.boxes if b.seat == seat), None)
    if box is None or hand >= len(box.hands):
        return []
    return [str(c) for c in box.hands[hand].cards]


# What an ask shows of its progress rather than what it asks: DJ Wild's Start Game locks the
# Progressive wagers while the table still asks for the same deal (687a.9(b)-(e)).
PROGRESS_FIELDS = frozenset({"locked"})


@dataclass(slots=True)
class AskState:
    """How many answers to asks the journal holds (``ANSWERS``), kept with the table's state, so
    a restart (replaying the journal, or restoring a state snapshot) counts the same."""

    answers: int = 0


# The records that answer an ask: what a person or a device did that the table asked for (and a
# card that came for it but does not count, 673a.13(a)). After one of them the table's ask is
# another ask, even when it asks the same again (a re-split's card, 665a.11(c); the cover card of
# a recut stack, 673a.5(e); the card after one found face up). Not an answer, so the ask keeps
# its id: what happens while it stands (a wager locked, 687a.9(b); an alarm raised; a shuffle; a
# device's health; the cover card coming out, 673a.7(d)).
ANSWERS = frozenset({
    "cut_offered", "cut_refused", "cut_made", "cover_card_placed", "recut_ordered",
    "batch_to_shoe", "card_burned", "round_started", "card_dealt", "hole_card_dealt",
    "card_discarded_face_up", "decision", "offer_answered", "reader_result", "hand_called_dead",
    "wild_round_dealt", "stub_counted", "round_settled", "round_voided", "shoe_ended",
    "discards_reshuffled", "alarm_acknowledged",
})  # fmt: skip


def answered(table: Table, kind: str) -> None:
    """After each record applied (``Table.emit``, ``Table.apply``): one more answer if it is one."""
    if kind in ANSWERS:
        table.state.asks.answers += 1


def asking(table: Table) -> dict[str, Any]:
    """``what`` says what the table waits for; the other keys say for whom and with what;
    ``round`` the round it belongs to; ``id`` which ask it is (``ask_id``), so that a display, a
    dealer or a console answers each ask once however often the state is published."""
    ask = {**_asking(table), "round": table.round_no}
    return {**ask, "id": ask_id(ask, table.state.asks.answers)}


def ask_id(ask: dict[str, Any], answers: int) -> str:
    """The ask's identity: the ask itself (but its progress, e.g. ``locked``) and the number of
    answers journalled before it. The same while the table asks the same thing and nothing has
    answered it; another as soon as it asks anything else or an answer is journalled, so an ask
    asked again after an answer is another ask. A function of the journalled state, so a restart
    replaying the journal asks the same ask by the same id and an answer given before it is not
    given again."""
    body = repr(sorted((k, v) for k, v in ask.items() if k not in PROGRESS_FIELDS and k != "id"))
    digest = hashlib.blake2b(f"{answers}:{body}".encode(), digest_size=6).hexdigest()
    return f"{ask['round']}-{ask['what']}-{digest}"


def _asking(table: Table) -> dict[str, Any]:
    if table.halted:
        a = table.halted[0]
        return {"what": "floor", "alarm": a.id, "section": a.section, "message": a.message}
    cut = table.cut
    if cut is not None:  # a batch shuffled by hand: the cut of 673a.5(c)-(d) before the shoe
        if cut.cut_at is None:
            seat = cut.offer_order[0] if cut.offer_order else 0
            return {
                "what": "cut",
                "back": cut.back,
                "seat": seat,  # 0: the dealer, as everywhere (events, commands)
                "section": section(table.spec, "5(c)"),
            }
        if cut.cover_from_bottom is None:
            return {"what": "cover_card", "back": cut.back, "section": section(table.spec, "5(d)")}
        return {"what": "cut_to_shoe", "back": cut.back}
    wild = table.wild
    if wild is not None:
        if not wild.dealt:  # 687a.9(c)-(e): Start Game, the hands dealt from the hand, then Next
            return {"what": "wild_deal", "boxes": list(wild.boxes), "locked": wild.locked}
        return {"what": "stub", "cards": wild.stub_expected}  # 687a.9(f): counted or put away
    rnd = table.round
    if rnd is None or rnd.request is None:
        if table.shoe_back is None and table.blackjack:
            return {"what": "batch"}  # the next shuffled batch into the shoe
        if table.shoe_back is None:  # DJ Wild: no bets till the shuffled deck is in the hand
            return {"what": "batch", "into": "hand", "section": "687a.9(a)(2)"}
        if table.burns_due:
            return {"what": "burn", "cards": table.burns_due, "section": section(table.spec, "7(c)")}
        refused = _start_refused(table)
        if refused is not None:  # Start Game would be refused: say what the table waits for
            return {"what": "wait", "section": refused.section, "message": refused.message}
        return {"what": "bets"}  # chips on the sensors, then Start Game
    req, state = rnd.request, rnd.state
    up = str(state.dealer[0]) if state.dealer else None
    if isinstance(req, CardFor):
        whose: dict[str, Any] = (
            {"seat": DEALER, "dealt": len(state.dealer)}
            if req.seat == DEALER
            else {"seat": req.seat, "hand": req.hand, "dealt": len(hand_cards(state, req.seat, req.hand))}
        )
        return {"what": "card", **whose, "face_up": req.face_up, "purpose": req.purpose}
    if isinstance(req, Decision):
        decision: dict[str, Any] = {
            "what": "decision",
            "seat": req.seat,
            "hand": req.hand,
            "legal": sorted(a.value for a in req.legal),
            "cards": hand_cards(state, req.seat, req.hand),
            "up_card": up,
        }
        if Action.DOUBLE in req.legal:  # the most a double may be (a double for less is keyed)
            box = next(b for b in state.boxes if b.seat == req.seat)
            decision["double_limit"] = rnd.procedure.double_maximum(box)
        return decision
    if isinstance(req, ReaderUse):
        return {"what": "reader", "up_card": up, "masque": req.masque}
    offer = OFFER_NAMES.get(type(req))
    if offer is not None:
        answers = OFFER_ANSWERS[type(req)]
        out: dict[str, Any] = {
            "what": "offer",
            "offer": offer,
            "seat": getattr(req, "seat", None),
            "legal": [key for key, _ in answers],
            "answers": [{"key": key, "answer": answer} for key, answer in answers],
        }
        maximum = getattr(req, "maximum", None)
        if maximum is not None:
            out["maximum"] = maximum  # the wager `double` places
        giving = getattr(req, "section", None)
        if giving is not None:
            out["section"] = giving  # the subsection giving the option (card_later)
        hand = getattr(req, "hand", None)
        if hand is not None:
            out["hand"] = hand
            out["cards"] = hand_cards(state, out["seat"], hand)
        out["up_card"] = up
        return out
    return {"what": type(req).__name__}


def _start_refused(table: Table) -> RuleViolation | None:
    """Why a blackjack table would refuse Start Game now (the used batch still in the discard
    rack, 673a.3(b)(5); the reader not inspected this gaming day, 2(d); ...): never ask for bets
    that cannot be taken, which a dealer answering each ask once would answer for nothing."""
    if not table.blackjack:
        return None  # DJ Wild asks for the deck in the hand first (687a.9(a)(2))
    try:
        ready_for_round(table)
    except RuleViolation as e:
        return e
    return None


def layout(table: Table, bets: set[tuple[int, int]], boxes: int) -> dict[str, Any]:
    """The layout as the players see it: the dealer's cards (the hole card 'hole' until turned or
    exposed) and total once every card is public; for each box, the chips the sensors see (``spots``:
    the main and the side spot), the wagers taken this round, and each hand's cards, total and
    result (a split box has several hands). DJ Wild: the boxes dealt a hand and the cards the stub
    must hold (687a.9(f)); the hands themselves are the players' (dealt from the hand, unread)."""
    rnd = table.round
    state = rnd.state if rnd is not None else None
    dealer: dict[str, Any] = {"cards": [], "total": None}
    if rnd is not None and state is not None and state.dealer:
        cards = dealer_cards(state)
        dealer = {"cards": cards, "total": None if "hole" in cards else rnd.procedure.dealer_total()}
    wild = table.wild
    out_boxes: list[dict[str, Any]] = []
    for seat in range(1, boxes + 1):
        box = next((b for b in state.boxes if b.seat == seat), None) if state is not None else None
        entry: dict[str, Any] = {"seat": seat, "spots": [(seat, 1) in bets, (seat, 2) in bets]}
        if box is not None:
            wagers = {
                "bet": box.bet, **box.side,
                "double_attack": box.double_attack, "insurance": box.insurance,
            }  # fmt: skip
            entry["wagers"] = {k: v for k, v in wagers.items() if v}
            entry["dead"] = box.dead
            entry["hands"] = [
                {
                    "cards": [str(c) for c in h.cards],
                    "total": h.total if h.cards else None,
                    "soft": bool(h.cards) and h.soft,
                    "result": h.result,
                    "doubled": h.doubled,
                }
                for h in box.hands
            ]
        if wild is not None and seat in wild.boxes:
            entry["wild"] = {"dealt": wild.dealt, "progressive": seat in wild.sensed}
        out_boxes.append(entry)
    body: dict[str, Any] = {"dealer": dealer, "boxes": out_boxes}
    if wild is not None:
        body["wild"] = {"locked": wild.locked, "dealt": wild.dealt, "stub": wild.stub_expected}
    return body
