"""One ``events`` message as the archive stores it, from a topic and a body nobody vouched for.

The body is the table's (controller/telemetry/payloads.py: event_message): a public record whole
with its hash, or a numbered placeholder. Anything else is refused with one line naming the
rule, never quoting the body; a message the archive cannot read is logged and acknowledged, since
the broker would only hand it back for ever.
"""

from __future__ import annotations

import json
import json.encoder
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from json.encoder import encode_basestring
from typing import Any

import orjson

from controller.archive.kinds import refusal
from controller.gaming_day import zone
from controller.ids import EVENT_KIND, matches
from controller.journal import Classification, canonical_json, record_hash
from controller.telemetry.topics import ParsedTopic, parse_topic

MAX_BODY = 64 * 1024  # a journal record is a few hundred bytes; a bigger body is not one of ours
_HASH = re.compile(r"[0-9a-f]{64}\Z")
_CLASSES = frozenset(c.value for c in Classification)
_PLACEHOLDER_KEYS = frozenset(
    {
        "version",
        "schema_version",
        "seq",
        "kind",
        "classification",
        "withheld",
        "at",
        "day",
        "tz",
        "journal",
        "prev_hash",
    }
)
# How far a table's gaming day may lie from the UTC date of the instant it dates: a zone's offset
# (-12 to +14 hours) and a day that starts late in the evening move it at most two days.
_DAY_SLACK = timedelta(days=2)
# A run of 19 digits may be an integer beyond 64 bits, which orjson would read as a float; found
# by mapping every digit to 9 (a C loop: a regular expression's search cost five times more).
_DIGITS_AS_NINES = bytes.maketrans(b"0123456789", b"9" * 10)
_LONG_DIGITS = b"9" * 19
# What a worker has checked once and sees again in every message of a table: topics, journal
# ids, kinds, gaming days. Each a bounded memory of values that passed; a failure is never kept.
_REMEMBERED = 10_000
_topics: dict[str, ParsedTopic | None] = {}
_journals: set[str] = set()
_kinds: set[str] = set()
_days: dict[tuple[str, str], date] = {}


def _remembered(memory: set[str] | dict[Any, Any]) -> None:
    if len(memory) >= _REMEMBERED:
        memory.clear()


def _c_canonical() -> Any:
    make = getattr(json.encoder, "c_make_encoder", None)  # the C accelerator, when built
    if make is None:
        return None
    # json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # makes this same encoder on every call; made once here, without the markers of circular
    # references (a payload read from JSON has none).
    return make(None, _no_default, encode_basestring, None, ":", ",", True, False, False)


def _no_default(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_C_CANONICAL = _c_canonical()


def canonical_payload(payload: dict[str, Any]) -> str:
    """``canonical_json(payload)`` (the text the record's hash covers), by the standard library's
    own C encoder made once instead of on every call: half the time, the same text
    (tests/archive/test_loads.py)."""
    if _C_CANONICAL is None:
        return canonical_json(payload)
    return "".join(_C_CANONICAL(payload, 0))


def loads(body: bytes) -> Any:
    """``json.loads(body)``, by orjson where it reads the same: orjson takes only strict UTF-8 JSON
    (no byte order mark, NaN, lone surrogate or number beyond a double: it refuses those, and then
    json.loads reads the body as before) and reads an integer beyond 64 bits as a float, so a body
    with a run of 19 digits anywhere goes to json.loads at once. The records' hashes are computed
    over what this returns, so it must be json.loads's value exactly (tests/archive/test_loads.py)."""
    if _LONG_DIGITS not in body.translate(_DIGITS_AS_NINES):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


class Unreadable(ValueError):
    """The message is not an events message of ours; the text is one line, never the body.

    ``site`` and ``table_id`` are set when the topic is a table's events topic (the refusal is then
    an alarm about that table, ``seq`` the record it claimed to be, 0 when it named none)."""

    site: str | None = None
    table_id: str | None = None
    seq: int = 0


class Refused(Unreadable):
    """A readable record the archive will not keep: not one a table writes (``refused``: its kind,
    classification or payload shape) or one whose published hash is not that of its contents
    (``bad_hash``). Raised as an alarm naming the table and seq."""

    site: str
    table_id: str

    def __init__(self, site: str, table_id: str, seq: int, alarm: str, reason: str) -> None:
        super().__init__(f"{site}/{table_id} seq {seq}: {reason}")
        self.refused_seq, self.alarm, self.reason = seq, alarm, reason
        self.site, self.table_id, self.seq = site, table_id, seq


@dataclass(frozen=True, slots=True)
class ArchivedEvent:
    site: str
    table_id: str
    seq: int
    day: date  # the table's gaming day (its casino's time), else the UTC date of at
    at: float | None
    tz: str | None  # the IANA zone the table counted its gaming day in
    kind: str
    classification: str
    withheld: bool
    payload_json: str | None  # canonical JSON, as the journal hashed it
    hash: str | None
    prev_hash: str | None
    received: datetime  # when this worker took it off the broker
    # Which journal (the hash of its first record): every gaming day starts on a fresh journal
    # whose seq starts at 1 again. '' from a table that does not say (one journal, as before).
    journal: str = ""

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.site, self.table_id, self.journal, self.seq)

    def hash_holds(self) -> bool | None:
        """Whether the published hash is that of the published contents; None when it cannot be told
        (a withheld record, or a public one whose prev_hash was not published)."""
        if self.withheld or self.prev_hash is None or self.at is None or self.payload_json is None:
            return None
        computed = record_hash(
            self.seq, self.at, self.kind, self.classification, self.payload_json, self.prev_hash
        )
        return computed == self.hash

    def same_record(self, other: ArchivedEvent) -> bool:
        """The same record again: a public one by its hash (which covers its link); a placeholder,
        which has none, by its link too (a placeholder linked elsewhere is another chain's)."""
        return (self.hash, self.kind, self.classification, self.withheld, self.link) == (
            other.hash,
            other.kind,
            other.classification,
            other.withheld,
            other.link,
        )

    @property
    def link(self) -> str | None:
        """The link that tells two copies apart beyond their hash: a placeholder's prev_hash."""
        return self.prev_hash if self.withheld else None


