"""The journal's ``state_snapshot`` record (issue 16, restart under 2 s): a restart replays the
latest snapshot and the records after it. Replay-equality: a table rebuilt that way is the table
the full fold of the journal gives (fingerprint: every field of every machine), at every point
of a day, and both are the live table; journals without snapshots replay as before."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from controller.game_config import GameOptions, default_options
from controller.games import blackjack_games
from controller.journal import Classification, Journal, Record
from controller.table import inputs as I
from controller.table import state_snapshot
from controller.table.core import Table
from controller.table.recorder import JournaledTable, Seen, domain_events
from controller.table.virtual import VirtualTable

GAMES = blackjack_games()  # VirtualTable deals blackjack only


def play(path: Path, options: GameOptions, rounds: int, every: int, seed: int = 5) -> VirtualTable:
    recorder = JournaledTable.open(path, options, "t-01", snapshot_every=every, now=1_800_000_000.0)
    live = VirtualTable(options, random.Random(seed), seats=3, recorder=recorder)
    live.open_table()
    for _ in range(rounds):
        live.play_round()
    recorder.close()
    return live


def records(path: Path) -> list[Record]:
    with Journal.open(path, create=False, readonly=True) as j:
        return list(j.records())


def full_fold(options: GameOptions, recs: list[Record]) -> Any:
    return Table.replay(options, domain_events(recs[1:]), "t-01").fingerprint()


@pytest.mark.parametrize("game", GAMES)
def test_every_snapshot_is_the_fold_of_the_records_before_it(tmp_path: Path, game: str) -> None:
    options = default_options(game)
    path = tmp_path / "j.db"
    play(path, options, rounds=40, every=150)
    recs = records(path)
    taken = [r for r in recs if r.kind == state_snapshot.KIND]
    assert len(taken) >= 3
    for snap in taken:
        # Secret: it holds which cards are out and a held card; telemetry withholds it.
        assert snap.classification is Classification.SECRET
        restored = state_snapshot.restore(options, "t-01", snap.payload)
        assert not restored.in_round  # taken between rounds only
        assert restored.fingerprint() == full_fold(options, recs[: snap.seq - 1])


@pytest.mark.parametrize("game", GAMES)
def test_a_restart_from_the_latest_snapshot_is_the_full_fold_and_the_live_table(
    tmp_path: Path, game: str
) -> None:
    options = default_options(game)
    path = tmp_path / "j.db"
    live = play(path, options, rounds=40, every=150)
    first = JournaledTable.open(path, options, "t-01", snapshot_every=150, now=1_800_000_000.0)
    assert first.table.fingerprint() == live.table.fingerprint()
    first.mark(Seen("keypad", (("key_seq", 3),)), live.now)  # a record after the last snapshot, at least
    first.close()
    recs = records(path)
    last_snapshot = max(r.seq for r in recs if r.kind == state_snapshot.KIND)
    again = JournaledTable.open(path, options, "t-01", snapshot_every=150, now=1_800_000_000.0)
    try:
        assert again.since_snapshot == len(recs) - last_snapshot > 0
        assert again.table.fingerprint() == full_fold(options, recs) == first.table.fingerprint()
    finally:
        again.close()


@pytest.mark.parametrize("game", ["down-under", "double-attack"])
def test_a_cut_anywhere_replays_from_the_snapshot_before_it_as_from_the_start(
    tmp_path: Path, game: str
) -> None:
    """A kill -9 can leave the journal ending anywhere, mid-round included: the snapshot before
    the end plus the records after it fold to what all the records fold to."""
    options = default_options(game)
    path = tmp_path / "j.db"
    play(path, options, rounds=25, every=120)
    recs = records(path)
    for end in range(2, len(recs) + 1, 23):
        prefix = recs[:end]
        snaps = [r for r in prefix if r.kind == state_snapshot.KIND]
        if not snaps:
            continue
        table = state_snapshot.restore(options, "t-01", snaps[-1].payload)
        for event in domain_events(prefix[snaps[-1].seq :]):
            table.apply(event)
        assert table.fingerprint() == full_fold(options, prefix), end


def test_a_journal_without_snapshots_replays_and_gets_one_at_the_next_step_between_rounds(
    tmp_path: Path,
) -> None:
    options = default_options("double-back-jack")
    path = tmp_path / "j.db"
    live = play(path, options, rounds=20, every=10**9)
    before = records(path)
    assert not [r for r in before if r.kind == state_snapshot.KIND]
    again = JournaledTable.open(path, options, "t-01", snapshot_every=100, now=1_800_000_000.0)
    assert again.table.fingerprint() == live.table.fingerprint()
    more = VirtualTable(options, random.Random(6), seats=3, recorder=again)
    more.now, more.stack, more.behind_cover = live.now, live.stack, live.behind_cover
    more.play_round()
    again.close()
    after = records(path)
    assert [r.kind for r in after[len(before) :]].count(state_snapshot.KIND) == 1


def test_a_snapshot_that_cannot_be_read_is_passed_over_for_the_full_fold(tmp_path: Path) -> None:
    options = default_options("down-under")
    path = tmp_path / "j.db"
    live = play(path, options, rounds=10, every=10**9)
    with Journal.open(path) as j:
        j.append(state_snapshot.KIND, {"format": 99, "state": {}}, "secret", live.now)
    again = JournaledTable.open(path, options, "t-01", now=1_800_000_000.0)
    try:
        assert again.table.fingerprint() == live.table.fingerprint()
    finally:
        again.close()


def test_a_round_in_play_is_not_snapshotted(tmp_path: Path) -> None:
    options = default_options("down-under")
    live = play(tmp_path / "j.db", options, rounds=1, every=10**9)
    live.table.state.round.round = object()  # type: ignore[assignment]  # as if a round were open
    with pytest.raises(state_snapshot.SnapshotError, match="a round is in play"):
        state_snapshot.take(live.table)


def test_a_steps_device_counters_are_in_the_snapshot_taken_with_it(tmp_path: Path) -> None:
    """The counters ride in the step's records and are applied once committed; the snapshot in
    the same transaction holds them, merged with those the table had."""
    options = default_options("double-back-jack")
    path = tmp_path / "j.db"
    jt = JournaledTable.open(path, options, "t-01", snapshot_every=1, now=1_800_000_000.0)
    jt.mark(Seen("shoe", (("draw_seq", 4),)), 1.0)
    jt.handle(I.DeviceOutOfOrder(device="keypad", by="floor-1"), 2.0, Seen("keypad", (("key_seq", 7),)))
    jt.close()
    recs = records(path)
    assert [r.kind for r in recs] == [
        "table_opened",
        "device_seen",
        "device_out_of_order",
        state_snapshot.KIND,
    ]
    restored = state_snapshot.restore(options, "t-01", recs[-1].payload)
    assert restored.device_seen == {"shoe": {"draw_seq": 4}, "keypad": {"key_seq": 7}}
    assert restored.fingerprint() == full_fold(options, recs) == jt.table.fingerprint()


async def test_the_journals_own_thread_writes_the_snapshot_in_the_steps_transaction_too(
    tmp_path: Path,
) -> None:
    options = default_options("double-back-jack")
    path = tmp_path / "j.db"
    jt = JournaledTable.open(path, options, "t-01", snapshot_every=1, now=1_800_000_000.0)
    with ThreadPoolExecutor(1) as writer:
        await jt.mark_async(Seen("shoe", (("draw_seq", 4),)), 1.0, writer)
        inp = I.DeviceOutOfOrder(device="keypad", by="floor-1")
        await jt.handle_async(inp, 2.0, writer, Seen("keypad", (("key_seq", 7),)))
    assert jt.since_snapshot == 0
    jt.close()
    recs = records(path)
    assert [r.kind for r in recs][-2:] == ["device_out_of_order", state_snapshot.KIND]
    assert state_snapshot.restore(options, "t-01", recs[-1].payload).fingerprint() == jt.table.fingerprint()
