"""Device counters go into the journal in the same transaction as what they caused (issue 11),
folded into the record of the step's last event, so a gaming day journals one record per event
rather than two; a step that changed nothing writes them alone, and journals written with a
``device_seen`` record per step replay as before."""

from __future__ import annotations

from pathlib import Path

from controller.game_config import default_options
from controller.games import GameId
from controller.journal import Journal
from controller.table import inputs as I
from controller.table.recorder import SEEN_KEY, JournaledTable, Seen

OPTIONS = default_options(GameId.DOUBLE_BACK_JACK)


def kinds(path: Path) -> list[str]:
    with Journal.open(path, create=False, readonly=True) as j:
        return [r.kind for r in j.records()]


def test_counters_ride_in_the_record_of_the_event_they_caused(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    jt = JournaledTable.open(path, OPTIONS, now=1_800_000_000.0)
    seen = Seen("keypad", (("key_seq", 7),))
    jt.handle(I.DeviceOutOfOrder(device="keypad", by="floor-1"), 1.0, seen)
    assert kinds(path) == ["table_opened", "device_out_of_order"]
    with Journal.open(path, create=False, readonly=True) as j:
        last = list(j.records())[-1]
    assert last.payload[SEEN_KEY] == {"device": "keypad", "counters": {"key_seq": 7}}
    assert jt.table.device_seen == {"keypad": {"key_seq": 7}}
    live = jt.table.fingerprint()
    jt.close()
    again = JournaledTable.open(path, OPTIONS, now=1_800_000_000.0)
    try:
        assert again.table.device_seen == {"keypad": {"key_seq": 7}}
        assert again.table.fingerprint() == live
    finally:
        again.close()


def test_counters_of_an_event_that_changed_nothing_are_a_record_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    jt = JournaledTable.open(path, OPTIONS, now=1_800_000_000.0)
    jt.mark(Seen("shoe", (("draw_seq", 3),)), 1.0)
    jt.mark(Seen("shoe", (("draw_seq", 3),)), 2.0)  # known already: nothing to add
    jt.close()
    assert kinds(path) == ["table_opened", "device_seen"]


def test_a_journal_with_device_seen_records_of_their_own_still_replays(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    jt = JournaledTable.open(path, OPTIONS, now=1_800_000_000.0)
    jt.handle(I.DeviceOutOfOrder(device="keypad", by="floor-1"), 1.0)
    # As journals were written before the fold: the counters as a record after the step's.
    jt.journal.append("device_seen", {"device": "keypad", "counters": {"key_seq": 9}}, "public", 1.0)
    jt.close()
    again = JournaledTable.open(path, OPTIONS, now=1_800_000_000.0)
    try:
        assert again.table.device_seen == {"keypad": {"key_seq": 9}}
        assert "keypad" in again.table.out_of_order
    finally:
        again.close()
