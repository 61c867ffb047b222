"""A full disk under the journal (issue 38 item 5): a real tmpfs of a few megabytes, filled to the
last byte while the virtual dealer plays a round. The commit that fails is a halting alarm at
once (the published state, the console's alarms, /healthz, /metrics), commands are refused with
the reason, the input is held, not dropped; once space returns the table resumes by itself, and
every card the shoe dealt is in the journal with no accounting alarm. Needs root for the mount
(CI runs as root)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from controller import logs
from controller.appliance.cli import _health
from controller.supervisor.journal_outage import ALARM_ID, RETRY
from controller.supervisor.rig import table_file, virtual_table
from tests.supervisor.conftest import assert_journal_sound, journal_kinds
from tests.supervisor.test_shoe_glitches import _cards

# The product's fsync of every append (tests/conftest.py turns it off elsewhere): a full disk is
# met by the journal as a table meets it. Free here: the journal is on a tmpfs.
pytestmark = pytest.mark.fsync


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 8 MiB mounted for this test (root only), unmounted after it."""
    where = tmp_path / "fs"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(directory: Path) -> Path:
    """A file that takes every free byte of the file system."""
    filler = directory / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                break
        with contextlib.suppress(OSError):  # the last partial chunk, byte by byte
            for _ in range(65536):
                f.write(b"\0")
    return filler


async def test_a_full_disk_halts_the_table_holds_the_input_and_resumes_by_itself(small_fs: Path) -> None:
    logs.configure(cache=False)  # capture_logs misses cached loggers
    journal = small_fs / "t.db"
    async with asyncio.timeout(120):
        async with virtual_table(table_file("down-under"), journal, seed=5, boxes=1) as rig:
            sup, outage = rig.supervisor, rig.supervisor.stepper.outage
            # 8 MiB is under the 256 MiB reserve: warned of from the start, and dealing goes on.
            warned = sup.snapshot()
            assert warned["alarms"][0]["id"] == ALARM_ID and not warned["halted"], warned
            assert "under its reserve" in warned["alarms"][0]["message"]
            await rig.dealer.open_table()
            await rig.dealer.play_round()
            down, up = asyncio.Event(), asyncio.Event()
            sup.on_change(lambda: (down if outage.down else up).set())
            # The write-ahead log emptied into the file, so the next commit needs new blocks.
            with sqlite3.connect(journal) as db:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            filler = _fill(small_fs)
            shoe = rig.sim.devices["shoe"].model
            with capture_logs() as lines:
                play = asyncio.create_task(rig.dealer.play_round())
                await down.wait()
                up.clear()
                # Halted at once, and said everywhere the floor looks.
                snap = sup.snapshot()
                assert snap["journal_failed"] and "disk is full" in snap["journal_failed"], snap
                assert snap["halted"][0]["id"] == ALARM_ID and snap["asking"]["what"] == "floor"
                assert snap["halted"][0]["section"] == "685a.7(s)"
                assert "dealing is stopped" in snap["alarms"][0]["message"]
                healthy, why = _health(sup)
                assert not healthy and why.startswith("halted: the journal cannot be written"), why
                scraped = generate_latest(sup.metrics.registry).decode()
                assert "tablectl_journal_writable 0.0" in scraped
                refused = await sup.command("reshuffle_ordered", {}, "floor-1", "floor")
                assert not refused["ok"] and "journal cannot be written" in refused["error"], refused
                assert not play.done()  # the dealer's input is held, not dropped
                # Space returns: the held input goes in at the next try, the round goes on.
                filler.unlink()
                rig.clock.advance(RETRY.max_s)
                await up.wait()
                await play
            assert not outage.down and sup.snapshot()["journal_failed"] is None
            assert sup.table.calendar is sup.config.gaming_day  # kept through the rebuilds
            assert _health(sup)[0]
            said = [x["event"] for x in lines if x["event"] in ("journal_failed", "journal_resumed")]
            assert said == ["journal_failed", "journal_resumed"], said  # one line each, not a line a try
            await rig.dealer.play_round()  # and the next round as ever
            # A person's command is the write that fails: refused to them, not held, and the
            # table halts all the same; with nothing held, the table probes the file system and
            # resumes by itself once it takes a write again.
            with sqlite3.connect(journal) as db:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            filler = _fill(small_fs)
            down.clear()
            refused = await sup.command("new_dealer", {"name": "dee"}, "floor-1", "floor")
            assert not refused["ok"] and "journal cannot be written" in refused["error"], refused
            assert outage.down and not _health(sup)[0]
            await down.wait()
            up.clear()
            filler.unlink()
            await asyncio.sleep(0)  # one turn of the loop: the probe starts, and waits on the clock
            rig.clock.advance(RETRY.max_s)
            await up.wait()
            assert not outage.down
            assert (await sup.command("new_dealer", {"name": "dee"}, "floor-1", "floor"))["ok"]
            await rig.dealer.play_round()
            path = sup.journal_path
            assert _cards(path) == shoe.draw_seq  # every card the shoe dealt is journalled
            messages = [str(p["message"]) for k, p in journal_kinds(path) if k == "alarm_raised"]
            assert not [m for m in messages if "shoe reports" in m], messages
            assert_journal_sound(rig)
