"""The JSON payloads telemetry publishes. Every one carries ``"version": PAYLOAD_VERSION``.

The redaction rule lives here and only here (``event_message``): a record that is not public
goes out as ``{seq, kind, classification, withheld: true}`` and nothing else, so the stream's
sequence numbers stay contiguous and a monitor can tell a withheld record from a lost one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from controller.gaming_day import GamingDay
from controller.journal import Classification, Record
from controller.table.events import SECRET_FIELDS

PAYLOAD_VERSION = 1
# The version of the published schemas (controller/telemetry/contract.py, docs/mqtt.md "Schemas"):
# raised only by a change that is not an addition.
SCHEMA_VERSION = 1


def encode(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def journal_mark(last_seq: int, published_seq: int, journal_id: str | None) -> dict[str, Any]:
    """Where the journal stands, as the birth and the heartbeat say it: an archive compares what
    it holds of this journal (``id``) with ``published_seq`` and asks for what it never got."""
    mark: dict[str, Any] = {"last_seq": last_seq, "published_seq": published_seq}
    if journal_id is not None:
        mark["id"] = journal_id
    return mark


def birth(
    identity: Mapping[str, Any],
    birth_id: str,
    last_seq: int,
    published_seq: int,
    incarnation: str,
    journal_id: str | None = None,
) -> dict[str, Any]:
    """The retained ``status`` of a connection that just came up (Sparkplug's birth, in our JSON).

    ``incarnation``, on every retained message: the process that published it (new at each start
    of ``tablectl run``; ``birth`` is new at each connection of it). A client acts on a retained
    state, alarms or device message only when its incarnation is the current status's: else it is
    what an earlier process left on the broker."""
    return {
        "version": PAYLOAD_VERSION,
        "schema_version": SCHEMA_VERSION,
        "incarnation": incarnation,
        "online": True,
        "birth": birth_id,
        **identity,
        "journal": journal_mark(last_seq, published_seq, journal_id),
    }


def heartbeat(
    identity: Mapping[str, Any], last_seq: int, published_seq: int, incarnation: str, journal_id: str | None
) -> dict[str, Any]:
    """``heartbeat`` (not retained, QoS 0), every few seconds while connected: a table that has gone
    quiet still says how far its journal goes, so a record lost on the way is seen without waiting
    for the table's next one."""
    return {
        "version": PAYLOAD_VERSION,
        "schema_version": SCHEMA_VERSION,
        "incarnation": incarnation,
        "site": identity.get("site"),
        "table": identity.get("table"),
        "journal": journal_mark(last_seq, published_seq, journal_id),
    }


def death(identity: Mapping[str, Any], birth_id: str, incarnation: str, *, clean: bool) -> dict[str, Any]:
    """The retained ``status`` when a connection ends: the Last Will (clean=False) or a shutdown."""
    return {
        "version": PAYLOAD_VERSION,
        "schema_version": SCHEMA_VERSION,
        "incarnation": incarnation,
        "online": False,
        "clean": clean,
        "birth": birth_id,
        "site": identity.get("site"),
        "table": identity.get("table"),
    }


def state(
    snapshot: Mapping[str, Any], devices: Mapping[str, str], game: str, incarnation: str, published_seq: int
) -> dict[str, Any]:
    """The retained ``state``: Table.snapshot() as given (it is the core's public view), plus device
    health, and the last seq published on ``events`` so far: a monitor that subscribes after the
    birth knows how far the journal has gone before the next event (docs/mqtt.md, "state").

    ``snapshot["cards_in_shoe"]`` is a count, not the cards: the one SECRET_FIELDS name that the
    public snapshot uses for a number.
    """
    return {
        "version": PAYLOAD_VERSION,
        "schema_version": SCHEMA_VERSION,
        "incarnation": incarnation,
        "game": game,
        "snapshot": dict(snapshot),
        "devices": dict(devices),
        "journal": {"published_seq": published_seq},
    }


def alarms(snapshot: Mapping[str, Any], incarnation: str) -> dict[str, Any]:
    """The retained ``alarms``: unacknowledged alarms, halting ones first, each with the floor's action."""
    halting = {a.get("id") for a in snapshot.get("halted", ()) if isinstance(a, Mapping)}
    active = [
        {
            "id": a.get("id"),
            "section": a.get("section"),
            "message": a.get("message"),
            "floor_action": a.get("floor_action"),
            "halts_dealing": a.get("id") in halting,
        }
        | ({"action": a["action"]} if a.get("action") is not None else {})
        for a in snapshot.get("alarms", ())
        if isinstance(a, Mapping)
    ]
    active.sort(key=lambda a: (not a["halts_dealing"], a["id"] if isinstance(a["id"], int) else 0))
    return {
        "version": PAYLOAD_VERSION,
        "schema_version": SCHEMA_VERSION,
        "incarnation": incarnation,
        "count": len(active),
        "alarms": active,
    }


def device(name: str, health: str, incarnation: str) -> dict[str, Any]:
    return {
        "version": PAYLOAD_VERSION,
        "schema_version": SCHEMA_VERSION,
        "incarnation": incarnation,
        "device": name,
        "health": health,
    }


def event_message(
    record: Record, gaming_day: GamingDay, *, prev_public: bool = False, journal_id: str | None = None
) -> dict[str, Any]:
    """One journal record on ``events``: public ones whole, any other as a numbered placeholder.

    The hash goes out only with a public record: a withheld record's hash covers its payload,
    and a payload as small as one burned card could be found by trying all 52. For the same reason
    a record carries its ``prev_hash`` only when the record before it is public too
    (``prev_public``, or the first record, chained to the genesis hash): otherwise the link would
    give away the withheld record's hash. With it, an archive recomputes a public record's hash
    and checks the link to the record before (docs/journal.md, "The archive"); a placeholder's
    link is how the archive settles a contested public record just before it.

    Every message, a placeholder too, says when the record was written (``at``, the table's UTC
    instant: when something happened at the table is public there) and which gaming day that is
    in the casino's time (``day``, with the ``tz`` it was counted in), so an archive counts each
    record in the day it belongs to, not the day it arrived.

    ``journal`` names the journal (the hash of its first record, which is public: the
    ``table_opened`` record): every gaming day starts on a fresh journal whose seq starts at 1
    again, so an archive keys a record by journal and seq.
    """
    when: dict[str, Any] = {"day": gaming_day.day_of(record.at).isoformat(), "tz": gaming_day.time_zone}
    if journal_id is not None:
        when["journal"] = journal_id
    if record.classification is Classification.PUBLIC:
        message: dict[str, Any] = {
            "version": PAYLOAD_VERSION,
            "schema_version": SCHEMA_VERSION,
            "seq": record.seq,
            "at": record.at,
            "kind": record.kind,
            "classification": record.classification.value,
            "payload": record.payload,
            "hash": record.hash,
            **when,
        }
        if prev_public or record.seq == 1:
            message["prev_hash"] = record.prev_hash
        return message
    placeholder: dict[str, Any] = {
        "version": PAYLOAD_VERSION,
        "schema_version": SCHEMA_VERSION,
        "seq": record.seq,
        "kind": record.kind,
        "classification": record.classification.value,
        "withheld": True,
        "at": record.at,
        **when,
    }
    if prev_public:
        # The link to a public record names a hash published with that record anyway, and lets
        # an archive tell which of two copies of that record the table's chain goes on from.
        placeholder["prev_hash"] = record.prev_hash
    return placeholder


# What a command result may carry back from the supervisor, as plain scalars; anything else it
# returns (a list of events, a snapshot) stays in: the result topic is no side door for payloads.
_RESULT_KEYS = (
    "ok",
    "error",
    "section",
    "message",
    "seq",
    "republished",
    "missing_from",
    "missing_to",
    "journal",
)


def command_result(
    name: str, request_id: str | None, who: str | None, result: Mapping[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": PAYLOAD_VERSION,
        "schema_version": SCHEMA_VERSION,
        "command": name,
        "id": request_id,
        "who": who,
    }
    for key in _RESULT_KEYS:
        value = result.get(key)
        scalar = value is None or isinstance(value, str | int | bool)
        if key in result and key not in SECRET_FIELDS and scalar:
            out[key] = value
    out["ok"] = bool(result.get("ok", False))
    return out