def parse_event(topic: str, body: bytes, received: datetime) -> ArchivedEvent:
    try:
        parsed = _topics[topic]
    except KeyError:
        _remembered(_topics)
        parsed = _topics[topic] = parse_topic(topic)
    if parsed is None or parsed.leaf != "events":
        raise Unreadable(f"{topic[:200]}: not a tablectl/<site>/<table>/events topic")
    try:
        return _parse_body(parsed, body, received)
    except Unreadable as e:
        # Whatever came on a table's own topic is about that table: its alarm names it.
        e.site, e.table_id = parsed.site, parsed.table
        e.seq = e.refused_seq if isinstance(e, Refused) else _claimed_seq(body)
        raise


def _claimed_seq(body: bytes) -> int:
    """The seq an unreadable message claimed, for its alarm; 0 when it names none."""
    if len(body) > MAX_BODY:
        return 0
    try:
        seq = loads(body).get("seq")
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        return 0
    return seq if type(seq) is int and 1 <= seq < 2**62 else 0


def _parse_body(parsed: ParsedTopic, body: bytes, received: datetime) -> ArchivedEvent:
    where = f"{parsed.site}/{parsed.table}"
    if len(body) > MAX_BODY:
        raise Unreadable(f"{where}: events message of {len(body)} bytes (at most {MAX_BODY})")
    try:
        doc = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Unreadable(f"{where}: events message is not JSON") from None
    if not isinstance(doc, dict):
        raise Unreadable(f"{where}: events message is not a JSON object")
    if doc.get("version") != 1:
        raise Unreadable(f"{where}: events message version is not 1")
    seq = doc.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq < 2**62:
        raise Unreadable(f"{where}: seq must be a whole number from 1")
    kind, classification = doc.get("kind"), doc.get("classification")
    if not isinstance(kind, str) or (kind not in _kinds and not matches(EVENT_KIND, kind)):
        raise Unreadable(f"{where} seq {seq}: kind is not a journal kind")
    if kind not in _kinds:
        _remembered(_kinds)
        _kinds.add(kind)
    if classification not in _CLASSES:
        raise Unreadable(f"{where} seq {seq}: classification is not one of {', '.join(sorted(_CLASSES))}")
    journal = doc.get("journal", "")
    if journal != "" and journal not in _journals:
        if not isinstance(journal, str) or not _HASH.match(journal):
            raise Unreadable(f"{where} seq {seq}: journal is not 64 lowercase hex digits")
        _remembered(_journals)
        _journals.add(journal)
    if classification != Classification.PUBLIC.value:
        # Stored as published: the placeholder only; its hash never left the table.
        if doc.get("withheld") is not True or set(doc) - _PLACEHOLDER_KEYS:
            raise Unreadable(f"{where} seq {seq}: a withheld record must be a bare placeholder")
        why = refusal(kind, classification, None)
        if why is not None:
            raise Refused(parsed.site, parsed.table, seq, "refused", why)
        # A table from before the gaming day dated its placeholders by nothing: the day it arrived.
        at_w = _instant(doc["at"], where, seq) if "at" in doc else None
        # The link to a public record before it (that record's hash, published with it): the
        # chain sweep settles a contest of that record by it.
        prev_w = doc.get("prev_hash")
        if prev_w is not None and (not isinstance(prev_w, str) or not _HASH.match(prev_w)):
            raise Unreadable(f"{where} seq {seq}: prev_hash is not 64 lowercase hex digits")
        day, tz = _gaming_day(doc, at_w if at_w is not None else received.timestamp(), where, seq)
        return ArchivedEvent(
            parsed.site,
            parsed.table,
            seq,
            day,
            at_w,
            tz,
            kind,
            classification,
            True,
            None,
            None,
            prev_w,
            received,
            journal,
        )
    at_f, payload = _instant(doc.get("at"), where, seq), doc.get("payload")
    day, tz = _gaming_day(doc, at_f, where, seq)
    if not isinstance(payload, dict):
        raise Unreadable(f"{where} seq {seq}: payload is not a JSON object")
    hash_, prev = doc.get("hash"), doc.get("prev_hash")
    if not isinstance(hash_, str) or not _HASH.match(hash_):
        raise Unreadable(f"{where} seq {seq}: hash is not 64 lowercase hex digits")
    if prev is not None and (not isinstance(prev, str) or not _HASH.match(prev)):
        raise Unreadable(f"{where} seq {seq}: prev_hash is not 64 lowercase hex digits")
    payload_json = canonical_payload(payload)
    if "\\u0000" in payload_json:
        raise Unreadable(f"{where} seq {seq}: payload holds a NUL character (PostgreSQL's jsonb has none)")
    if not payload_json.isascii() and not _unicode(payload_json):
        # JSON may escape half of a surrogate pair alone; no text holds one (nor could a table's
        # journal hash it), and neither the hash nor the COPY could encode it.
        raise Unreadable(f"{where} seq {seq}: payload holds a lone surrogate (not Unicode text)")
    why = refusal(kind, classification, payload)
    if why is not None:
        raise Refused(parsed.site, parsed.table, seq, "refused", why)
    event = ArchivedEvent(
        parsed.site,
        parsed.table,
        seq,
        day,
        at_f,
        tz,
        kind,
        classification,
        False,
        payload_json,
        hash_,
        prev,
        received,
        journal,
    )
    if seq == 1 and journal and journal != hash_:
        # A journal is named by its first record's hash: a record 1 that is not that record is
        # not the first of the journal it names.
        raise Refused(parsed.site, parsed.table, seq, "refused", "journal is not the hash of record 1")
    if event.hash_holds() is False:
        # Not the chain's record whatever else it is: kept out, so that the table's own copy,
        # when it comes, is the one archived (a record with a made-up hash must not take its seq).
        raise Refused(
            parsed.site, parsed.table, seq, "bad_hash", "published hash is not that of its contents"
        )
    return event


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _instant(at: object, where: str, seq: int) -> float:
    if (
        isinstance(at, bool)
        or not isinstance(at, int | float)
        or not math.isfinite(at)
        or not 0 <= at < 2**35
    ):
        raise Unreadable(f"{where} seq {seq}: at is not seconds since the epoch")
    return float(at)


