"""The one allow-list of dealer and floor actions that are not device events.

The table console (``controller/console``), the MQTT ``cmd/<name>`` topics
(``controller/telemetry/commands.py``) and the supervisor all take their actions from ``ACTIONS``:
each has one name, the roles that may use it, its checked arguments, the section it carries out
and the core inputs it becomes. Anything else is refused in one line and changes nothing. Every
action that reaches the core names who did it (the signed-in person), so the journal records it.
docs/install.md and docs/mqtt.md list this table (action_docs.py writes it there; a test checks).
An action's arguments are checked by a schema model made from its ``Arg`` declarations
(``args_model``), so the declaration stays the one place they are written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationError, create_model

from controller.ids import BACK_COLOUR, IDENTIFIER, TEXT, matches
from controller.schema import Document, Range, Rule, one_line
from controller.table import inputs as I
from devices.events import Key

FLOOR, DEALER = "floor", "dealer"
ROLES = frozenset({FLOOR, DEALER})  # a person's roles (the console's accounts)
# The archive's account: a machine, not a person; it may only ask for records again over MQTT.
ARCHIVE = "archive"
MAX_REPUBLISH = 10_000  # records one republish may ask for: a bounded read of the journal
DEVICES = ("shuffler", "shoe", "reader", "keypad", "stub_counter")

SECTION = re.compile(r"6[0-9]{2}a\.[0-9]+(\([0-9a-z]+\))*")  # a citation such as 665a.13(h)(1)
MAX_LIST = 6  # boxes at a table


class BadAction(Exception):
    """A refused command: unknown name, wrong role or bad arguments (one line)."""


@dataclass(frozen=True, slots=True)
class Arg:
    kind: type  # int, str, bool or list (a list of ints)
    doc: str
    required: bool = True
    minimum: int | None = None
    maximum: int | None = None
    pattern: re.Pattern[str] = TEXT
    choices: tuple[str, ...] = ()  # a string that must be one of these

    def describe(self) -> str:
        """For the docs and the console's forms."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        kind = {int: "int", str: "str", bool: "bool", list: "list of int"}[self.kind]
        if self.minimum is not None and self.maximum is not None:
            kind += f" {self.minimum}..{self.maximum}"
        elif self.minimum is not None:
            kind += f" >= {self.minimum}"
        return kind + ("" if self.required else ", optional")


@dataclass(frozen=True, slots=True)
class Action:
    name: str
    roles: frozenset[str]
    section: str  # where the rule is, in 673a (the same rule in 665a/685a/687a.9 where it applies)
    doc: str
    args: dict[str, Arg]
    # Builds the core inputs from checked arguments and who did it; None for the actions the
    # supervisor carries out itself (devices out of order or back, keys of a failed keypad).
    build: Callable[[dict[str, Any], str], list[I.Input]] | None
    # True for what the table's telemetry answers from its journal, never the game (republish):
    # it changes nothing at the table, so it is neither journalled nor offered on the console.
    telemetry: bool = False

    def public(self) -> dict[str, Any]:
        """The action as the console shows it (no callables)."""
        return {
            "name": self.name,
            "roles": sorted(self.roles),
            "section": self.section,
            "doc": self.doc,
            "args": {
                k: {
                    "kind": a.kind.__name__,
                    "required": a.required,
                    "min": a.minimum,
                    "max": a.maximum,
                    "choices": list(a.choices),
                    "doc": a.doc,
                }
                for k, a in self.args.items()
            },
        }


def _a(
    name: str,
    roles: set[str],
    section: str,
    doc: str,
    build: Callable[[dict[str, Any], str], list[I.Input]] | None,
    /,
    telemetry: bool = False,
    **args: Arg,
) -> Action:
    return Action(name, frozenset(roles), section, doc, args, build, telemetry)


_SEAT = Arg(int, "seat number", minimum=1, maximum=6)
_BACK = Arg(str, "the batch's back colour", pattern=BACK_COLOUR)
# Why a destructive action was taken, in the floor's words: one printable line (the journal's).
JOURNAL_ID = re.compile(r"[0-9a-f]{64}")  # a journal's identity: its first record's hash
REASON = re.compile(r"[^\x00-\x1f\x7f]{1,200}")
_REASON = Arg(
    str, "why, one line (journalled with who; the console asks for it)", required=False, pattern=REASON
)
# The ask an answer is meant for (the state's ``asking.id``): a button pressed twice, or on the
# display after the keypad already answered, must not answer the ask that came next.
ASK = Arg(
    str,
    "the id of the ask this answers (the state's asking.id); refused if the table asks another",
    required=False,
    pattern=REASON,
)
_DEVICE = Arg(
    str, "a device's name or kind (shuffler, shoe, reader, keypad, stub_counter)", pattern=IDENTIFIER
)

