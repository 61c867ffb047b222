"""The archive reads events messages with orjson where orjson reads them as ``json.loads`` does
(controller/archive/messages.py: loads). A record's hash is checked over the canonical JSON of what
was read, so a reader that read one value differently (an integer as a float, a number rounded
otherwise, a string escaped otherwise) would refuse a table's own record as ``bad_hash`` or take a
forgery: these properties hold the two readers to the same values, byte for byte, over every kind a
table journals, with non-ASCII text, floats and integers beyond 64 bits."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.archive import messages
from controller.archive.kinds import KINDS
from controller.archive.messages import Unreadable, loads, parse_event
from controller.journal import Classification, canonical_json, record_hash
from tests.archive.conftest import events_topic, payload_of

TOPIC = events_topic("dab-01")
JOURNAL = "a" * 64
PUBLIC_KINDS = sorted(k for k, c in KINDS.items() if c is Classification.PUBLIC)

# Text of any code point a JSON string can carry (surrogates aside: they have their own test).
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
numbers = (
    st.integers()
    | st.integers(min_value=2**62, max_value=2**70)
    | st.integers(min_value=-(2**70), max_value=-(2**62))
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=-1e-300, max_value=1e-300, allow_nan=False)
)
leaves = st.none() | st.booleans() | numbers | text
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
# The JSON number grammar, spelled every way a sender may (exponents, leading zeros of fractions).
number_text = st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 is not 1.0, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (
            math.isnan(a) and math.isnan(b)
        )
    return bool(a == b)


def outcome(read: Any, body: bytes) -> tuple[str, Any]:
    try:
        return "value", read(body)
    except (ValueError, RecursionError) as e:
        return "error", type(e).__name__


def encodings(value: Any) -> list[bytes]:
    return [
        json.dumps(value).encode(),
        json.dumps(value, ensure_ascii=False).encode(),
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode(),
        json.dumps(value, indent=1).encode(),
    ]


@settings(max_examples=400, deadline=None)
@given(values)
def test_every_json_value_reads_as_json_loads_reads_it(value: Any) -> None:
    for body in encodings(value):
        assert same(loads(body), json.loads(body)), body


@settings(max_examples=400, deadline=None)
@given(number_text)
def test_every_spelling_of_a_number_reads_as_json_loads_reads_it(number: str) -> None:
    for body in (number.encode(), f'{{"at":{number},"x":[{number}]}}'.encode()):
        mine, theirs = outcome(loads, body), outcome(json.loads, body)
        assert mine[0] == theirs[0]
        assert mine[0] == "error" or same(mine[1], theirs[1]), body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64) | values.map(lambda v: json.dumps(v).encode()), st.data())
def test_any_bytes_are_read_or_refused_as_json_loads_would(body: bytes, data: st.DataObject) -> None:
    """Damaged, truncated or foreign bodies: what json.loads refuses is refused; what it reads is
    read the same (orjson's refusals go back to json.loads, which decides)."""
    if body and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(body) - 1))
        body = body[:at] + data.draw(st.binary(min_size=0, max_size=3)) + body[at + 1 :]
    mine, theirs = outcome(loads, body), outcome(json.loads, body)
    assert mine[0] == theirs[0], body
    assert mine[0] == "error" or same(mine[1], theirs[1]), body


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":NaN,"b":-Infinity}',  # json.loads reads these; orjson does not
        b'\xef\xbb\xbf{"a":1}',  # a byte order mark
        b'{"a":"\\ud800"}',  # a lone surrogate, escaped
        b'{"a":123456789012345678901234567890}',  # beyond 64 bits: orjson would say 1.2345e+29
        b'{"a":-9223372036854775809,"b":18446744073709551616}',
        b'{"a":1e400}',  # beyond a double
        b'{"a":1,"a":2}',  # the last of a repeated key
        '{"a":"é"}'.encode("utf-16"),  # json.loads reads UTF-16 and UTF-32 too
    ],
)
def test_what_orjson_reads_otherwise_is_read_by_json_loads(body: bytes) -> None:
    assert same(loads(body), json.loads(body))


def _message(kind: str, seq: int, payload: dict[str, Any], at: float) -> dict[str, Any]:
    prev = "b" * 64
    return {
        "version": 1,
        "schema_version": 1,
        "seq": seq,
        "at": at,
        "kind": kind,
        "classification": "public",
        "payload": payload,
        "hash": record_hash(seq, at, kind, "public", canonical_json(payload), prev),
        "day": datetime.fromtimestamp(at, UTC).date().isoformat(),
        "tz": "UTC",
        "journal": JOURNAL,
        "prev_hash": prev,
    }


