"""The dealer display as JSON: built by pure functions from the table's public state only.

``display(snapshot, kinds, turn)`` is what ``GET /api/display`` returns and what the page
draws: whose turn it is and what is asked or offered, the reader and the progressive, the shoe
and the batches, and every open alarm with the floor action it needs and its section. Its inputs
are the supervisor's public snapshot (no card identities), the kind of each device, and
``turn(ask)``: the table's own public ask (``controller.table.asking``, the snapshot's
``asking``) in the dealer's words. A hole card, a reader's answer or a stub's contents are not
public until the table shows them, so none of them is ever read here.

The display also says what may be done now (``now``: the few actions that fit the table's ask,
each fully argued but for a seat picked on the layout or a number typed) and which rarer actions
belong to this game (``menu``), so the page shows the moment's buttons rather than every form.
Both follow the raw ask's ``what`` and fall back to nothing for an ask they do not know: a new
kind of ask is still worded by ``turn`` and shown, with its actions in the menu.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.cards import PLAYER_LIMIT, CardError, hard_total, parse_card
from controller.console.alarm_actions import ends_by_itself, for_alarm
from controller.games import GAMES, GameId, wager_kinds
from controller.rules.requests import DEALER
from devices.events import Key

_OFFERS = {
    "insurance": "insurance offered",
    "even_money": "even money offered",
    "surrender": "surrender offered",
    "double_attack": "Double Attack wager offered",
    "second_chance": "Second Chance offered",
    "card_later": "card missed: the card after the others, or a dead hand",
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
        offer = str(ask.get("offer"))
        return {
            "who": _who(ask.get("seat")),
            "what": _OFFERS.get(offer, offer.replace("_", " ") + " offered"),
        }
    if what == "wild_deal":
        return {"who": "dealer", "what": "deal the hands" if ask.get("locked") else "Start Game"}
    if what == "stub":
        return {"who": "dealer", "what": "count the stub"}
    if what == "batch":
        where = "the shuffled deck in the hand" if ask.get("into") == "hand" else "a batch in the shoe"
        return {"who": "dealer", "what": f"waiting for {where}", **sec}
    if what == "wait":
        return {"who": "dealer", "what": f"waiting: {ask.get('message')}", **sec}
    if what == "burn":
        n = ask.get("cards")
        return {"who": "dealer", "what": f"burn {n} card{'' if n == 1 else 's'}", **sec}
    if what == "bets":
        return {"who": "players", "what": "place wagers, then Start Game"}
    return {"who": "dealer", "what": str(what)}


def display(
    snapshot: Mapping[str, Any],
    kinds: Mapping[str, str],
    turn: Mapping[str, Any],
    dealer: str | None = None,
    layout: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The dealer display from the public snapshot, each device's kind, ``turn``'s wording of the ask,
    the dealer's name (public: the dealer stands at the table) and the public layout
    (``controller.table.asking.layout``)."""
    devices: Mapping[str, str] = snapshot.get("devices", {})
    by_kind = {kinds[n]: (n, h) for n, h in devices.items() if n in kinds}

    def health(kind: str) -> str | None:
        return by_kind[kind][1] if kind in by_kind else None

    game = str(snapshot.get("game"))
    keypad_failed = health("keypad") in _FAILED or bool(snapshot.get("progressive_closed"))
    alarms = [
        {
            **a,
            "halts": any(h["id"] == a["id"] for h in snapshot.get("halted", [])),
            "actions": for_alarm(a, snapshot),  # the floor's way out, on the alarm itself
            "ends_by_itself": ends_by_itself(a, snapshot),  # or, with no button, how it ends
        }
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
        "batches": [
            {"back": back, **b, "state": _batch_words(b, snapshot, wild=game == _WILD)}
            for back, b in snapshot.get("batches", {}).items()
        ],
        "alarms": sorted(alarms, key=lambda a: (not a["halts"], a["id"])),
        "devices": [{"name": n, "kind": kinds.get(n), "health": h} for n, h in devices.items()],
        "layout": in_words(layout, game),
        "now": now(snapshot.get("asking") or {}, snapshot, keypad_failed),
        "menu": menu(game, kinds.values(), snapshot),
    }


_WILD = "dj-wild"
# The wagers each sensor spot of a box takes, by game (controller/supervisor/mapping.py: spot 1
# the main wager, spot 2 the game's optional one), and the names of the wagers taken, as the
# dealer says them.
_MAIN_SPOT = {_WILD: "Ante and Blind"}


def _side_spot(game: str) -> str:
    spec = GAMES.get(GameId(game))
    optional = spec.optional_wagers if spec is not None else ()
    return optional[0].name if optional else "side wager"


