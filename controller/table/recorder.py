"""The table core with its journal: every step's events are in the journal before its commands
are carried out, and a table is rebuilt from its journal on start.

The first record of a journal is ``table_opened``: the table's id and game options, so a journal
can be replayed, verified and shown without the config it was written with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from controller.errors import ConfigError
from controller.game_config import GameOptions, options_from_dict, options_to_dict
from controller.journal import Classification, Journal, JournalError, Record
from controller.table import state_snapshot
from controller.table.core import Step, Table
from controller.table.events import DomainEvent
from controller.table.inputs import Input


def options_record(options: GameOptions, table_id: str) -> dict[str, Any]:
    return {"table": table_id, "options": options_to_dict(options)}


# Ruling keys as journals written before a rename carry them: read under the name of today.
_RENAMED_RULINGS = {"match_both_cards": "match_the_dealer_pays"}


def options_of(record: Record) -> tuple[GameOptions, str]:
    if record.kind != "table_opened":
        raise JournalError(f"record {record.seq}: a journal starts with table_opened, not {record.kind}")
    try:
        doc = dict(record.payload["options"])
        if isinstance(doc.get("rulings"), dict):
            doc["rulings"] = {_RENAMED_RULINGS.get(k, k): v for k, v in doc["rulings"].items()}
        return options_from_dict(doc, f"journal record {record.seq}"), str(record.payload["table"])
    except (KeyError, TypeError, ConfigError) as e:
        raise JournalError(f"record {record.seq}: the table's options cannot be read: {e}") from None


# The payload key under which a step's record carries the device counters read up to it. A
# separate ``device_seen`` record per step doubled a gaming day's records (every card drawn is a
# step with counters), and with them the day's journalling time and a restart's replay; folded
# into the record of the event they caused, the counters cost a few bytes, in the same
# transaction as before. A ``device_seen`` record of its own is still written when an event
# caused nothing at the table, and journals written before the fold replay as they are.
SEEN_KEY: Final = "device_seen"

Row = tuple[str, dict[str, Any], Classification | str, float]  # one record for append_many

# At most about this many records between two ``state_snapshot`` records (one is taken at the first
# step after it that leaves no round in play): a restart replays the latest snapshot and what
# follows it, not the whole day (issue 16, restart under 2 s). A day is ~50,000 records; a
# snapshot is ~3 KB and costs no fsync of its own (it rides in its step's transaction).
SNAPSHOT_EVERY: Final = 2_000


def domain_events(records: Iterable[Record]) -> Iterator[DomainEvent]:
    """The journal's records as the core's events. Counters (``device_seen`` records, and
    ``SEEN_KEY`` in the payload of a step's record) are only ever overwritten (the core keeps the
    last value of each), so they are gathered and applied once per device at the end, at the last
    record's time, rather than one event per step: a day's 45,000 of them made a restart's replay
    slower for nothing. A counter payload of the wrong shape is handed to the core as it is, whose
    decoding says what is wrong with it."""
    seen: dict[str, dict[str, Any]] = {}
    at = 0.0
    for r in records:
        payload, at = r.payload, r.at
        if r.kind == state_snapshot.KIND:  # the fold of what came before it: nothing to apply
            continue
        if r.kind == "device_seen" and _gather(seen, payload):
            continue
        if SEEN_KEY in payload and r.kind != "device_seen":
            payload = dict(payload)
            counters = payload.pop(SEEN_KEY)
            if not _gather(seen, counters):
                yield DomainEvent(r.kind, payload, r.at)
                yield DomainEvent("device_seen", counters, r.at)
                continue
        yield DomainEvent(r.kind, payload, r.at)
    for device, counters in seen.items():
        yield DomainEvent("device_seen", {"device": device, "counters": counters}, at)


def _gather(seen: dict[str, dict[str, Any]], payload: Any) -> bool:
    """Add a ``device_seen`` payload's counters to ``seen``; False when it is not one."""
    # Without building a key set per record: replay comes through here for most of a day's records.
    if not isinstance(payload, dict) or len(payload) != 2:
        return False
    device, counters = payload.get("device"), payload.get("counters")
    if not isinstance(device, str) or not isinstance(counters, dict):
        return False
    seen.setdefault(device, {}).update(counters)
    return True