_ALL: list[Action] = [
    _a(
        "inspection_verified",
        {FLOOR},
        "673a.4",
        "a batch's new decks inspected by the dealer, verified by the floorperson",
        lambda a, who: [
            I.DecksOpened(
                back=a["back"],
                dealer=a["dealer"],
                floorperson=who,
                preinspected=bool(a.get("preinspected", False)),
            )
        ],
        back=_BACK,
        dealer=Arg(str, "the dealer who inspected them"),
        preinspected=Arg(bool, "decks inspected before they came to the table", required=False),
    ),
    _a(
        "new_dealer",
        {FLOOR, DEALER},
        "673a.7(c)",
        "a new dealer comes to the table (a card is burned)",
        lambda a, who: [I.NewDealer(name=a["name"])],
        name=Arg(str, "the dealer's name"),
    ),
    _a(
        "reshuffle_ordered",
        {FLOOR},
        "673a.5(f)",
        "the floor orders the batch reshuffled",
        lambda a, who: [I.ReshuffleOrdered(by=who)],
        reason=_REASON,
    ),
    _a(
        "mark_out_of_order",
        {FLOOR},
        "673a.13(l)",
        "a device covered or signed out of order",
        None,
        device=_DEVICE,
        reason=_REASON,
    ),
    _a(
        "device_restored",
        {FLOOR},
        "673a.13(l)",
        "a device marked out of order is back in service",
        None,
        device=_DEVICE,
    ),
    _a(
        "shuffler_restored",
        {FLOOR},
        "673a.13(l)",
        "the shuffler is back in service (device_restored shuffler)",
        None,
    ),
    _a(
        "alarm_acknowledged",
        {FLOOR},
        "673a.13",
        "the floor has dealt with an alarm",
        lambda a, who: [I.AlarmAcknowledged(alarm=a["alarm"], by=who)],
        alarm=Arg(int, "the alarm's id", minimum=1),
    ),
    _a(
        "reader_replaced",
        {FLOOR},
        "673a.13(j)",
        "the card reader repaired or replaced; dealing resumes",
        lambda a, who: [I.ReaderReplaced(by=who)],
    ),
    _a(
        "reader_inspected",
        {FLOOR},
        "673a.2(d)",
        "the floorperson inspected the card reader at the start of the gaming day",
        lambda a, who: [I.ReaderInspected(floorperson=who)],
    ),
    _a(
        "held_card_exposed",
        {FLOOR, DEALER},
        "673a.13(c)",
        "the card drawn in error was exposed to the players",
        lambda a, who: [I.HeldCardExposed(by=who)],
    ),
    _a(
        "exposed_card_refused",
        {DEALER},
        "673a.13(c)",
        "the player deciding refuses the exposed card; no more cards for him",
        lambda a, who: [I.ExposedCardRefused(seat=a["seat"])],
        seat=_SEAT,
    ),
    _a(
        "dealer_card_missed",
        {DEALER},
        "673a.13(e)",
        "the dealer missed his first or second card; players are dealt first",
        lambda a, who: [I.DealerCardMissed(by=who)],
    ),
    _a(
        "hand_called_dead",
        {FLOOR, DEALER},
        "673a.13(g)",
        "one box's hand dead, its wagers returned (673a.13(g),(h), 665a.13(f),(g), 685a.12(f)-(h))",
        lambda a, who: [I.HandCalledDead(seat=a["seat"], by=who)],
        seat=_SEAT,
    ),
    _a(
        "card_missed",
        {FLOOR, DEALER},
        "673a.13(g)",
        "the card the table asks for was not dealt to the box: the player is offered it after the"
        " others or a dead hand (673a.13(g),(h), 665a.13(f),(g), 685a.12(f),(g))",
        lambda a, who: [I.PlayerCardMissed(seat=a["seat"], by=who)],
        seat=_SEAT,
        ask=ASK,
    ),
    _a(
        "patron_permitted",
        {FLOOR},
        "673a.6(b)(1)",
        "a box barred for sitting out a round may wager again",
        lambda a, who: [I.PatronPermitted(seat=a["seat"], by=who)],
        seat=_SEAT,
    ),
    _a(
        "first_player_seated",
        {FLOOR, DEALER},
        "673a.5(c)(1)",
        "the first player at a new game is offered the cut",
        lambda a, who: [I.FirstPlayerSeated(seat=a["seat"])],
        seat=_SEAT,
    ),
    _a(
        "misdeal_determined",
        {FLOOR, DEALER},
        "687a.9(h)",
        "after a wrong stub count: were the cards misdealt?",
        lambda a, who: [I.MisdealDetermined(misdealt=a["misdealt"], by=who)],
        misdealt=Arg(bool, "true when the cards were misdealt"),
    ),
    _a(
        "void_round",
        {FLOOR},
        "665a.13(h)(1)",
        "a floor ruling voiding the round (also 685a.12(h))",
        lambda a, who: [I.VoidRound(by=who, section=a["section"])],
        section=Arg(str, "the section the ruling applies, e.g. 665a.13(h)(1)", pattern=SECTION),
        reason=_REASON,
    ),
    _a(
        "no_gaming_activity",
        {FLOOR},
        "673a.5(g)",
        "no gaming activity; the next cut goes to the first player",
        lambda a, who: [I.NoGamingActivity(by=who)],
    ),
    _a(
        "recut_ordered",
        {FLOOR},
        "673a.5(e)",
        "the floor orders the cut made again",
        lambda a, who: [I.RecutOrdered(by=who)],
    ),
    _a(
        "hand_shuffled",
        {DEALER},
        "673a.13(l)",
        "a batch shuffled by hand once the shuffler is out of order",
        lambda a, who: [I.HandShuffled(back=a["back"], dealer=who)],
        back=_BACK,
        ask=ASK,
    ),
    _a(
        "cut_refused",
        {DEALER, FLOOR},
        "673a.5(c)",
        "the seat offered the cut refuses it",
        lambda a, who: [I.CutRefused(seat=a["seat"])],
        seat=_SEAT,
        ask=ASK,
    ),
    _a(
        "cut_made",
        {DEALER, FLOOR},
        "673a.5(d)",
        "the cut made: the cover card put in, so many cards from the top, by the box that cut",
        lambda a, who: [I.CutMade(at=a["at"], by=a["by"])],
        at=Arg(int, "cards from the top", minimum=1, maximum=520),
        by=Arg(int, "the seat that cut, 0 for the dealer", minimum=0, maximum=6),
        ask=ASK,
    ),
    _a(
        "cover_card_placed",
        {DEALER, FLOOR},
        "673a.5(d)",
        "the cover card placed, so many cards from the bottom",
        lambda a, who: [I.CoverCardPlaced(from_bottom=a["from_bottom"])],
        from_bottom=Arg(int, "cards from the bottom", minimum=1, maximum=520),
        ask=ASK,
    ),
    _a(
        "batch_to_shoe",
        {DEALER},
        "673a.3(b)(4)",
        "a hand-shuffled, cut batch goes into the shoe",
        lambda a, who: [I.BatchToShoe(back=a["back"])],
        back=_BACK,
        ask=ASK,
    ),
    # The keypad's keys, for when the keypad has failed (the main game goes on).
    _a(
        "key",
        {DEALER},
        "673a.7(i)",
        "a keypad key, for a failed keypad; an amount with double is a double for less",
        None,
        key=Arg(str, "the key pressed", choices=tuple(k.value for k in Key)),
        amount=Arg(
            int,
            "chips keyed with it: a double (or insurance, Double Attack) for less than its limit",
            required=False,
            minimum=1,
            maximum=100_000,
        ),
        ask=ASK,
    ),
    _a(
        "start_round",
        {DEALER},
        "673a.7",
        "Start Game for the boxes listed (a failed keypad: no Progressive wagers)",
        None,
        boxes=Arg(list, "box numbers with a wager", minimum=1, maximum=6),
        ask=ASK,
    ),
    # Records published again from the journal, exactly as before, for the archive's gaps
    # (docs/journal.md, "The archive"); at most MAX_REPUBLISH of them (checked by the telemetry).
    _a(
        "republish",
        {FLOOR, ARCHIVE},
        "-",  # no rule of play: it only publishes what the journal already holds
        f"publish journal records `from_seq`..`to_seq` again (at most {MAX_REPUBLISH})",
        None,
        telemetry=True,
        from_seq=Arg(int, "the first record", minimum=1),
        to_seq=Arg(int, "the last record", minimum=1),
        # Which journal the records are of (its first record's hash): every gaming day starts on
        # a fresh journal whose seq starts at 1 again, and a table holds only its current one.
        journal=Arg(str, "the journal the records are of", required=False, pattern=JOURNAL_ID),
    ),
]
ACTIONS: dict[str, Action] = {a.name: a for a in _ALL}


