"""The public contract: every MQTT payload the table publishes or takes, and the console's
``/api/display``, as types, and the JSON Schemas (Draft 2020-12) generated from them.

The shipped schema files (``controller/telemetry/schemas/*.json``, package data, published in
docs/mqtt.md) are written from these types by ``python -m controller.telemetry.contract``; a test
checks the files equal a fresh generation and that every message a demo run and a wire run
publish validates against them. Event payloads are the table core's own event types
(``controller/table/events.py``), one schema per kind; command arguments are the action
allow-list's own models (``controller/actions.py``).

Compatibility (docs/mqtt.md, "Schemas"): within one ``schema_version`` fields are only added,
never removed, renamed or given another meaning; every object allows properties it does not
list, so a consumer must ignore what it does not know. A change that breaks that promise raises
``schema_version``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model

from controller.rules.requests import OFFER_NAMES
from controller.telemetry.payloads import SCHEMA_VERSION

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_DIR = Path(__file__).with_name("schemas")


class Open(BaseModel):
    """An object of the contract: the fields it lists, and any others a later version adds."""

    model_config = ConfigDict(extra="allow")


class Versioned(Open):
    version: Literal[1] = Field(description="the payload format (always 1)")
    schema_version: Literal[1] = Field(description="the schema version this message follows")


Incarnation = Annotated[
    str,
    Field(
        description="the appliance process that published this (new at each start of `tablectl run`): "
        "a retained message whose incarnation is not the one of the current status is left over from "
        "an earlier process and is not acted on"
    ),
]


class Retained(Versioned):
    incarnation: Incarnation


# -- status ----------------------------------------------------------------------------------------
JournalId = Annotated[
    str,
    Field(
        description="the journal's identity: the hash of its first record (64 hex digits). Every "
        "gaming day starts on a fresh journal whose seq starts at 1 again; seq is unique within one "
        "journal, and (site, table, journal, seq) names one record for good"
    ),
]


class JournalMark(Open):
    last_seq: int
    published_seq: int
    id: JournalId | None = None


class Heartbeat(Versioned):
    """``tablectl/<site>/<table>/heartbeat``: where the table's journal stands, every few seconds."""

    incarnation: Incarnation
    site: str
    table: str
    journal: JournalMark


class Birth(Retained):
    online: Literal[True]
    birth: str
    site: str
    table: str
    game: str
    config_hash: str
    versions: dict[str, str | int]
    journal: JournalMark


class Death(Retained):
    online: Literal[False]
    clean: bool = Field(description="false: the broker's Last Will for a table it lost")
    birth: str
    site: str | None
    table: str | None


# -- the dealer-facing ask (snapshot.asking) -------------------------------------------------------
Seat = Annotated[int, Field(ge=0, description="a box number; 0 is the dealer (everywhere)")]


class AskBase(Open):
    round: int = Field(description="the round the ask belongs to")
    id: str = Field(
        description="which ask this is: the same while the table asks the same thing (a change such as "
        "`locked` keeps it), another when it asks anything else; answer each id once"
    )


class AskFloor(AskBase):
    what: Literal["floor"]
    alarm: int | None = Field(default=None, description="the id of the halting alarm the floor clears")
    section: str
    message: str


class AskCut(AskBase):
    what: Literal["cut"]
    back: str
    seat: Seat
    section: str


class AskCoverCard(AskBase):
    what: Literal["cover_card"]
    back: str
    section: str


class AskCutToShoe(AskBase):
    what: Literal["cut_to_shoe"]
    back: str


class AskWildDeal(AskBase):
    what: Literal["wild_deal"]
    boxes: list[int]
    locked: bool


class AskStub(AskBase):
    what: Literal["stub"]
    cards: int = Field(description="what the stub must hold: 53 minus the cards dealt (687a.9(g))")


class AskBatch(AskBase):
    what: Literal["batch"]


class AskBurn(AskBase):
    what: Literal["burn"]
    cards: int
    section: str


class AskBets(AskBase):
    what: Literal["bets"]


class AskCard(AskBase):
    what: Literal["card"]
    seat: Seat
    hand: int | None = None
    dealt: int
    face_up: bool
    purpose: str


class AskDecision(AskBase):
    what: Literal["decision"]
    seat: Seat
    hand: int
    legal: list[str] = Field(description="the keys the dealer may press: the legal actions")
    cards: list[str]
    up_card: str | None
    double_limit: int | None = Field(
        default=None,
        description="when `double` is legal: the most the double may be (a double for less is keyed)",
    )


class AskReader(AskBase):
    what: Literal["reader"]
    up_card: str | None
    masque: bool


class OfferAnswer(Open):
    key: str = Field(description="the keypad key")
    answer: Literal["take", "decline", "decline_all"]


# The registered offers' names (controller.rules.requests.offer), in the order they registered:
# an enum in the schema, a plain string to mypy (a Literal cannot be built from data it checks).
if TYPE_CHECKING:
    OfferName = str