def fold(journal: Journal, options: GameOptions, table_id: str) -> tuple[Table, int]:
    """The table the journal's records make, and how many records follow its latest snapshot.

    From the latest ``state_snapshot`` record when there is one (the fold of every record before it),
    then the records after it; else from the first record. A snapshot that cannot be read is
    passed over for the full fold: snapshots only save time, the records are the table's truth.
    The tests hold the two ways equal (tests/table/test_state_snapshot.py)."""
    at = journal.last_seq_of(state_snapshot.KIND)
    if at is not None:
        records = journal.records(after_seq=at - 1)
        taken = next(records, None)
        if taken is not None and taken.seq == at:
            try:
                table = state_snapshot.restore(options, table_id, taken.payload)
            except state_snapshot.SnapshotError:
                pass
            else:
                table.now = taken.at
                for event in domain_events(records):
                    table.apply(event)
                return table, journal.last_seq - at
    records = journal.records()
    next(records, None)  # table_opened, read by the caller
    return Table.replay(options, domain_events(records), table_id), journal.last_seq


@dataclass(frozen=True, slots=True)
class Seen:
    """A device counter's value the controller has acted on (the shoe's draw counter, the keypad's
    key counter, ...). Journalled as ``device_seen`` in the same transaction as what the device
    event caused, so after a kill -9 the journal says exactly where to read the device from."""

    device: str
    counters: tuple[tuple[str, int], ...]

    def event(self, now: float) -> DomainEvent:
        return DomainEvent("device_seen", {"device": self.device, "counters": dict(self.counters)}, now)

    def known(self, table: Table) -> bool:
        """The journal already holds these values (nothing to add)."""
        have = table.device_seen.get(self.device, {})
        return all(have.get(k) == v for k, v in self.counters)


