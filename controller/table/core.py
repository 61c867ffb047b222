"""The table core: procedure at one table as a sans-I/O state machine.

``Table.handle(input, now)`` checks an input against the state and the rules and returns a
``Step``: the domain events it decided (to be journalled before anything else happens) and the
device commands that carry them out. A refused input raises RuleViolation naming the section and
changes nothing. ``Table.apply(event)`` is the only place state changes; ``handle`` applies the
events it decides, and a restart rebuilds the table by applying the journal's events in order
(``Table.replay``). No clock, no I/O, no randomness.

The procedure itself is in small machines, one module each, with its typed events, its state and
its transitions (as h11 keeps an HTTP connection): alarms (``alarms``), the two batches and the
shuffler (``shuffler``), the cut (``cut``), the shoe (``shoe``) and each card out of it
(``draw``), the end of a round (``round_end``), the blackjack round (``round``) and the dealer's
decisions and offers in it (``decisions``), one player's hand (``irregular``), the reader
(``reader``), DJ Wild dealt from the hand (``wild``) and its Progressive (``progressive``), and
the devices (``devices``). Each imports only machines before it in that list (``MACHINES``;
pyproject.toml's import contract ``table-machines`` holds them to it).
This object only routes: an input to the machine registered for its type, an event to its
transition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from controller.errors import RuleViolation
from controller.game_config import GameOptions
from controller.gaming_day import PENNSYLVANIA
from controller.rules.round import Round
from controller.table import (
    alarms,
    cut,
    decisions,
    devices,
    draw,
    irregular,
    progressive,
    reader,
    round,
    round_end,
    sensors,
    shoe,
    shuffler,
    wild,
)
from controller.table import inputs as I
from controller.table.alarms import Alarm
from controller.table.asking import AskState, answered, asking
from controller.table.batches import Batch, Place
from controller.table.events import DECODERS, EVENT_TYPES, OMIT, DomainEvent, Event, event, typed
from controller.table.machine import HANDLERS, TRANSITIONS, Command, Step, applies, plain, public_fields
from controller.table.sections import section
from controller.table.shuffler import DECK_LIFETIME, EXPIRY_WARNING

__all__ = ["BACKS", "DECK_LIFETIME", "EXPIRY_WARNING", "Command", "Step", "Table", "TableState"]

BACKS = ("blue", "red")  # default back colours of the two batches

# Importing a machine registers its handlers and transitions; this is the whole table, each
# machine after those it imports.
MACHINES = (
    alarms,
    shuffler,
    cut,
    shoe,
    draw,
    round_end,
    round,
    decisions,
    irregular,
    reader,
    wild,
    progressive,
    devices,
    sensors,
)


@dataclass(slots=True)
class TableState:
    """Everything that decides what the table does next: one part per machine."""

    batches: shuffler.BatchesState
    cut: cut.CutState
    shoe: shoe.ShoeState
    round: round.RoundsState
    reader: reader.ReaderState
    wild: wild.WildState
    alarms: alarms.AlarmsState
    devices: devices.DevicesState
    asks: AskState  # the answers journalled, for the ask ids (controller/table/asking.py): not a machine


@event("table_opened")
@dataclass(slots=True)
class TableOpened(Event):
    """The first record of a journal: read by the recorder before the replay starts."""

    table: str
    options: dict[str, Any]


@event("action_taken")
@dataclass(slots=True)
class ActionTaken(Event):
    """Who (signed in) took the action whose events follow in the same step: a record for the
    people who read the journal; it changes nothing at the table."""

    action: str
    who: str
    role: str
    reason: str | None = field(default=None, metadata=OMIT)  # a destructive action's, as given


@applies(TableOpened)
def _opened(t: Table, e: TableOpened) -> None:
    pass


@applies(ActionTaken)
def _taken(t: Table, e: ActionTaken) -> None:
    pass


# Each journal kind's decoder and transition, for replay.
_REPLAY = {kind: (DECODERS[kind], TRANSITIONS[cls]) for kind, cls in EVENT_TYPES.items()}


class Table:
    def __init__(self, options: GameOptions, table_id: str = "table", backs: tuple[str, str] = BACKS) -> None:
        options.validate()
        if backs[0] == backs[1]:
            raise RuleViolation(
                f"{options.spec.chapter}.3(b)(2)", "the two batches need different back colours"
            )
        self.options = options
        self.table_id = table_id
        self.spec = options.spec
        self.chapter = self.spec.chapter
        self.blackjack = self.spec.blackjack
        composition = Counter(str(c) for c in options.spec.batch(options.decks))
        self.state = TableState(
            batches=shuffler.BatchesState(
                {b: Batch(back=b, composition=Counter(composition)) for b in backs}
            ),
            cut=cut.CutState(),
            shoe=shoe.ShoeState(),
            round=round.RoundsState(),
            reader=reader.ReaderState(),
            wild=wild.WildState(),
            alarms=alarms.AlarmsState(),
            devices=devices.DevicesState(),
            asks=AskState(),
        )
        self.now = 0.0  # the time of the input being handled or the event being applied
        # The table file's gaming day (not journalled: a setting of the casino, like the clock).
        self.calendar = PENNSYLVANIA

    # ================================================================== routing
    def handle(self, inp: I.Input, now: float) -> Step:
        """Decide what ``inp`` means at ``now``; apply and return the events and commands."""
        handler = HANDLERS.get(type(inp))
        if handler is None:
            raise RuleViolation("input", f"{type(inp).__name__} is not an input of the table core")
        step = Step()
        self.now = now
        handler(self, inp, step)
        return step

    def emit(self, step: Step, e: Event) -> None:
        """Apply a decided event and add it to the step (to be journalled)."""
        TRANSITIONS[type(e)](self, e)
        answered(self, e.kind)
        step.events.append(DomainEvent(e.kind, e.payload(), self.now))

    def apply(self, recorded: DomainEvent) -> None:
        """The one state transition per event kind. Replay calls only this."""
        self.now = recorded.at
        # typed() and the registry in one lookup: replay runs this for every record.
        try:
            decode, transition = _REPLAY[recorded.kind]
            e = decode(**recorded.payload)
        except (KeyError, TypeError):
            typed(recorded)  # raises the one-line error that says what is wrong with the record
            raise
        transition(self, e)
        answered(self, recorded.kind)

    @classmethod
    def replay(cls, options: GameOptions, events: Iterable[DomainEvent], table_id: str = "table") -> Table:
        table = cls(options, table_id)
        for recorded in events:
            table.apply(recorded)
        return table

    # ================================================================== what the machines share
    def refuse(self, section: str, message: str) -> RuleViolation:
        return RuleViolation(section, message)

    def sec(self, rule: str) -> str:
        return section(self.spec, rule)

    def batch(self, back: str) -> Batch:
        found = self.state.batches.batches.get(back)
        if found is None:
            raise self.refuse(
                self.sec("3(b)(2)"), f"no batch has {back} backs at this table ({', '.join(self.batches)})"
            )
        return found

    def gaming_day(self) -> str:
        return reader.gaming_day(self.now, self.calendar)

    @property
    def manual(self) -> bool:
        """Shuffling by hand: no shuffling device configured, or it is marked out of order (673a.13(l))."""
        return self.state.batches.shuffler_out_of_order or not self.options.shuffling_device

    @property
    def two_batches(self) -> bool:
        """673a.3(b) governs a table whose automated shuffler stores one batch while the other is
        dealt: not a hand-shuffled table, not a self-shuffling shoe or continuous shuffler."""
        return not self.manual and not self.options.self_shuffling_shoe

    @property
    def cuts_at_shuffler(self) -> bool:
        """673a.5(a)-(e) at a batch shuffler: the dealer takes the shuffled stack out and it is
        cut before it goes in the shoe; not at a direct-insert shuffler (ruling G13) nor for DJ
        Wild, dealt from the hand (687a.9(a))."""
        return self.two_batches and self.blackjack and not self.options.direct_insert_shuffler

    @property
    def in_round(self) -> bool:
        return self.state.round.round is not None or self.state.wild.round is not None

    # ================================================================== views
    def fingerprint(self) -> Any:
        """Everything that decides what the table does next, for comparing a replay with the live
        table (secrets included: this never leaves the process). Derived from the state
        dataclasses field by field, so a field added to any machine is compared too."""
        return plain(self.state)

    def snapshot(self) -> dict[str, Any]:
        """The public state: what the ops view may show (no card identities). The fields each
        machine marks public (``machine.public``), and views of the state that hold no secret."""
        out = {
            key: value
            for part in fields(self.state)
            for key, value in public_fields(getattr(self.state, part.name))
        }
        back = self.shoe_back
        out |= {
            "in_round": self.in_round,
            "cards_in_shoe": self.batches[back].places[Place.SHOE] if back else 0,
            "batches": {
                b.back: {"location": self._public_location(b), "shuffler": b.shuffler.value}
                for b in self.batches.values()
            },
            "halted": [{"id": a.id, "section": a.section, "message": a.message} for a in self.halted],
            "alarms": [
                {"id": a.id, "section": a.section, "message": a.message, "floor_action": a.floor_action}
                | ({"action": a.action} if a.action is not None else {})
                for a in self.alarms.values()
                if a.acknowledged_by is None
            ],
            "asking": asking(self),  # what the dealer display shows next (controller/table/asking.py)
        }
        return out

    def _public_location(self, batch: Batch) -> str:
        """Where the table sees the batch. DJ Wild is dealt from the hand (687a.9(a)(2)): the
        deck the core holds as being dealt from (its shoe place) is in the dealer's hand."""
        if not self.blackjack and batch.location is Place.SHOE:
            return "hand"
        return batch.location.value

    # ================================================================== read-only names other packages use
    @property
    def batches(self) -> dict[str, Batch]:
        return self.state.batches.batches

    def batch_in(self, place: Place) -> list[str]:
        return self.state.batches.batch_in(place)

    @property
    def shuffler_out_of_order(self) -> bool:
        return self.state.batches.shuffler_out_of_order

    @property
    def cut(self) -> cut.CutProcedure | None:
        return self.state.cut.procedure

    @property
    def shoe_back(self) -> str | None:
        return self.state.shoe.back

    @property
    def last_shoe_back(self) -> str | None:
        return self.state.shoe.last_back

    @property
    def burns_due(self) -> int:
        return self.state.shoe.burns_due

    @property
    def cover_reached(self) -> bool:
        return self.state.shoe.cover_reached

    @property
    def reshuffle_due(self) -> bool:
        return self.state.shoe.reshuffle_due

    @property
    def round_no(self) -> int:
        return self.state.round.number

    @property
    def round(self) -> Round | None:
        return self.state.round.round

    @property
    def dealer_name(self) -> str | None:
        return self.state.round.dealer_name

    @property
    def wagering_seats(self) -> frozenset[int] | None:
        return self.state.round.wagering_seats

    @property
    def reader_failed(self) -> bool:
        return self.state.reader.failed

    @property
    def wild(self) -> wild.WildRound | None:
        return self.state.wild.round

    @property
    def alarms(self) -> dict[int, Alarm]:
        return self.state.alarms.alarms

    @property
    def halted(self) -> list[Alarm]:
        return self.state.alarms.halted

    @property
    def device_seen(self) -> dict[str, dict[str, int]]:
        return self.state.devices.seen

    @property
    def out_of_order(self) -> dict[str, str]:
        return self.state.devices.out_of_order

    @property
    def failed_devices(self) -> dict[str, int]:
        return self.state.devices.failed
