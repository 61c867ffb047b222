"""``archive report``'s "devices out" read back against the journals they come from: every kind of
device the floor marked out of order (673a.13(l) and its like) is counted, the keypad too, and a
device nobody marked (a reader that failed by itself, 673a.13(j)) is not."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from controller.cli import main
from controller.game_config import default_options
from controller.gaming_day import PENNSYLVANIA
from controller.journal import Journal
from controller.table import inputs as I
from controller.table.recorder import JournaledTable
from controller.table.virtual import VirtualTable
from tests.support.floor_day import DAY, archive


def _table(path: Path, table_id: str, game: str, seed: int, marks: list[I.Input]) -> None:
    """A table that plays two rounds, then takes ``marks`` (the floor's and the devices' inputs)."""
    opened = PENNSYLVANIA.start_of(DAY) + 3600 * seed
    recorder = JournaledTable.open(path, default_options(game), table_id, now=opened)
    vt = VirtualTable(default_options(game), random.Random(seed), seats=2, recorder=recorder, now=opened)
    try:
        vt.open_table()
        vt.feed(I.NewDealer(name="ann"))
        for _ in range(2):
            vt.play_round()
            vt.now += 60
        for inp in marks:
            vt.feed(inp)
            vt.now += 60
    finally:
        recorder.close()


def _marked_in_journal(path: Path) -> Counter[str]:
    """What the journal says the floor marked out of order, device by device."""
    marked: Counter[str] = Counter()
    with Journal.open(path, create=False, readonly=True) as j:
        for r in j.records():
            if r.kind == "shuffler_out_of_order":
                marked["shuffler"] += 1
            elif r.kind == "device_out_of_order":
                marked[r.payload["device"]] += 1
    return marked


def test_devices_out_counts_every_kind_marked_and_only_those(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = {"dub-01": tmp_path / "dub.db", "dab-01": tmp_path / "dab.db", "dbj-01": tmp_path / "dbj.db"}
    # The keypad and the shuffler marked out; the shuffler again after it came back.
    _table(paths["dub-01"], "dub-01", "down-under", 1, [
        I.DeviceOutOfOrder(device="keypad", by="floor-1"),
        I.ShufflerOutOfOrder(by="floor-1"),
        I.ShufflerRestored(by="floor-1"),
        I.DeviceOutOfOrder(device="shuffler", by="floor-2"),
    ])  # fmt: skip
    # The reader fails by itself: an alarm, but nobody marked it out.
    _table(paths["dab-01"], "dab-01", "double-attack", 2, [I.ReaderFailed(code=3)])
    # The reader marked out by the floor (which also fails it in the core).
    _table(
        paths["dbj-01"], "dbj-01", "double-back-jack", 3, [I.DeviceOutOfOrder(device="reader", by="floor-1")]
    )
    asyncio.run(archive(paths, db))

    assert main(["archive", "report", "--db", db, "--day", DAY.isoformat(), "--json"]) == 0
    report = {t["table"]: t for t in json.loads(capsys.readouterr().out)["tables"]}
    for table_id, path in paths.items():
        assert report[table_id]["devices_out_of_order"] == dict(_marked_in_journal(path)), table_id
        # The report's other figures, each against the journal too.
        with Journal.open(path, create=False, readonly=True) as j:
            kinds = Counter(r.kind for r in j.records())
            last = j.last_seq
        row = report[table_id]
        assert (row["events"], row["first_seq"], row["last_seq"]) == (last, 1, last), table_id
        assert row["rounds"] == kinds["round_settled"] == 2, table_id
        assert (row["rounds_voided"], row["shoes"]) == (kinds["round_voided"], kinds["batch_to_shoe"]), (
            table_id
        )
        assert sum(row["alarms_by_section"].values()) == kinds["alarm_raised"], table_id
    assert report["dub-01"]["devices_out_of_order"] == {"keypad": 1, "shuffler": 2}
    assert report["dab-01"]["devices_out_of_order"] == {}  # failed by itself: not marked
    assert report["dbj-01"]["devices_out_of_order"] == {"reader": 1}

    assert main(["archive", "report", "--db", db, "--day", DAY.isoformat()]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert " / keypad:1,shuffler:2 / " in lines["example-floor/dub-01"]
    assert " / - / " in lines["example-floor/dab-01"]
    assert " / reader:1 / " in lines["example-floor/dbj-01"]