def _gaming_day(doc: dict[str, object], at: float, where: str, seq: int) -> tuple[date, str | None]:
    """The gaming day and zone the table said (payloads.event_message), checked against ``at``; a
    table from before the gaming day sent neither, and its record counts in at's UTC date."""
    utc_day = datetime.fromtimestamp(at, UTC).date()
    if "day" not in doc and "tz" not in doc:
        return utc_day, None
    day, tz = doc.get("day"), doc.get("tz")
    if isinstance(day, str) and isinstance(tz, str):
        known = _days.get((day, tz))
        if known is not None:  # this day and zone were checked before: only the slack is new
            if abs(known - utc_day) > _DAY_SLACK:
                raise Unreadable(
                    f"{where} seq {seq}: day {day} is not the gaming day of its at ({utc_day} UTC)"
                )
            return known, tz
    try:
        if not isinstance(day, str) or len(day) != 10:
            raise ValueError
        gaming_day = date.fromisoformat(day)
    except ValueError:
        raise Unreadable(f"{where} seq {seq}: day is not a date YYYY-MM-DD") from None
    if abs(gaming_day - utc_day) > _DAY_SLACK:
        raise Unreadable(f"{where} seq {seq}: day {day} is not the gaming day of its at ({utc_day} UTC)")
    if not isinstance(tz, str):
        raise Unreadable(f"{where} seq {seq}: tz is not an IANA time zone name")
    try:
        zone(tz)
    except ValueError:
        raise Unreadable(f"{where} seq {seq}: tz is not an IANA time zone name") from None
    _remembered(_days)
    _days[(day, tz)] = gaming_day
    return gaming_day, tz


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _text(value: str | None) -> str:
    if value is None:
        return "\\N"
    # Four scans in C cost less than one translate, which maps every character in Python's loop:
    # nearly every value (hashes, ids, canonical JSON) has nothing to escape.
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value


def copy_line(e: ArchivedEvent, received_by: str = "") -> str:
    """The row in COPY's text format, in store.COLUMNS order: one string per row, joined per batch,
    instead of a psycopg adapter call for each of eleven values."""
    at = "\\N" if e.at is None else repr(e.at)
    return (
        f"{_text(e.site)}\t{_text(e.table_id)}\t{e.seq}\t{e.day.isoformat()}\t{at}\t{_text(e.kind)}\t"
        f"{e.classification}\t{'t' if e.withheld else 'f'}\t{_text(e.payload_json)}\t{_text(e.hash)}\t"
        f"{_text(e.prev_hash)}\t{_text(e.tz)}\t{_text(received_by)}\t{_text(e.journal)}\n"
    )