else:
    OfferName = Literal[tuple(OFFER_NAMES.values())]


class AskOffer(AskBase):
    what: Literal["offer"]
    offer: OfferName = Field(
        description="card_later: the dealer missed the box's card; the player takes it after all"
        " other players have received theirs (`hit`) or a dead hand (`next`), 673a.13(g),(h),"
        " 665a.13(f),(g), 685a.12(f),(g)"
    )
    seat: Seat
    legal: list[str] = Field(description="the keys that answer it")
    answers: list[OfferAnswer]
    maximum: int | None = Field(
        default=None, description="the wager `double` places (insurance, Double Attack)"
    )
    section: str | None = Field(default=None, description="the subsection that gives the option (card_later)")
    hand: int | None = None
    cards: list[str] | None = None
    up_card: str | None


Asking = Annotated[
    AskFloor | AskCut | AskCoverCard | AskCutToShoe | AskWildDeal | AskStub | AskBatch | AskBurn | AskBets
    | AskCard | AskDecision | AskReader | AskOffer,
    Field(discriminator="what"),
]  # fmt: skip


# -- state -----------------------------------------------------------------------------------------
class BatchView(Open):
    location: Literal["new", "shuffler", "shoe", "hand", "layout", "discard", "removed"]
    shuffler: str


class HaltView(Open):
    id: int
    section: str
    message: str


class AlarmView(HaltView):
    floor_action: str
    action: str | None = Field(
        default=None,
        description="the floor action that is the way out (reader_replaced, void_round, misdeal_determined, "
        "hand_called_dead; docs/console.md), when it is not an acknowledgement; absent: acknowledge it",
    )


Health = str  # devices' health words: online, connecting, degraded, offline, failed, out_of_order ...


class Snapshot(Open):
    """The table's public state. The core's fields are absent while the table is still reading
    its journal and devices at start."""

    table: str
    site: str
    game: str
    devices: dict[str, Health]
    progressive_closed: bool
    shoe_failed: bool
    round: int | None = None
    in_round: bool | None = None
    batch_in_shoe: str | None = None
    cards_in_shoe: int | None = Field(default=None, description="a count, never the cards")
    cover_card_reached: bool | None = None
    shuffler_out_of_order: bool | None = None
    reader_failed: bool | None = None
    reader_inspected_for: str | None = None
    out_of_order: list[str] | None = None
    batches: dict[str, BatchView] | None = None
    halted: list[HaltView] | None = None
    alarms: list[AlarmView] | None = None
    asking: Asking | None = None
    journal_failed: str | None = Field(
        default=None,
        description="why the journal cannot be written, while it cannot (dealing is halted: alarm 0);"
        " null otherwise",
    )


class StateJournal(Open):
    published_seq: int = Field(
        description="the last seq published on `events` when this state was sent (sent again after "
        "each batch of events): a client that subscribes late knows how far the journal has gone"
    )


class State(Retained):
    game: str
    snapshot: Snapshot
    devices: dict[str, Health]
    journal: StateJournal


# -- alarms, devices -------------------------------------------------------------------------------
class AlarmEntry(Open):
    id: int
    section: str
    message: str
    floor_action: str
    halts_dealing: bool
    action: str | None = Field(
        default=None,
        description="the floor action that is the way out (reader_replaced, void_round, misdeal_determined, "
        "hand_called_dead; docs/console.md), when it is not an acknowledgement; absent: acknowledge it",
    )


class Alarms(Retained):
    count: int
    alarms: list[AlarmEntry]


class Device(Retained):
    device: str
    health: Health


# -- command results -------------------------------------------------------------------------------
class CommandResult(Versioned):
    command: str
    id: str | None
    who: str | None
    ok: bool
    error: str | None = None
    section: str | None = None
    message: str | None = None
    seq: int | None = None
    # republish: how many records went out again, and the span the journal does not hold
    republished: int | None = None
    missing_from: int | None = None
    missing_to: int | None = None


class ArchiveAlarm(Versioned):
    """tablectl/<site>/archive/alarms: the archive found a table's chain broken (docs/journal.md)."""

    site: str
    table: str
    seq: int
    alarm: Literal["fork", "gap", "changed_hash", "bad_hash", "refused", "unknown_table"]
    detail: str
    journal: JournalId | None = None


# -- events (one schema per kind, from the core's event types) -------------------------------------
class Withheld(Versioned):
    seq: int
    kind: str
    classification: Literal["until_revealed", "secret"]
    withheld: Literal[True]
    at: float | None = Field(default=None, description="the record's UTC instant (seconds since the epoch)")
    day: str | None = Field(default=None, description="the gaming day it belongs to, YYYY-MM-DD, local time")
    tz: str | None = Field(default=None, description="the IANA zone the gaming day is counted in")
    journal: JournalId | None = None
    prev_hash: str | None = Field(
        default=None,
        description="the hash of the record before, present only when that record is public (its hash "
        "is published with it anyway)",
    )


