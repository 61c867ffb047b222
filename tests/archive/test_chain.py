"""The chain checked as records arrive (fork, changed hash, unfilled gap: alarm on MQTT and in
chain_alarms), a rewritten journal caught by ``archive verify``, and the day's report."""

from __future__ import annotations

import asyncio
import json
import pathlib
import sqlite3

import aiomqtt
import pytest

from controller.archive.worker import ArchiveWorker
from controller.cli import main
from controller.journal import record_hash, verify_journal
from tests.archive.conftest import (
    GUARD_S,
    SITE,
    Broker,
    events_topic,
    fill_journal,
    forge,
    journal_messages,
    publish,
    rows,
    running,
    settings,
    until,
)


async def test_a_forked_stream_a_changed_record_and_a_gap_raise_alarms(
    broker: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    fill_journal(tmp_path / "a.db", "dab-04", 20)
    fill_journal(tmp_path / "b.db", "dab-04", 20, salt="forged")  # the same table, another history
    a, b = await journal_messages(tmp_path / "a.db"), await journal_messages(tmp_path / "b.db")
    # Records 1-17 of the real stream, then 20 of the forged one: 18 and 19 have not come.
    worker = ArchiveWorker(settings(broker, db, gap_grace_s=0.0, gap_alarm_s=0.0))
    async with (
        aiomqtt.Client(
            "127.0.0.1", broker.port, identifier="ops", protocol=aiomqtt.ProtocolVersion.V5
        ) as ops,
        running(worker),
    ):
        await ops.subscribe(f"tablectl/{SITE}/archive/alarms", qos=1)
        await publish(broker.port, events_topic("dab-04"), a[:17])
        await until(lambda: worker.stored == 17, worker)
        await publish(broker.port, events_topic("dab-04"), [b[19]])
        await until(lambda: {"gap"} <= {x.kind for x in worker.alarms}, worker)
        # A record archived already comes again with another hash, linked as well as the first
        # (recomputed over the real prev_hash): both are kept in quarantine.
        await publish(broker.port, events_topic("dab-04"), [forge(a[4], hole="KS")])
        await until(lambda: {"changed_hash"} <= {x.kind for x in worker.alarms}, worker)
        # 18 and 19 arrive late: stored, below the watermark their gap moved.
        await publish(broker.port, events_topic("dab-04"), a[17:19])
        await until(lambda: worker.stored == 20, worker)
        # Neither copy of 5 was the row while contested; the table's own 6, which links to the
        # first, settles it back into events.
        real_5 = [(json.loads(a[4])["hash"],)]
        await until(lambda: rows(db, "SELECT hash FROM events WHERE seq = 5") == real_5, worker)
        published = []
        async with asyncio.timeout(GUARD_S):
            async for message in ops.messages:
                published.append(json.loads(message.payload))  # type: ignore[arg-type]
                if len(published) == 2:
                    break
    kept = rows(db, "SELECT kind, seq, detail FROM chain_alarms ORDER BY id")
    assert [k[:2] for k in kept] == [("gap", 18), ("changed_hash", 5)]
    assert kept[0][2] == "records 18-19 never arrived; still asking the table to republish"
    first, second = json.loads(a[4])["hash"][:12], json.loads(forge(a[4], hole="KS"))["hash"][:12]
    archived = "record 5 came again with another hash, kind or classification than archived: archived"
    assert kept[1][2].startswith(f"{archived} hash {first} received ")
    assert f"; also hash {second} received " in kept[1][2] and kept[1][2].endswith(
        "by archive-1; both kept in quarantine"
    )
    assert rows(db, "SELECT seq, archived, hash FROM quarantine ORDER BY id") == [
        (5, True, json.loads(a[4])["hash"]),
        (5, False, json.loads(forge(a[4], hole="KS"))["hash"]),
    ]
    assert [(m["alarm"], m["table"], m["seq"]) for m in published] == [
        ("gap", "dab-04", 18),
        ("changed_hash", "dab-04", 5),
    ]
    import jsonschema

    from controller.telemetry.contract import schemas

    for m in published:  # docs/mqtt.md, "Schemas": archive.json
        jsonschema.Draft202012Validator(schemas()["archive.json"]).validate(m)
    assert rows(db, "SELECT hash, chosen FROM quarantine ORDER BY id") == [
        (json.loads(a[4])["hash"], True),
        (json.loads(forge(a[4], hole="KS"))["hash"], False),
    ]


async def test_a_fork_is_raised_when_the_links_meet(broker: Broker, db: str, tmp_path: pathlib.Path) -> None:
    fill_journal(tmp_path / "a.db", "dab-05", 16)
    fill_journal(tmp_path / "b.db", "dab-05", 16, salt="forged")
    a, b = await journal_messages(tmp_path / "a.db"), await journal_messages(tmp_path / "b.db")
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        # Record 15 from another history; it follows a public record, so it carries prev_hash.
        assert "prev_hash" in json.loads(b[14])
        await publish(broker.port, events_topic("dab-05"), [*a[:14], b[14]])
        await until(lambda: any(x.kind == "fork" for x in worker.alarms), worker)
    assert rows(db, "SELECT kind, seq FROM chain_alarms") == [("fork", 15)]


def _rewrite(path: pathlib.Path, seq: int) -> None:
    """The insider: edit one record and recompute every later hash and the head marker."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER records_no_update")
    conn.execute("UPDATE records SET payload = replace(payload, '\"QH\"', '\"KH\"') WHERE seq = ?", (seq,))
    prev = conn.execute("SELECT hash FROM records WHERE seq = ?", (seq - 1,)).fetchone()[0]
    for s, at, kind, cls, payload in conn.execute(
        "SELECT seq, at, kind, classification, payload FROM records WHERE seq >= ? ORDER BY seq", (seq,)
    ).fetchall():
        h = record_hash(s, at, kind, cls, payload, prev)
        conn.execute("UPDATE records SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, h, s))
        prev = h
    conn.execute("UPDATE chain_head SET hash = ?", (prev,))
    conn.commit()
    conn.close()


async def test_a_journal_rewritten_after_archiving_is_caught_by_archive_verify(
    broker: Broker, db: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-06", 40)
    worker = ArchiveWorker(settings(broker, db))
    async with running(worker):
        await publish(broker.port, events_topic("dab-06"), await journal_messages(journal))
        await until(lambda: worker.stored == 40, worker)
    assert await asyncio.to_thread(main, ["archive", "verify", "--db", db, "--journal", str(journal)]) == 0
    assert "complete: all 40 records of the journal are archived and agree with it" in capsys.readouterr().out

    # Record 19 is a withheld burned card (the cycle in conftest): the archive never had its hash,
    # but record 20's hash covers it, so the first public record after the edit disagrees.
    _rewrite(journal, 19)
    assert verify_journal(journal).ok, "the journal's own chain cannot see a full rehash"
    assert await asyncio.to_thread(main, ["archive", "verify", "--db", db, "--journal", str(journal)]) == 1
    out = capsys.readouterr().out
    assert "record 20: hash differs from the archived one (journal rewritten after archiving?)" in out

    code = await asyncio.to_thread(
        main, ["archive", "report", "--db", db, "--day", "2027-01-14", "--json"]
    )  # 03:00 EST: the 14th
    assert code == 0
    (table,) = json.loads(capsys.readouterr().out)["tables"]
    # The 9 withheld placeholders carry their table's time and gaming day: they count on the
    # table's day in 2027, not on the day they arrived (docs/journal.md, "The archive").
    assert (table["table"], table["events"], table["rounds"], table["shoes"]) == ("dab-06", 40, 4, 4)
    assert table["withheld"] == 9
    assert table["alarms_by_section"] == {"665a.5(c)": 4} and table["gaps"] == 0


def test_the_archive_alarm_topic_is_no_table() -> None:
    """``tablectl/<site>/archive/alarms`` must not show up as a table called archive in the fleet
    view (which subscribes to tablectl/#), and no table may be called archive."""
    from controller.errors import ConfigError
    from controller.telemetry.topics import TableTopics, parse_topic

    assert parse_topic(f"tablectl/{SITE}/archive/alarms") is None
    assert parse_topic(f"tablectl/{SITE}/dab-01/alarms") is not None
    with pytest.raises(ConfigError, match="reserved for the casino's archive"):
        TableTopics(SITE, "archive")