class JournaledTable:
    """A Table whose every step is journalled (append_many: one transaction a step)."""

    def __init__(
        self, table: Table, journal: Journal, *, snapshot_every: int = SNAPSHOT_EVERY, since_snapshot: int = 0
    ) -> None:
        self.table = table
        self.journal = journal
        self.snapshot_every = snapshot_every
        self.since_snapshot = since_snapshot  # records appended after the latest snapshot
        # A failed commit rebuilds the table from the file; while that rebuild has not succeeded
        # (a journal that cannot be read either), the table in memory holds the step that failed
        # and is rebuilt before anything is decided on it.
        self._stale = False

    @classmethod
    def open(
        cls,
        path: str | Path,
        options: GameOptions,
        table_id: str = "table",
        *,
        snapshot_every: int = SNAPSHOT_EVERY,
        now: float,
    ) -> JournaledTable:
        """Open (or create) the journal at ``path`` and rebuild the table from it; a new journal's
        ``table_opened`` record is dated ``now`` (the table's clock, like every other record)."""
        journal = Journal.open(path)
        records = journal.records()
        first = next(records, None)
        if first is None:
            journal.append("table_opened", options_record(options, table_id), "public", now)
            return cls(Table(options, table_id), journal, snapshot_every=snapshot_every)
        stored, stored_id = options_of(first)
        if stored != options or stored_id != table_id:
            journal.close()
            raise JournalError(
                f"{path}: the journal belongs to table {stored_id} ({stored.game.value}, "
                f"{stored.decks} decks); the config says {table_id} ({options.game.value}, {options.decks})"
            )
        table, since = fold(journal, stored, stored_id)
        return cls(table, journal, snapshot_every=snapshot_every, since_snapshot=since)

    def handle(
        self, inp: Input, now: float, seen: Seen | None = None, taken_by: dict[str, str] | None = None
    ) -> Step:
        """The core's step, journalled in one transaction with ``seen`` (the device's counters,
        when given) and ``taken_by`` (``action``, ``who``, ``role``: a person's action, as an
        ``action_taken`` record before the events it led to)."""
        step, rows, marks = self._decide(inp, now, seen, taken_by)
        if rows:
            try:
                self.journal.append_many(rows)
            except Exception:
                self._after(False, marks, rows)
                raise
            self._after(True, marks, rows)
        return step

    async def handle_async(
        self, inp: Input, now: float, writer: Executor, seen: Seen | None = None,
        taken_by: dict[str, str] | None = None, lead: tuple[DomainEvent, ...] = (),
    ) -> Step:  # fmt: skip
        """``handle`` with the commit (and its fsync) on ``writer``, the journal's own thread: the
        core decides here, the event loop goes on with the other devices while the disk flushes,
        and the step is on disk when this returns, so its effects still come after it.

        ``lead``: what a device did before the table decided (the bet sensors locked at Start
        Game, controller/table/sensors.py), journalled first in the same transaction, whatever
        the step decides: a kill before the commit leaves neither, never one without the other."""
        step, rows, marks = self._decide(inp, now, seen, taken_by)
        if lead:
            led: list[Row] = [(e.kind, e.payload, e.classification, e.at) for e in lead]
            if marks and not step.events:  # the counters' own record: they ride in the lead's
                kind, payload, classification, at = led[-1]
                led[-1] = (kind, {**payload, SEEN_KEY: marks[0].payload}, classification, at)
                rows = rows[1:]
            rows = [*led, *rows]
        await self._write(rows, [*marks, *lead], writer)
        return step

    def mark(self, seen: Seen, now: float) -> None:
        """``seen`` alone: a device event that changed nothing at the table was still acted on."""
        if seen.known(self.table):
            return
        event = seen.event(now)
        self.journal.append(event.kind, event.payload, event.classification.value, now)
        self.table.apply(event)
        self.since_snapshot += 1

    async def mark_async(self, seen: Seen, now: float, writer: Executor) -> None:
        """``mark`` with the commit on ``writer`` (see ``handle_async``)."""
        if seen.known(self.table):
            return
        event = seen.event(now)
        await self._write([(event.kind, event.payload, event.classification, now)], [event], writer)

    def _decide(
        self, inp: Input, now: float, seen: Seen | None, taken_by: dict[str, str] | None
    ) -> tuple[Step, list[Row], list[DomainEvent]]:
        if self._stale:
            self._rebuild()
        step = self.table.handle(inp, now)
        marks = [] if seen is None or seen.known(self.table) else [seen.event(now)]
        events = list(step.events)
        if events and taken_by is not None:
            events = [DomainEvent("action_taken", dict(taken_by), now), *events]
        rows: list[Row] = [(e.kind, e.payload, e.classification, e.at) for e in events]
        if rows and marks:  # the counters ride in the step's last record (see SEEN_KEY)
            kind, payload, classification, at = rows[-1]
            rows[-1] = (kind, {**payload, SEEN_KEY: marks[0].payload}, classification, at)
        elif marks:
            rows = [(m.kind, m.payload, m.classification, m.at) for m in marks]
        if rows and self.since_snapshot + len(rows) >= self.snapshot_every and not self.table.in_round:
            rows.append(self._snapshot_row(marks, now))
        return step, rows, marks

    def _snapshot_row(self, marks: list[DomainEvent], now: float) -> Row:
        """The table after this step's records, as the step's last record. The step's events are
        applied already; its counters (``marks``) only once committed, so the snapshot is taken
        with them merged in as ``devices.seen`` merges them, on a copy."""
        seen = {device: dict(counters) for device, counters in self.table.device_seen.items()}
        for mark in marks:
            seen.setdefault(mark.payload["device"], {}).update(mark.payload["counters"])
        payload = state_snapshot.take(self.table, seen)
        # Secret: the state holds the card held back from the shoe and which cards are out
        # (673a.13(b)); telemetry sends a secret record as its seq and kind, withheld, nothing more.
        return (state_snapshot.KIND, payload, Classification.SECRET, now)

    async def _write(self, rows: list[Row], marks: list[DomainEvent], writer: Executor) -> None:
        if not rows:
            return
        done = asyncio.get_running_loop().run_in_executor(writer, self.journal.append_many, rows)
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            # The commit goes on in its thread whatever happens here: the table follows its outcome.
            await asyncio.wait([done])
            self._after(done.exception() is None, marks, rows)
            raise
        except Exception:
            self._after(False, marks, rows)
            raise
        self._after(True, marks, rows)

    def _after(self, committed: bool, marks: list[DomainEvent], rows: list[Row]) -> None:
        if committed:
            for mark in marks:
                self.table.apply(mark)
            if rows[-1][0] == state_snapshot.KIND:
                self.since_snapshot = 0
            else:
                self.since_snapshot += len(rows)
        else:
            # Not journalled, so it did not happen: rebuild the table from what is.
            self._stale = True
            self._rebuild()

    def _rebuild(self) -> None:
        calendar = self.table.calendar  # the site's gaming day, which the journal does not hold
        self.table, self.since_snapshot = self._replayed()
        self.table.calendar = calendar
        self._stale = False

    def _replayed(self) -> tuple[Table, int]:
        options, table_id = options_of(next(self.journal.records()))
        return fold(self.journal, options, table_id)

    def close(self) -> None:
        self.journal.close()
