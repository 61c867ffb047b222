"""Shared builders for the telemetry tests: a journal with records of every classification, a
Telemetry for a table of the test broker, and checks on the received event stream."""

from __future__ import annotations

import pathlib
from typing import Any

from controller.backoff import BackoffPolicy
from controller.game_config import default_options
from controller.journal import Classification, Journal
from controller.table.core import Table
from controller.telemetry import CommandHandler, TableIdentity, Telemetry
from controller.telemetry.config import versions
from tests.telemetry.conftest import Broker, Received

T0 = 1_800_000_000.0


def append_records(journal: Journal, count: int, start_at: float = T0) -> int:
    """``count`` records cycling public / secret / until-revealed; returns the last seq."""
    last = 0
    for i in range(count):
        at = start_at + i
        if i % 5 == 3:
            rec = journal.append("card_burned", {"card": "QH", "back": "red"}, Classification.SECRET, at)
        elif i % 5 == 4:
            rec = journal.append("hole_card_dealt", {"hole": "AS"}, Classification.UNTIL_REVEALED, at)
        else:
            rec = journal.append("round_started", {"round": i, "boxes": [1, 2]}, Classification.PUBLIC, at)
        last = rec.seq
    return last


def telemetry_for(
    broker: Broker,
    journal_path: pathlib.Path,
    user: str = "site-a/t1",
    *,
    command: CommandHandler | None = None,
) -> Telemetry:
    site, table = user.split("/")
    identity = TableIdentity(site, table, "double-attack", "sha256:test", versions())
    return Telemetry(
        broker.settings(user, keepalive=3),
        identity,
        journal_path,
        command=command,
        backoff=BackoffPolicy(initial_s=0.05, max_s=0.5),
        poll_s=0.5,
    )


def seqs(messages: list[Received]) -> list[int]:
    return [int(m.json()["seq"]) for m in messages if m.topic.endswith("/events")]


def assert_complete_in_order(received: list[int], last: int) -> None:
    """Every seq 1..last arrived; each new one is the next (QoS 1 may repeat a few after a reconnect)."""
    highest = 0
    for seq in received:
        if seq <= highest:
            continue  # a repeat: QoS 1 after a reconnect, dropped by seq as a monitor does
        assert seq == highest + 1, f"gap: {highest + 1}..{seq - 1} missing"
        highest = seq
    assert highest == last


def snapshot_with_alarms() -> dict[str, Any]:
    """A real Table's snapshot with one halting and one advisory alarm added as the core shapes them."""
    snap = Table(default_options("double-attack")).snapshot()
    halt = {
        "id": 2,
        "section": "665a.13(i)",
        "message": "the card reader failed",
        "floor_action": "replace the reader",
    }
    warn = {"id": 1, "section": "665a.3(c)", "message": "decks expire soon", "floor_action": "open new decks"}
    snap["alarms"] = [warn, {**halt}]
    snap["halted"] = [{k: halt[k] for k in ("id", "section", "message")}]
    return snap
