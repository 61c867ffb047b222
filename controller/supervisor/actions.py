"""Dealer and floor actions that are not device events: an allow-list of names, the roles that
may use each, and the checked arguments each takes. Anything else is refused in one line and
changes nothing. Every action that reaches the core names who did it, so the journal records it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.table import inputs as I

FLOOR, DEALER = "floor", "dealer"
ROLES = frozenset({FLOOR, DEALER})
DEVICES = ("shuffler", "shoe", "reader", "keypad", "stub_counter")


class BadAction(Exception):
    """A refused command: unknown name, wrong role or bad arguments (one line)."""


@dataclass(frozen=True)
class Action:
    roles: frozenset[str]
    args: dict[str, type | tuple[type, ...]]  # required arguments and their types
    optional: dict[str, type | tuple[type, ...]]
    # Builds the core inputs; None for actions the supervisor carries out itself.
    build: Callable[[dict[str, Any], str], list[I.Input]] | None
    doc: str


def _a(
    roles: set[str],
    doc: str,
    build: Callable[[dict[str, Any], str], list[I.Input]] | None,
    args: dict[str, type | tuple[type, ...]] | None = None,
    optional: dict[str, type | tuple[type, ...]] | None = None,
) -> Action:
    return Action(frozenset(roles), args or {}, optional or {}, build, doc)


ACTIONS: dict[str, Action] = {
    "inspection_verified": _a(
        {FLOOR}, "673a.4: a batch's new decks inspected by the dealer, verified by the floorperson",
        lambda a, who: [I.DecksOpened(back=a["back"], dealer=a["dealer"], floorperson=who,
                                      preinspected=bool(a.get("preinspected", False)))],
        {"back": str, "dealer": str}, {"preinspected": bool},
    ),
    "new_dealer": _a(
        {FLOOR, DEALER}, "673a.7(c): a new dealer comes to the table (burns a card)",
        lambda a, who: [I.NewDealer(name=a["name"])], {"name": str},
    ),
    "reshuffle_ordered": _a(
        {FLOOR}, "673a.5(f): the floor orders the batch reshuffled",
        lambda a, who: [I.ReshuffleOrdered(by=who)],
    ),
    "mark_out_of_order": _a(
        {FLOOR}, "673a.13(l): a device covered or signed out of order", None, {"device": str},
    ),
    "device_restored": _a(
        {FLOOR}, "a device marked out of order is back in service (shoe, keypad, reader, shuffler)",
        None, {"device": str},
    ),
    "shuffler_restored": _a(
        {FLOOR}, "the shuffler is back in service", lambda a, who: [I.ShufflerRestored(by=who)],
    ),
    "alarm_acknowledged": _a(
        {FLOOR}, "the floor has dealt with an alarm",
        lambda a, who: [I.AlarmAcknowledged(alarm=a["alarm"], by=who)], {"alarm": int},
    ),
    "reader_replaced": _a(
        {FLOOR}, "673a.13(j): the card reader repaired or replaced; dealing resumes",
        lambda a, who: [I.ReaderReplaced(by=who)],
    ),
    "reader_inspected": _a(
        {FLOOR}, "673a.2(d): the floorperson inspected the card reader at the start of the gaming day",
        lambda a, who: [I.ReaderInspected(floorperson=who)],
    ),
    "held_card_exposed": _a(
        {FLOOR, DEALER}, "673a.13(c): the card drawn in error was exposed to the players",
        lambda a, who: [I.HeldCardExposed(by=who)],
    ),
    "exposed_card_refused": _a(
        {DEALER}, "673a.13(c): the player deciding refuses the exposed card; no more cards for him",
        lambda a, who: [I.ExposedCardRefused(seat=a["seat"])], {"seat": int},
    ),
    "dealer_card_missed": _a(
        {DEALER}, "673a.13(e): the dealer missed his first or second card; players are dealt first",
        lambda a, who: [I.DealerCardMissed(by=who)],
    ),
    "hand_called_dead": _a(
        {FLOOR, DEALER}, "673a.13(g),(h), 685a.12(h): one box's hand dead, its wagers returned",
        lambda a, who: [I.HandCalledDead(seat=a["seat"], by=who)], {"seat": int},
    ),
    "patron_permitted": _a(
        {FLOOR}, "673a.6(b)(1): a box barred for sitting out a round may wager again",
        lambda a, who: [I.PatronPermitted(seat=a["seat"], by=who)], {"seat": int},
    ),
    "first_player_seated": _a(
        {FLOOR, DEALER}, "673a.5(c)(1): the first player at a new game is offered the cut",
        lambda a, who: [I.FirstPlayerSeated(seat=a["seat"])], {"seat": int},
    ),
    "misdeal_determined": _a(
        {FLOOR, DEALER}, "687a.9(h): after a wrong stub count, were the cards misdealt?",
        lambda a, who: [I.MisdealDetermined(misdealt=a["misdealt"], by=who)], {"misdealt": bool},
    ),
    "void_round": _a(
        {FLOOR}, "a floor ruling voiding the round (665a.13(h)(1), 685a.12(h))",
        lambda a, who: [I.VoidRound(by=who, section=a["section"])], {"section": str},
    ),
    "no_gaming_activity": _a(
        {FLOOR}, "673a.5(g): no gaming activity; the next cut goes to the first player",
        lambda a, who: [I.NoGamingActivity(by=who)],
    ),
    "hand_shuffled": _a(
        {DEALER}, "673a.13(l): a batch shuffled by hand once the shuffler is out of order",
        lambda a, who: [I.HandShuffled(back=a["back"], dealer=who)], {"back": str},
    ),
    "cut_refused": _a({DEALER}, "673a.5(c)", lambda a, who: [I.CutRefused(seat=a["seat"])], {"seat": int}),
    "cut_made": _a(
        {DEALER}, "673a.5(d): the cover card put `at` cards from the top by seat `by` (0: dealer)",
        lambda a, who: [I.CutMade(at=a["at"], by=a["by"])], {"at": int, "by": int},
    ),
    "cover_card_placed": _a(
        {DEALER}, "673a.5(d)", lambda a, who: [I.CoverCardPlaced(from_bottom=a["from_bottom"])],
        {"from_bottom": int},
    ),
    "recut_ordered": _a({FLOOR}, "673a.5(e)", lambda a, who: [I.RecutOrdered(by=who)]),
    "batch_to_shoe": _a(
        {DEALER}, "a hand-shuffled, cut batch goes into the shoe",
        lambda a, who: [I.BatchToShoe(back=a["back"])],
        {"back": str},
    ),
    # The keypad's keys, for when the keypad has failed (the main game goes on).
    "key": _a({DEALER}, "a keypad key: start_game, hit, stand, double, ...", None, {"key": str}),
    "start_round": _a(
        {DEALER}, "Start Game for the boxes listed (a failed keypad: no Progressive wagers)", None,
        {"boxes": list},
    ),
}  # fmt: skip


def check(name: str, args: Any, who: Any, role: Any) -> Action:
    """The action, or BadAction naming the first problem."""
    action = ACTIONS.get(name) if isinstance(name, str) else None
    if action is None:
        raise BadAction(f"unknown command {name!r}; known: {', '.join(sorted(ACTIONS))}")
    if not isinstance(who, str) or not who.strip():
        raise BadAction(f"{name}: who must name the person")
    if role not in action.roles:
        raise BadAction(
            f"{name}: the {role!r} role may not do this (allowed: {', '.join(sorted(action.roles))})"
        )
    if not isinstance(args, dict):
        raise BadAction(f"{name}: args must be an object")
    allowed = action.args | action.optional
    for key in args:
        if key not in allowed:
            raise BadAction(f"{name}: unknown argument {key!r}")
    for key, kind in allowed.items():
        if key not in args:
            if key in action.args:
                raise BadAction(f"{name}: missing argument {key!r}")
            continue
        value = args[key]
        # bool is an int in Python: a seat of `true` is a mistake, not seat 1.
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise BadAction(f"{name}: argument {key!r} must be a {want}")
    return action