def _event_models() -> list[type[BaseModel]]:
    from controller.table import core  # noqa: F401  (registers every event type)
    from controller.table.events import CLASSIFICATION, EVENT_TYPES

    out: list[type[BaseModel]] = []
    for kind in sorted(EVENT_TYPES):
        if CLASSIFICATION[kind].value != "public":
            continue
        fields: dict[str, Any] = {
            "seq": (int, ...),
            "at": (float, ...),
            "kind": (Literal.__getitem__(kind), ...),
            "classification": (Literal.__getitem__("public"), ...),
            "payload": (EVENT_TYPES[kind], ...),
            "hash": (str, ...),
            "prev_hash": (str | None, None),
            "day": (str | None, None),  # the gaming day, YYYY-MM-DD, in the casino's time
            "tz": (str | None, None),  # the IANA zone it is counted in
            "journal": (JournalId | None, None),  # which journal: its first record's hash
        }
        out.append(create_model(f"event_{kind}", __base__=Versioned, **fields))
    return out


# -- /api/display ---------------------------------------------------------------------------------
class Turn(Open):
    who: str
    what: str


class HealthOnly(Open):
    health: str | None


class ReaderDisplay(HealthOnly):
    failed: bool


class ProgressiveDisplay(HealthOnly):
    open: bool


class ShoeDisplay(HealthOnly):
    batch: str | None
    cards: int
    cover_card_reached: bool
    failed: bool


class ShufflerDisplay(HealthOnly):
    out_of_order: bool


class DisplayBatch(BatchView):
    back: str


class DisplayAlarm(AlarmView):
    halts: bool


class DisplayDevice(Open):
    name: str
    kind: str | None
    health: str


class Display(Open):
    table: str | None
    game: str | None
    round: int | None
    in_round: bool
    dealer: str | None
    turn: Turn
    dealing_stopped: bool
    reader: ReaderDisplay
    progressive: ProgressiveDisplay
    shoe: ShoeDisplay
    shuffler: ShufflerDisplay
    batches: list[DisplayBatch]
    alarms: list[DisplayAlarm]
    devices: list[DisplayDevice]


# -- generation ------------------------------------------------------------------------------------
def _schema(title: str, model: Any, description: str) -> dict[str, Any]:
    from pydantic import TypeAdapter

    schema = TypeAdapter(model).json_schema(mode="serialization")
    return {
        "$schema": DRAFT,
        "$id": f"tablectl:{title}:v{SCHEMA_VERSION}",
        "title": title,
        "description": description,
        **schema,
    }


def _commands() -> Any:
    from controller.actions import args_model
    from controller.telemetry.commands import COMMANDS

    models = []
    for name, action in sorted(COMMANDS.items()):
        fields: dict[str, Any] = {
            "version": (Literal.__getitem__(1), ...),
            "schema_version": (Optional.__getitem__(Literal.__getitem__(1)), None),
            "id": (str, ...),
            "who": (str, ...),
            "role": (Literal.__getitem__("floor"), ...),
            "args": (args_model(action), ...),
        }
        models.append(create_model(f"command_{name}", __base__=Open, **fields))
    return _union(models)


def _union(models: Sequence[type[BaseModel]]) -> Any:
    from functools import reduce
    from operator import or_

    return reduce(or_, models)


def schemas() -> dict[str, dict[str, Any]]:
    """Every schema file, by name, generated from the types above."""
    return {
        "status.json": _schema("status", Birth | Death, "tablectl/<site>/<table>/status: birth and death"),
        "state.json": _schema("state", State, "tablectl/<site>/<table>/state: the public state"),
        "events.json": _schema(
            "events",
            _union([*_event_models(), Withheld]),
            "tablectl/<site>/<table>/events: one journal record",
        ),
        "heartbeat.json": _schema(
            "heartbeat", Heartbeat, "tablectl/<site>/<table>/heartbeat: the journal's last_seq"
        ),
        "alarms.json": _schema("alarms", Alarms, "tablectl/<site>/<table>/alarms: active alarms"),
        "devices.json": _schema(
            "devices", Device, "tablectl/<site>/<table>/devices/<name>: one device's health"
        ),
        "commands.json": _schema(
            "commands", _commands(), "tablectl/<site>/<table>/cmd/<name>: a floor command"
        ),
        "results.json": _schema("results", CommandResult, "tablectl/<site>/<table>/cmd/<name>/result"),
        "display.json": _schema("display", Display, "the table console's GET /api/display"),
        "archive.json": _schema("archive", ArchiveAlarm, "tablectl/<site>/archive/alarms: a broken chain"),
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    """``python -m controller.telemetry.contract`` writes the schema files (after a type changed)."""
    SCHEMA_DIR.mkdir(exist_ok=True)
    for name, schema in schemas().items():
        (SCHEMA_DIR / name).write_text(render(schema), encoding="utf-8")
    print(f"wrote {len(schemas())} schemas to {SCHEMA_DIR}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
