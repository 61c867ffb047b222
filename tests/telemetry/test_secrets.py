"""No secret crosses: a full shoe played through the core into a real journal, published to a real
broker, and every message received checked against the journal's non-public records and SECRET_FIELDS."""

from __future__ import annotations

import asyncio
import json
import pathlib
import random
from typing import Any

import pytest

from controller.game_config import default_options
from controller.gaming_day import PENNSYLVANIA
from controller.journal import Classification, Journal, Record, canonical_json
from controller.table.events import REVEALING_KINDS, SECRET_FIELDS
from controller.table.recorder import JournaledTable
from controller.table.virtual import VirtualTable
from tests.telemetry.conftest import Broker, Received, observer
from tests.telemetry.helpers import assert_complete_in_order, seqs, telemetry_for

MAX_ROUNDS = 400
# Nested SECRET_FIELDS names in public events that are public when the event happens: at
# settlement the dealer's hand has been turned over, so whether it was a blackjack is known to all.
ALLOWED = {("payload.dealer.blackjack", "round_settled")}


def _keys(value: object, path: str = "") -> list[tuple[str, object]]:
    """Every (dotted path, value) of a dict key anywhere inside ``value``."""
    out: list[tuple[str, object]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((f"{path}.{k}" if path else k, v))
            out.extend(_keys(v, f"{path}.{k}" if path else k))
    elif isinstance(value, list):
        for item in value:
            out.extend(_keys(item, path))
    return out


def check_message(message: Received, records: dict[int, Record], secret_texts: list[str]) -> None:
    text = message.payload.decode("utf-8")
    doc = json.loads(text)
    # A revealing event (hole_card_turned...) legitimately repeats what was hidden until then.
    revealing = message.topic.endswith("/events") and doc.get("kind") in REVEALING_KINDS
    for secret in secret_texts if not revealing else ():
        assert secret not in text, f"a non-public payload was found on {message.topic}"
    if message.topic.endswith("/events"):
        record = records[doc["seq"]]
        if record.classification is not Classification.PUBLIC:
            before = records.get(record.seq - 1)
            before_public = before is not None and before.classification is Classification.PUBLIC
            assert doc == {
                "version": 1,
                "schema_version": 1,
                "seq": record.seq,
                "kind": record.kind,
                "classification": record.classification.value,
                "withheld": True,
                "at": record.at,  # when, and which gaming day: public at the table
                "day": PENNSYLVANIA.day_of(record.at).isoformat(),
                "tz": PENNSYLVANIA.time_zone,
                # The journal's identity: its first record's hash, a public record's, never this one's.
                "journal": doc.get("journal"),
                # The link only to a public record, whose hash went out with it: never a withheld one's.
                **({"prev_hash": record.prev_hash} if before_public else {}),
            }
            first = records.get(1)
            assert first is not None and first.classification is Classification.PUBLIC
            assert doc["journal"] == first.hash
            return
        assert doc["payload"] == record.payload and doc["hash"] == record.hash
        if "prev_hash" in doc:  # a link may name only a public record's hash, never a withheld one's
            before = records.get(record.seq - 1)
            assert doc["prev_hash"] == record.prev_hash
            assert record.seq == 1 or (before is not None and before.classification is Classification.PUBLIC)
        if record.kind in REVEALING_KINDS:
            return  # the card is face up at the table when this happens
    for path, value in _keys(doc):
        leaf = path.rsplit(".", 1)[-1]
        if leaf not in SECRET_FIELDS or (path, doc.get("kind")) in ALLOWED:
            continue
        # The one other allowed use of a SECRET_FIELDS name: the snapshot's public count.
        assert path == "snapshot.cards_in_shoe" and isinstance(value, int), f"{leaf} on {message.topic}"


@pytest.mark.parametrize("game", ["double-attack", "down-under"])
async def test_no_secret_in_any_message_of_a_full_shoe(
    broker: Broker, tmp_path: pathlib.Path, game: str
) -> None:
    path = tmp_path / "shoe.db"
    recorder = JournaledTable.open(path, default_options(game), table_id="t1", now=1_800_000_000.0)
    virtual = VirtualTable(default_options(game), random.Random(7), seats=3, recorder=recorder)
    telemetry = telemetry_for(broker, path)
    try:
        async with observer(broker, "monitor-ops", "tablectl/site-a/t1/#") as obs:
            await telemetry.start()  # after the observer subscribed: table_opened (seq 1) is already due
            virtual.open_table()
            first_back = virtual.table.shoe_back
            while virtual.rounds < MAX_ROUNDS and virtual.table.shoe_back == first_back:
                virtual.play_round()
                telemetry.state_changed(virtual.table.snapshot())
                telemetry.device_health("shoe", "online")
                telemetry.journal_appended()
                await asyncio.sleep(0)  # let the publisher run beside the table, as under the supervisor
            last = recorder.journal.last_seq
            await obs.wait_for(lambda ms: last in seqs(ms), guard_s=60)
            await obs.wait_for(lambda ms: any(m.topic.endswith("/alarms") for m in ms))
            messages = list(obs.messages)
    finally:
        await telemetry.stop()
    with Journal.open(path, readonly=True) as journal:
        records = {r.seq: r for r in journal.records()}
    kinds = {r.kind for r in records.values()}
    assert (
        "shoe_ended" in kinds and {"card_burned", "hole_card_dealt"} <= kinds
    )  # a real shoe, secrets and all
    hidden = [r for r in records.values() if r.classification is not Classification.PUBLIC]
    assert hidden
    secret_texts = sorted({canonical_json(r.payload) for r in hidden if r.payload}, key=len, reverse=True)
    assert_complete_in_order(seqs(messages), last)
    for message in messages:
        check_message(message, records, secret_texts)
    recorder.close()


def test_the_check_would_catch_a_leak() -> None:
    """The checker itself: a withheld record sent with its payload, or a card on the state, fails."""
    record = Record(5, 1.0, "card_burned", Classification.SECRET, {"card": "QH"}, "0" * 64, "1" * 64)
    leaked = Received(
        "tablectl/s/t/events",
        json.dumps(
            {
                "version": 1,
                "schema_version": 1,
                "seq": 5,
                "kind": "card_burned",
                "classification": "secret",
                "withheld": True,
                "payload": {"card": "QH"},
            }
        ).encode(),
        False,
    )
    with pytest.raises(AssertionError):
        check_message(leaked, {5: record}, [canonical_json(record.payload)])
    with pytest.raises(AssertionError):
        check_message(leaked, {5: record}, [])
    state: dict[str, Any] = {"version": 1, "snapshot": {"cards_in_shoe": ["QH"]}}
    with pytest.raises(AssertionError):
        check_message(Received("tablectl/s/t/state", json.dumps(state).encode(), True), {}, [])