def _parsed(body: bytes) -> tuple[str, Any]:
    try:
        return "event", parse_event(TOPIC, body, datetime(2027, 1, 1, tzinfo=UTC))
    except Unreadable as e:
        return type(e).__name__, str(e)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(PUBLIC_KINDS),
    seq=st.integers(2, 10_000),
    at=st.floats(min_value=1.6e9, max_value=2.1e9),
    changes=st.dictionaries(text, values, max_size=3),
    retype=st.booleans(),
    data=st.data(),
)
def test_every_kind_of_record_parses_the_same_by_either_reader(
    kind: str, seq: int, at: float, changes: dict[str, Any], retype: bool, data: st.DataObject
) -> None:
    """The whole record as the archive takes it (its payload's canonical JSON, its hash check,
    its refusals), read by orjson and by json.loads: the same event, or the same refusal."""
    payload = payload_of(kind, seq)
    if retype and payload:
        # Each field may hold another value: non-ASCII text, a float, an integer beyond 64 bits.
        for name in data.draw(st.lists(st.sampled_from(sorted(payload)), max_size=len(payload))):
            payload[name] = data.draw(values)
    payload.update(changes)
    doc = _message(kind, seq, payload, at)
    for body in encodings(doc):
        mine = _parsed(body)
        original = messages.loads
        messages.loads = json.loads  # type: ignore[assignment]
        try:
            theirs = _parsed(body)
        finally:
            messages.loads = original
        assert mine == theirs, body


def test_a_table_s_own_records_of_every_kind_are_archived() -> None:
    """The check above is not vacuous: each public kind's record, as a table writes it, parses."""
    for kind in PUBLIC_KINDS:
        doc = _message(kind, 7, payload_of(kind, 7, salt="é€😀"), 1_800_000_000.25)
        for body in encodings(doc):
            event = parse_event(TOPIC, body, datetime(2027, 1, 1, tzinfo=UTC))
            assert event.hash == doc["hash"] and event.hash_holds() is True


def test_a_lone_surrogate_in_a_payload_is_unreadable_not_a_crash() -> None:
    """JSON can escape half a surrogate pair; no table writes one (its journal could not hash it).
    Before, the hash's UTF-8 encoding raised out of the parser and stopped the worker's parse loop."""
    doc = _message("card_dealt", 5, {**payload_of("card_dealt", 5), "back": "x"}, 1_800_000_000.0)
    body = json.dumps(doc).encode().replace(b'"back": "x"', b'"back": "\\ud800x"')
    with pytest.raises(Unreadable, match="lone surrogate") as e:
        parse_event(TOPIC, body, datetime(2027, 1, 1, tzinfo=UTC))
    assert "\\ud800" not in str(e.value)
    doc.pop("prev_hash")  # without its link no hash is checked: the COPY would have failed instead
    body = json.dumps(doc).encode().replace(b'"back": "x"', b'"back": "\\ud800x"')
    with pytest.raises(Unreadable, match="lone surrogate"):
        parse_event(TOPIC, body, datetime(2027, 1, 1, tzinfo=UTC))


def test_a_body_nested_too_deep_is_unreadable_not_a_crash() -> None:
    body = b'{"version":1,"seq":1,"payload":' + b"[" * 30_000 + b"]" * 30_000 + b"}"
    with pytest.raises(Unreadable, match="not JSON"):
        parse_event(TOPIC, body, datetime(2027, 1, 1, tzinfo=UTC))


def test_a_gaming_day_read_before_is_still_checked_against_each_record_s_instant() -> None:
    """The day and zone are read once per worker; each record's own ``at`` is still held to them."""
    doc = _message("card_dealt", 3, payload_of("card_dealt", 3), 1_800_000_000.0)
    parse_event(TOPIC, json.dumps(doc).encode(), datetime(2027, 1, 1, tzinfo=UTC))
    late = _message("card_dealt", 4, payload_of("card_dealt", 4), 1_800_000_000.0 + 5 * 86_400)
    late["day"] = doc["day"]
    with pytest.raises(Unreadable, match="is not the gaming day of its at"):
        parse_event(TOPIC, json.dumps(late).encode(), datetime(2027, 1, 1, tzinfo=UTC))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(text, values | st.floats(), max_size=6))
def test_a_payload_s_canonical_json_is_the_journal_s_byte_for_byte(payload: dict[str, Any]) -> None:
    """The archive writes the text a record's hash covers with the standard library's C encoder made
    once: the same text as controller/journal's canonical_json, and the same refusal of NaN."""
    try:
        expected = canonical_json(payload)
    except ValueError:
        with pytest.raises(ValueError):
            messages.canonical_payload(payload)
        return
    assert messages.canonical_payload(payload) == expected
