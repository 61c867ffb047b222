"""The table core's shape: every input has one machine that decides it, every journal kind one
typed event and one transition; the replay check and the public snapshot are derived from the
state, so a field added to a machine is compared on replay and stays private unless marked."""

from __future__ import annotations

import inspect
import json
import random
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from controller.game_config import default_options
from controller.games import blackjack_games
from controller.table import inputs as I
from controller.table.core import MACHINES, Table, TableState
from controller.table.events import CLASSIFICATION, EVENT_TYPES, DomainEvent
from controller.table.machine import HANDLERS, TRANSITIONS
from controller.table.virtual import VirtualTable
from tests.table.helpers import BJ, assert_journals, ready


def test_every_input_has_one_handler() -> None:
    inputs = {
        c for _, c in inspect.getmembers(I, inspect.isclass) if issubclass(c, I.Input) and c is not I.Input
    }
    assert inputs == set(HANDLERS)


def test_every_journal_kind_is_one_typed_event_with_one_transition() -> None:
    assert set(EVENT_TYPES) == set(CLASSIFICATION)
    assert set(TRANSITIONS) == set(EVENT_TYPES.values())
    assert all(cls.kind == kind for kind, cls in EVENT_TYPES.items())


def test_a_record_this_version_cannot_read_is_refused_in_one_line() -> None:
    table = Table(default_options(BJ))
    with pytest.raises(ValueError, match=r"^shoe_melted is not an event of the table core$"):
        table.apply(DomainEvent("shoe_melted", {}, 1.0))
    with pytest.raises(ValueError, match=r"^card_burned: the payload does not fit the event"):
        table.apply(DomainEvent("card_burned", {"card": "AS"}, 1.0))


@pytest.mark.parametrize("game", blackjack_games())
def test_a_day_journalled_as_json_replays_to_the_same_table(game: str) -> None:
    """The events written as the journal writes them (JSON) read back as the same typed events
    and replay to the live table exactly: the typed events kept the journal's format."""
    options = default_options(game)
    events: list[DomainEvent] = []
    vt = VirtualTable(options, random.Random(3), seats=4, on_step=lambda step: events.extend(step.events))
    vt.open_table()
    for _ in range(60):
        vt.play_round()
    for event in events:
        assert_journals(event)
    stored = [DomainEvent(e.kind, json.loads(json.dumps(e.payload)), e.at) for e in events]
    assert Table.replay(options, stored).fingerprint() == vt.table.fingerprint()


def test_the_replay_check_covers_every_field_of_every_machine() -> None:
    """``fingerprint`` walks the state dataclasses: each machine's every field is in it."""
    table = ready(BJ).table
    print_ = table.fingerprint()
    assert set(print_) == {f.name for f in fields(TableState)}
    for part in fields(TableState):
        assert set(print_[part.name]) == {f.name for f in fields(getattr(table.state, part.name))}


def test_a_change_to_any_field_is_seen_by_the_replay_check() -> None:
    table = ready(BJ).table
    before = table.fingerprint()
    table.state.shoe.burns_due += 1
    assert table.fingerprint() != before
    table.state.shoe.burns_due -= 1
    table.state.reader.inspected_day = "2027-01-01"
    assert table.fingerprint() != before


def test_the_snapshot_keeps_its_keys() -> None:
    """What the ops view and MQTT state carry (public fields marked in each machine, and views)."""
    assert set(ready(BJ).table.snapshot()) == {
        "round",
        "in_round",
        "batch_in_shoe",
        "cards_in_shoe",
        "cover_card_reached",
        "batches",
        "halted",
        "alarms",
        "shuffler_out_of_order",
        "reader_failed",
        "out_of_order",
        "reader_inspected_for",
        "asking",
    }


def test_the_import_contract_layers_the_machines_in_their_order() -> None:
    """pyproject.toml's ``table-machines`` contract (checked by lint-imports in bin/test) lists
    the machines in the order of MACHINES: each may import only those before it."""
    config = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "table-machines")
    machines = [m.__name__.rsplit(".", 1)[1] for m in MACHINES]
    assert contract["layers"][: len(machines) + 1] == ["core", *reversed(machines)]
