"""Hostile events messages: one line naming the rule, never the body; the good ones as published."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from controller.archive.messages import MAX_BODY, Refused, Unreadable, copy_line, parse_event

NOW = datetime(2027, 1, 15, 12, tzinfo=UTC)
TOPIC = "tablectl/floor/dab-01/events"
GOOD = {
    "version": 1,
    "seq": 3,
    "at": 1.8e9,
    "kind": "card_dealt",
    "classification": "public",
    "payload": {"round": 1, "seat": 1, "hand": 0, "card": "QH", "back": "tab\there\\", "purpose": ""},
    "hash": "a" * 64,
}


@pytest.mark.parametrize(
    ("topic", "body", "words"),
    [
        ("tablectl/floor/dab-01/state", GOOD, "not a tablectl/<site>/<table>/events topic"),
        (TOPIC, b"{", "is not JSON"),
        (TOPIC, [1], "is not a JSON object"),
        (TOPIC, {**GOOD, "version": 2}, "version is not 1"),
        (TOPIC, {**GOOD, "seq": 0}, "seq must be a whole number from 1"),
        (TOPIC, {**GOOD, "seq": True}, "seq must be a whole number from 1"),
        (TOPIC, {**GOOD, "kind": "x y"}, "kind is not a journal kind"),
        (TOPIC, {**GOOD, "classification": "top"}, "classification is not one of"),
        (TOPIC, {**GOOD, "hash": "A" * 64}, "hash is not 64 lowercase hex digits"),
        (TOPIC, {**GOOD, "prev_hash": 5}, "prev_hash is not 64 lowercase hex digits"),
        (TOPIC, {**GOOD, "at": 1e300}, "at is not seconds since the epoch"),
        (TOPIC, {**GOOD, "payload": {"x": "\u0000"}}, "payload holds a NUL character"),
        # A withheld record that carries anything more than the placeholder is refused, not stored.
        (
            TOPIC,
            {
                "version": 1,
                "seq": 4,
                "kind": "card_burned",
                "classification": "secret",
                "withheld": True,
                "payload": {"card": "7H"},
            },
            "must be a bare placeholder",
        ),
        (TOPIC, b"x" * (MAX_BODY + 1), "at most"),
    ],
)
def test_refused_with_one_line(topic: str, body: object, words: str) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(Unreadable, match=words) as info:
        parse_event(topic, raw, NOW)
    assert "\n" not in str(info.value) and "7H" not in str(info.value)


def test_a_public_record_and_a_placeholder_as_published() -> None:
    public = parse_event(TOPIC, json.dumps(GOOD).encode(), NOW)
    assert (public.site, public.table_id, public.seq, str(public.day)) == ("floor", "dab-01", 3, "2027-01-15")
    assert public.hash_holds() is None  # no prev_hash published: nothing to recompute with
    # COPY's text format: tab, newline and backslash escaped, so the payload is one field.
    line = copy_line(public)
    # (received_by and journal empty: no worker named, a table that does not name its journal)
    assert line.count("\t") == 13 and line.endswith("\t\\N\t\\N\t\t\n") and "tab\\\\there\\\\\\\\" in line
    # A table from before the gaming day: its placeholder has no time, so it counts on arrival.
    body = {"version": 1, "seq": 4, "kind": "card_burned", "classification": "secret", "withheld": True}
    withheld = parse_event(TOPIC, json.dumps(body).encode(), NOW)
    assert (withheld.withheld, withheld.hash, withheld.payload_json, withheld.at) == (True, None, None, None)
    assert withheld.day == NOW.date()
    # Today's placeholder: its own instant and its table's gaming day, whenever it arrives.
    dated = {**body, "at": 1_800_000_000.0, "day": "2027-01-14", "tz": "America/New_York"}
    later = parse_event(TOPIC, json.dumps(dated).encode(), NOW)
    assert (later.at, str(later.day), later.tz) == (1_800_000_000.0, "2027-01-14", "America/New_York")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"day": "2027-01-20", "tz": "America/New_York"}, "is not the gaming day of its at"),
        ({"day": "14/01/2027", "tz": "America/New_York"}, "day is not a date"),
        ({"day": "2027-01-14", "tz": "Nowhere/Land"}, "tz is not an IANA time zone"),
        ({"day": "2027-01-14"}, "tz is not an IANA time zone"),
    ],
)
def test_a_gaming_day_that_cannot_be_is_refused(extra: dict[str, str], words: str) -> None:
    body = {"version": 1, "seq": 4, "kind": "card_burned", "classification": "secret", "withheld": True}
    with pytest.raises(Unreadable, match=words):
        parse_event(TOPIC, json.dumps({**body, "at": 1_800_000_000.0, **extra}).encode(), NOW)


@pytest.mark.parametrize(
    ("body", "alarm", "words"),
    [
        ({**GOOD, "kind": "made_up"}, "refused", "kind 'made_up' is not one a table journals"),
        ({**GOOD, "kind": "card_burned"}, "refused", "kind 'card_burned' is secret, not public"),
        (
            {"version": 1, "seq": 4, "kind": "round_settled", "classification": "secret", "withheld": True},
            "refused",
            "kind 'round_settled' is public, not secret",
        ),
        ({**GOOD, "payload": {"card": "QH"}}, "refused", "payload is not that of a 'card_dealt' record"),
        ({**GOOD, "prev_hash": "b" * 64}, "bad_hash", "published hash is not that of its contents"),
    ],
)
def test_a_record_no_table_writes_is_refused_as_an_alarm(
    body: dict[str, object], alarm: str, words: str
) -> None:
    """Issue 23: the kind must be one a table journals, with its own classification and (public)
    payload shape, and a published hash must be that of the contents."""
    with pytest.raises(Refused, match=words) as info:
        parse_event(TOPIC, json.dumps(body).encode(), NOW)
    assert (info.value.alarm, info.value.seq, info.value.table_id) == (alarm, body["seq"], "dab-01")
    assert "QH" not in str(info.value)