def _pattern(pattern: re.Pattern[str]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not matches(pattern, value):  # whole: no trailing newline
            raise ValueError("not a short one-line string")
        return value

    return check


def _schema_type(arg: Arg) -> Any:
    """The pydantic type of one argument, refused in the words the docs and clients know."""
    if arg.kind is bool:
        return Annotated[bool, Rule("must be true or false")]
    if arg.kind is str:
        if arg.choices:
            return Annotated[Literal[arg.choices], Rule(f"must be {arg.describe()}")]
        return Annotated[str, AfterValidator(_pattern(arg.pattern)), Rule("must be a short one-line string")]
    out_of_range = Range(f"is out of range ({arg.describe()})", ge=arg.minimum, le=arg.maximum)
    if arg.kind is int:
        # bool is an int in Python: a seat of `true` is a mistake, not seat 1 (strict refuses it).
        return Annotated[int, Rule("must be an integer"), out_of_range]
    item = Annotated[int, Rule("must be a list of integers"), out_of_range]
    return Annotated[list[item], Field(min_length=1, max_length=MAX_LIST)]  # see _LIST_SHAPE


def args_model(action: Action) -> type[BaseModel]:
    """The action's arguments as a schema model (made once per action from its ``args``, so the
    allow-list stays the one declaration the docs are generated from)."""
    model = _MODELS.get(action.name)
    if model is None:
        fields: dict[str, Any] = {
            key: (_schema_type(arg), ... if arg.required else None) for key, arg in action.args.items()
        }
        model = create_model(f"{action.name}_args", __base__=Document, **fields)
        _MODELS[action.name] = model
    return model


_MODELS: dict[str, type[BaseModel]] = {}
_LIST_SHAPE = frozenset({"list_type", "too_short", "too_long"})  # a list argument's own shape


def lookup(name: object) -> Action:
    """The action called ``name``, or BadAction naming the ones there are."""
    action = ACTIONS.get(name) if isinstance(name, str) else None
    if action is None:
        raise BadAction("unknown command (allowed: " + ", ".join(sorted(ACTIONS)) + ")")
    return action


def check_args(action: Action, args: object) -> dict[str, Any]:
    """The arguments, checked against the action's; BadAction naming the first problem."""
    name = action.name
    if not isinstance(args, dict):
        raise BadAction(f"{name}: args must be an object")
    try:
        args_model(action).model_validate(args)
    except ValidationError as e:
        errors = e.errors(include_url=False, include_input=False)
        # An unknown argument is named first, as a misspelt one is the likelier mistake.
        first = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
        key = str(first["loc"][0]) if first["loc"] else ""
        if first["type"] == "extra_forbidden":
            raise BadAction(f"{name}: unknown argument {key[:32]!r}") from None
        if first["type"] == "missing":
            raise BadAction(f"{name}: missing argument {key!r}") from None
        if first["type"] in _LIST_SHAPE:
            raise BadAction(f"{name}: argument {key!r} must be a list of 1 to {MAX_LIST} integers") from None
        raise BadAction(f"{name}: argument {key!r} {one_line(e, '').split(': ', 1)[-1]}") from None
    return dict(args)


def check(name: object, args: object, who: object, role: object) -> Action:
    """The action, or BadAction naming the first problem."""
    action = lookup(name)
    if not matches(TEXT, who):
        raise BadAction(f"{action.name}: who must name the person")
    if role not in action.roles:
        raise BadAction(
            f"{action.name}: the {role!r} role may not do this (allowed: {', '.join(sorted(action.roles))})"
        )
    check_args(action, args)
    return action


def allowed(name: str, role: str) -> bool:
    action = ACTIONS.get(name)
    return action is not None and role in action.roles