def _wager_name(key: str) -> str:
    """A wager taken as the dealer says it: the main spot's "Blackjack Wager", any other by the
    name its game declares (a key no registered game has as it is written)."""
    if key == "bet":
        return "Blackjack Wager"
    kind = wager_kinds().get(key)
    return kind.name if kind is not None else key.replace("_", " ")


_FAILED = ("fault", "out_of_order", "failed")
_KEYS = frozenset(k.value for k in Key)
_LABELS = {"double": "double down", "second_chance": "second chance", "start_game": "Start Game"}


def in_words(layout: Mapping[str, Any] | None, game: str) -> dict[str, Any]:
    """The public layout with each box's sensed chips and wagers named as the game names them,
    and a Second Chance card marked (``mark_second_chance``)."""
    if layout is None:
        return {"dealer": {"cards": [], "total": None}, "boxes": []}
    names = (_MAIN_SPOT.get(game, "Blackjack Wager"), _side_spot(game))
    boxes = []
    for box in layout.get("boxes", []):
        spots = list(box.get("spots", []))
        named = {
            "chips": [name for name, sensed in zip(names, spots, strict=False) if sensed],
            "hands": [mark_second_chance(h) for h in box.get("hands", [])],
        }
        if "wagers" in box:
            named["wagers"] = {_wager_name(k): v for k, v in box["wagers"].items()}
        boxes.append({**box, **named})
    return {**layout, "boxes": boxes}


def mark_second_chance(hand: Mapping[str, Any]) -> dict[str, Any]:
    """673a.7(l): a Second Chance card is dealt sideways and its value subtracted from the hand.
    A hand whose cards before its last already total over 21 (aces 1) can only have drawn that
    last card as its Second Chance (any other hand stops at 21), so it is marked
    ``second_chance`` (the card) with ``before``, the total it was subtracted from."""
    cards = [str(c) for c in hand.get("cards") or []]
    if len(cards) < 3:
        return dict(hand)
    try:
        before = hard_total([parse_card(c) for c in cards[:-1]])
    except CardError:
        return dict(hand)
    if before <= PLAYER_LIMIT:
        return dict(hand)
    return {**hand, "second_chance": cards[-1], "before": before}


def _batch_words(batch: Mapping[str, Any], snapshot: Mapping[str, Any], *, wild: bool) -> str:
    """Where a batch is and what it waits for, in the dealer's words (the batch being dealt says
    so: its shuffler state is reset once it leaves the shuffler, which is not 'unshuffled')."""
    location, shuffler = batch.get("location"), batch.get("shuffler")
    if location == "shoe":
        if wild:
            return "the deck in play, dealt by hand"
        return f"in the shoe, being dealt ({snapshot.get('cards_in_shoe', 0)} cards left)"
    if location == "discard":
        return "dealt; in the discard rack, to be shuffled"
    if location == "shuffler":
        return {
            "unshuffled": "in the shuffler, waiting to be shuffled",
            "shuffling": "in the shuffler, shuffling",
            "ready": "in the shuffler, shuffled and ready",
            "jammed": "in the shuffler, jammed: to be shuffled again",
        }.get(str(shuffler), f"in the shuffler ({shuffler})")
    if location == "layout":
        return "on the layout"
    if location == "new":
        return "new, not yet in play"
    return "out of play"


