"""Reads beside the journal's writer: the table's loop, the console and /metrics read the journal
while its own thread commits. A read must never see an append that is not committed, nor hold a
snapshot the append then has to upgrade from: on one shared connection SQLite refused such an
append at once ("database is locked") when the telemetry cursor had moved on meanwhile, and the
demo with its console failed 3 times in 24 runs. Reads have a connection of their own."""

from __future__ import annotations

from pathlib import Path

from controller.journal import Classification, Journal


def test_a_read_during_an_append_sees_only_what_is_committed(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.db")
    journal.append("table_opened", {"n": 1}, Classification.PUBLIC, 1.0)
    seen: list[tuple[int, int]] = []

    def at_commit(statement: str) -> None:
        # Inside the append's transaction: the head is moved, not yet committed. Read as the
        # console does (here from the writer's thread itself: on the writer's own connection this
        # read would be inside the transaction, and see it).
        if statement == "COMMIT" and not seen:
            seen.append((journal.last_seq, len(list(journal.records()))))

    journal._conn.set_trace_callback(at_commit)  # type: ignore[union-attr]  # the writer's own
    journal.append("round_started", {"round": 1}, Classification.PUBLIC, 2.0)
    journal._conn.set_trace_callback(None)  # type: ignore[union-attr]
    assert seen == [(1, 1)]  # the committed journal, not the append in flight
    assert (journal.last_seq, len(list(journal.records()))) == (2, 2)
    journal.close()


def test_an_append_goes_through_while_another_writer_moves_the_cursor_and_a_read_is_open(
    tmp_path: Path,
) -> None:
    """The demo's race, made to happen: a read statement open (not yet finished), the telemetry
    outbox's connection marking records published, then an append."""
    path = tmp_path / "j.db"
    journal = Journal.open(path)
    for i in range(3):
        journal.append("round_started", {"round": i}, Classification.PUBLIC, float(i))
    outbox = Journal.open(path, create=False)
    rows = journal.records()
    next(rows)  # a read in progress, as a generator left part-way
    reader = journal._reading().execute("SELECT seq FROM records")  # a statement left open
    reader.fetchone()
    outbox.mark_published(2)
    journal.append("round_started", {"round": 9}, Classification.PUBLIC, 9.0)  # not "database is locked"
    reader.close()
    assert journal.last_seq == 4 and journal.published_seq() == 2
    outbox.close()
    journal.close()
