"""The archive's own alarms about a table's chain, as kept in ``chain_alarms`` and published on
``tablectl/<site>/archive/alarms``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.telemetry.topics import ARCHIVE_LEVEL, ROOT

KINDS = ("fork", "gap", "changed_hash", "bad_hash", "refused", "unknown_table")


@dataclass(frozen=True, slots=True)
class ChainAlarm:
    site: str
    table_id: str
    seq: int
    kind: str  # one of KINDS
    detail: str  # one line; names records, never a payload
    journal: str = ""  # the journal the record is of (its first record's hash), '' when unsaid

    @property
    def topic(self) -> str:
        return f"{ROOT}/{self.site}/{ARCHIVE_LEVEL}/alarms"

    def message(self) -> dict[str, Any]:
        return {
            "version": 1,
            "schema_version": 1,  # docs/mqtt.md, "Schemas": archive.json
            "site": self.site,
            "table": self.table_id,
            "seq": self.seq,
            "alarm": self.kind,
            "detail": self.detail,
            **({"journal": self.journal} if self.journal else {}),
        }


def copy_of(hash_: str | None, kind: str, received_at: datetime, received_by: str | None) -> str:
    """One copy of a record as an alarm names it: never its payload."""
    what = f"hash {hash_[:12]}" if hash_ else f"withheld {kind}"
    when = received_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{what} received {when} by {received_by or 'an earlier worker'}"


def changed(site: str, table_id: str, seq: int, first: str, second: str, journal: str = "") -> ChainAlarm:
    detail = (
        f"record {seq} came again with another hash, kind or classification than archived: "
        f"archived {first}; also {second}; both kept in quarantine"
    )
    return ChainAlarm(site, table_id, seq, "changed_hash", detail, journal)


def bad_hash(site: str, table_id: str, seq: int) -> ChainAlarm:
    detail = f"record {seq}: published hash is not that of its contents; not archived"
    return ChainAlarm(site, table_id, seq, "bad_hash", detail)


def refused(site: str, table_id: str, seq: int, reason: str) -> ChainAlarm:
    return ChainAlarm(site, table_id, seq, "refused", f"record {seq}: {reason}; not archived")


def unreadable(site: str, table_id: str, seq: int, text: str) -> ChainAlarm:
    """A message on a table's events topic that is not a record (not JSON, nested, cut short):
    ``text`` is the parser's one line, which names the rule and never quotes the body."""
    return ChainAlarm(site, table_id, seq, "refused", f"unreadable events message: {text}; not archived")


def unknown_table(site: str, table_id: str, seq: int) -> ChainAlarm:
    detail = f"events from {site}/{table_id}, which is not a registered table; not archived"
    return ChainAlarm(site, table_id, seq, "unknown_table", detail)


def fork_on_arrival(site: str, table_id: str, seq: int, copy: str, journal: str = "") -> ChainAlarm:
    detail = (
        f"record {seq}: its prev_hash is not the archived hash of record {seq - 1} ({copy}); "
        "kept in quarantine, not archived"
    )
    return ChainAlarm(site, table_id, seq, "fork", detail, journal)


def fork(site: str, table_id: str, seq: int, journal: str = "") -> ChainAlarm:
    detail = f"record {seq}: its prev_hash is not the archived hash of record {seq - 1}"
    return ChainAlarm(site, table_id, seq, "fork", detail, journal)


def gap(
    site: str, table_id: str, first: int, last: int, *, in_journal: bool, journal: str = ""
) -> ChainAlarm:
    """A gap the table could not fill: ``in_journal`` False when it said it does not hold the
    records, True while it is still asked for them and has not sent them (nor answered)."""
    span = f"record {first}" if first == last else f"records {first}-{last}"
    if in_journal:
        asking = f"{span} never arrived; still asking the table to republish"
        return ChainAlarm(site, table_id, first, "gap", asking, journal)
    return ChainAlarm(
        site, table_id, first, "gap", f"{span} never arrived and not in the table's journal", journal
    )