def _do(action: str, label: str, args: Mapping[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    """One button of the moment: the action, its words, the arguments it is sent with; ``pick``
    ("seat" or "seats") when the seat comes from the layout, ``inputs`` for numbers typed."""
    return {"action": action, "label": label, "args": dict(args or {}), **more}


def _key(key: str, label: str | None = None) -> dict[str, Any]:
    return _do("key", label or _LABELS.get(key, key.replace("_", " ")), {"key": key})


def now(ask: Mapping[str, Any], snapshot: Mapping[str, Any], keypad_failed: bool) -> list[dict[str, Any]]:
    """The actions that fit the table's ask now, as the dealer's buttons (the keypad's keys are
    there too: the display is the dealer's second keypad, and the only one when it has failed).
    Each is sent with the ask's id: a button pressed again, or after the keypad answered, is
    refused instead of answering the next ask."""
    buttons = _buttons(ask, snapshot, keypad_failed)
    if isinstance(ask.get("id"), str):
        for button in buttons:
            button["args"]["ask"] = ask["id"]
    return buttons


def _buttons(
    ask: Mapping[str, Any], snapshot: Mapping[str, Any], keypad_failed: bool
) -> list[dict[str, Any]]:
    what = ask.get("what")
    if what == "decision":
        return [_key(str(a)) for a in ask.get("legal", []) if str(a) in _KEYS]
    if what == "offer":
        offer = ask.get("offer")
        if offer in ("insurance", "double_attack"):
            take = "take insurance" if offer == "insurance" else "take Double Attack"
            return [
                _key("double", take),
                _key("next", "decline"),
                _key("insurance_closed", "close all offers"),
            ]
        if offer == "even_money":
            return [_key("double", "take even money"), _key("next", "decline")]
        if offer in ("surrender", "second_chance"):
            return [_key(str(offer), "take " + str(offer).replace("_", " ")), _key("next", "decline")]
        if offer == "card_later":  # 673a.13(g),(h): the player's option when his card was missed
            return [_key("hit", "card after the others"), _key("next", "hand dead")]
        # A game's own offer: the keys it registered, by what each does.
        return [_key(str(a["key"]), str(a["answer"]).replace("_", " ")) for a in ask.get("answers", [])]
    if what == "bets":
        return [_do("start_round", "Start Game", pick="seats")]
    if what == "wild_deal":
        if ask.get("locked"):
            return [_key("next", "hands dealt")]
        return [_do("start_round", "Start Game", pick="seats")]
    if what == "cut":
        seat = ask.get("seat")
        by = 0 if seat in ("dealer", DEALER, None, 0) else int(seat)
        made = _do(
            "cut_made",
            "cut made",
            {"by": by},
            inputs=[{"name": "at", "label": "cards from the top", "min": 1, "max": 520}],
        )
        if by:
            return [made, _do("cut_refused", f"box {by} refuses the cut", {"seat": by})]
        return [made]
    if what == "cover_card":
        return [
            _do("cover_card_placed", "cover card placed",
                inputs=[{"name": "from_bottom", "label": "cards from the bottom", "min": 1, "max": 520}])
        ]  # fmt: skip
    if what == "cut_to_shoe":
        back = ask.get("back")
        return [_do("batch_to_shoe", f"the {back} batch into the shoe", {"back": back})]
    if what == "batch" and snapshot.get("shuffler_out_of_order"):
        waiting = [
            back
            for back, b in snapshot.get("batches", {}).items()
            if b.get("location") in ("new", "shuffler", "discard")
        ]
        return [
            _do("hand_shuffled", f"the {back} batch shuffled by hand", {"back": back}) for back in waiting
        ]
    return []


# The rarer actions and the games they belong to (None: every game). An action missing here is
# one of the moment's (``now``) or the floor's everyday ones, shown in full on the floor console.
_RARE: dict[str, tuple[str, ...] | None] = {
    "new_dealer": None,
    "first_player_seated": ("double-back-jack", "double-attack", "down-under"),
    "held_card_exposed": ("double-back-jack", "double-attack", "down-under"),
    "exposed_card_refused": ("double-back-jack", "double-attack", "down-under"),
    "dealer_card_missed": ("double-back-jack", "double-attack", "down-under"),
    "hand_called_dead": ("double-back-jack", "double-attack", "down-under"),
    "card_missed": ("double-back-jack", "double-attack", "down-under"),  # 673a.13(g),(h)
    "misdeal_determined": (_WILD,),
    "hand_shuffled": None,
    "void_round": ("double-attack", "down-under"),  # 665a.13(h)(1), 685a.12(h)
    "reader_replaced": None,
    "reader_inspected": None,
    "recut_ordered": None,
    "no_gaming_activity": None,
    "patron_permitted": None,
}
_NEEDS_DEVICE = {"reader_replaced": "reader", "reader_inspected": "reader"}
_VOID_SECTION = {"double-attack": "665a.13(h)(1)", "down-under": "685a.12(h)"}
# Floor actions the page asks to confirm, with a reason the journal keeps with who did it, and
# what each does that the person must know first (the confirmation says it, and says it truly:
# a device marked out of order comes back with "device restored").
CONSEQUENCES = {
    "void_round": "Every wager of the round in play is returned and its cards are discarded; "
    "a void cannot be undone.",
    "reshuffle_ordered": "The batch is reshuffled before any more of it is dealt; this cannot be undone.",
    "mark_out_of_order": "The device is taken out of service until the floor restores it (device restored).",
}
DESTRUCTIVE = tuple(CONSEQUENCES)


def menu(game: str, kinds: Any, snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The rarer actions of this game at this table (the page's secondary menu shows those the
    person's role may take), the destructive ones, and the section a void applies here."""
    have = set(kinds)
    names = [
        name
        for name, games in _RARE.items()
        if (games is None or game in games)
        and _NEEDS_DEVICE.get(name, "") in have | {""}
        and (name != "hand_shuffled" or bool(snapshot.get("shuffler_out_of_order")))
    ]
    return {
        "rare": names,
        "hidden": [name for name in _RARE if name not in names],  # not of this game, or not now
        "destructive": list(DESTRUCTIVE),
        "consequences": dict(CONSEQUENCES),
        "void_section": _VOID_SECTION.get(game),
    }
