"""The fleet view: gaps and repeats by seq, alarms first, and the live monitor against a real broker."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import pathlib
import re
import signal
import sys
from collections.abc import Callable

import aiomqtt
from rich.console import Console

from controller.journal import Journal
from controller.telemetry.fleet import FleetView
from controller.telemetry.monitor import consume, render
from tests.ports import free_port
from tests.telemetry.conftest import GUARD_S, PASSWORD, ROOT, Broker
from tests.telemetry.helpers import append_records, snapshot_with_alarms, telemetry_for


def _event(seq: int) -> bytes:
    return json.dumps({"version": 1, "seq": seq, "kind": "round_started"}).encode()


def test_gaps_and_repeats_by_seq() -> None:
    view = FleetView()
    for seq in (7, 8, 9, 8, 9, 12, 13, 20):  # starts late at 7; 8-9 repeated; 10-11 and 14-19 lost
        view.ingest("tablectl/s/t/events", _event(seq))
    t = view.tables[("s", "t")]
    assert (t.last_seq, t.events, t.repeats, t.gaps, t.missing) == (20, 6, 2, 2, 8)
    view.ingest("tablectl/s/t/events", b"not json")
    view.ingest("elsewhere/x", b"{}")
    assert view.malformed == 1 and len(view.tables) == 1


def test_alarms_first_and_highlighted() -> None:
    view = FleetView()
    view.ingest("tablectl/s/quiet/status", b'{"version":1,"online":true,"game":"down-under"}')
    view.ingest("tablectl/s/gone/status", b'{"version":1,"online":false,"clean":false}')
    alarms = {
        "version": 1,
        "count": 1,
        "alarms": [
            {
                "id": 3,
                "section": "665a.13(i)",
                "message": "reader failed",
                "floor_action": "replace the reader",
                "halts_dealing": True,
            }
        ],
    }
    view.ingest("tablectl/s/zz-alarm/alarms", json.dumps(alarms).encode())
    assert [t.table for t in view.ordered()] == ["zz-alarm", "gone", "quiet"]
    console = Console(record=True, width=160)
    console.print(render(view, rows=10))
    text = console.export_text()
    assert text.index("zz-alarm") < text.index("gone") < text.index("quiet")
    assert "replace the reader" in text and "LOST" in text


class NotifyingView(FleetView):
    """The monitor's view, telling the test each time a message has been folded in."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def ingest(self, topic: str, payload: bytes) -> None:
        super().ingest(topic, payload)
        self.changed.set()

    def broker_up(self) -> None:  # subscribed: what is published from now on reaches the view
        super().broker_up()
        self.changed.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(GUARD_S):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


async def test_the_monitor_follows_a_publishing_table(broker: Broker, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        last = append_records(journal, 30)
    telemetry = telemetry_for(broker, path)
    view = NotifyingView()
    consumer = asyncio.create_task(consume(broker.settings("monitor-ops"), view))
    key = ("site-a", "t1")
    # The table's events are not retained: a monitor subscribed after they went by never sees
    # them (on a busy machine the table published all 30 first, and last_seq stayed 0).
    await view.until(lambda: view.broker_connected)
    await telemetry.start()
    try:
        telemetry.state_changed(snapshot_with_alarms())
        telemetry.device_health("reader", "failed")
        await view.until(lambda: key in view.tables and view.tables[key].last_seq == last)
        await view.until(lambda: bool(view.tables[key].alarms and view.tables[key].devices))
        t = view.tables[key]
        assert t.online is True and t.gaps == 0 and t.halted and t.devices["reader"] == "failed"
        await telemetry.stop()
        await view.until(lambda: t.online is False)
        assert t.clean_exit is True and t.repeats == 0, t
    finally:
        await telemetry.stop()
        consumer.cancel()


async def test_hostile_messages_neither_stop_nor_freeze_the_monitor(
    broker: Broker, tmp_path: pathlib.Path
) -> None:
    """Issue 11: nested JSON on any state or status message raised RecursionError and ended the
    fold loop while /healthz still answered ok. Now it is malformed, a fold bug is counted and
    skipped, and the view goes on following the table."""
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        last = append_records(journal, 5)

    class BuggyOnce(NotifyingView):
        def ingest(self, topic: str, payload: bytes) -> None:
            if topic.endswith("/devices/trap"):
                self.changed.set()
                raise RuntimeError("a bug in folding")
            super().ingest(topic, payload)

    view = BuggyOnce()
    consumer = asyncio.create_task(consume(broker.settings("monitor-ops"), view))
    telemetry = telemetry_for(broker, path)
    try:
        s = broker.settings("site-a/t1")
        async with aiomqtt.Client(
            s.host, s.port, username=s.username, password=s.password, tls_context=s.tls_context()
        ) as client:
            for leaf in ("state", "status", "alarms", "devices/shoe"):
                # Retained, so the monitor gets them whenever it subscribes.
                await client.publish(f"tablectl/site-a/t1/{leaf}", b"[" * 3000, qos=1, retain=True)
            await client.publish("tablectl/site-a/t1/devices/trap", b"{}", qos=1, retain=True)
        await view.until(lambda: view.malformed == 4 and view.fold_errors == 1)
        await telemetry.start()
        key = ("site-a", "t1")
        await view.until(lambda: key in view.tables and view.tables[key].last_seq == last)
        assert view.malformed == 4 and view.fold_errors == 1 and view.last_fold_error == "RuntimeError"
        assert not consumer.done() and view.stopped is None
    finally:
        await telemetry.stop()
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
    assert view.stopped == "CancelledError"  # a loop that has ended says so (see /healthz)


async def test_tablectl_monitor_runs_and_exits(broker: Broker) -> None:
    env = {
        **os.environ,
        "TABLECTL_MQTT_USERNAME": "monitor-ops",
        "TABLECTL_MQTT_PASSWORD": PASSWORD["monitor-ops"],
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "monitor",
        "--broker",
        f"mqtts://127.0.0.1:{broker.port}",
        "--ca-file",
        str(broker.pki / "ca.crt"),
        "--duration",
        "1",
        "--refresh",
        "0.2",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(GUARD_S):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert b"0 tables" in out


class BrokerWatchingView(NotifyingView):
    """The monitor's view, also telling the test when the broker goes out of reach."""

    def broker_down(self, problem: str) -> None:
        super().broker_down(problem)
        self.changed.set()


async def test_an_unreachable_broker_is_said_in_one_line_and_tried_until_it_is_back(broker: Broker) -> None:
    """Issue 12: against a broker that was not there the monitor showed `0 tables` and nothing else,
    as if the floor were empty. Now the view's first line (and /healthz) says the broker cannot be
    reached and why, the monitor says it once on its ``say`` line, and it keeps trying."""
    broker.stop()
    view, said = BrokerWatchingView(), []
    consumer = asyncio.create_task(consume(broker.settings("monitor-ops"), view, say=said.append))
    try:
        await view.until(lambda: view.broker_problem is not None)
        url = f"mqtts://127.0.0.1:{broker.port}"
        problem = view.broker_problem
        assert problem is not None and not view.broker_connected
        assert problem.startswith(f"broker {url} unreachable (") and "\n" not in problem
        assert view.summary().text.startswith(view.broker_problem + "; 0 tables")
        assert said == [f"monitor: {view.broker_problem}"]
        broker.start()
        await view.until(lambda: view.broker_connected)
        assert view.broker_problem is None and view.summary().text.startswith("0 tables")
        assert said[-1] == f"monitor: connected to the broker at {url}"
        assert len([line for line in said if "unreachable" in line]) == 1  # once, not once per retry
    finally:
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer


async def test_tablectl_monitor_exits_1_naming_a_broker_it_could_not_reach() -> None:
    port = free_port()  # nothing listens there
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "monitor",
        "--broker",
        f"mqtt://127.0.0.1:{port}",
        "--duration",
        "0.1",
        "--refresh",
        "0.05",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(GUARD_S):
        _, err = await proc.communicate()
    assert proc.returncode == 1, err.decode()
    lines = err.decode().splitlines()
    problem = f"monitor: broker mqtt://127.0.0.1:{port} unreachable ("
    assert lines[0].startswith(problem) and lines[0].endswith("; retrying")
    assert lines[-1].startswith(problem) and not lines[-1].endswith("retrying")  # the last word
    assert "Traceback" not in err.decode()


def test_every_table_is_identifiable_at_80_columns_and_offline_tables_show_no_stale_alarm() -> None:
    """The fleet at 80 columns (a small terminal, or a pipe): each table's whole name, its
    status, round and shoe, wrapped rather than cut; the site is left out when there is only one.
    A table shut down cleanly shows offline, not its last alarms; a monitor started after the
    table's birth knows its sequence number; a DJ Wild table has no shoe count."""
    view = FleetView()
    names = ["example-floor-dbj-01", "example-floor-da-02", "example-floor-du-03", "example-floor-wild-04"]
    games = ["double-back-jack", "double-attack", "down-under", "dj-wild"]
    for name, game in zip(names, games, strict=True):
        birth = {
            "version": 1,
            "online": True,
            "game": game,
            "journal": {"last_seq": 812, "published_seq": 812},
        }
        view.ingest(f"tablectl/example/{name}/status", json.dumps(birth).encode())
        snapshot = {"round": 17, "batch_in_shoe": "blue", "cards_in_shoe": 250}
        state = {"version": 1, "game": game, "snapshot": snapshot, "devices": {}}
        view.ingest(f"tablectl/example/{name}/state", json.dumps(state).encode())
    alarm = {
        "id": 1,
        "section": "673a.13(j)",
        "message": "reader failed",
        "floor_action": "replace the reader",
    }
    view.ingest(f"tablectl/example/{names[0]}/alarms", json.dumps({"version": 1, "alarms": [alarm]}).encode())
    view.ingest(f"tablectl/example/{names[1]}/alarms", json.dumps({"version": 1, "alarms": [alarm]}).encode())
    view.ingest(f"tablectl/example/{names[1]}/status", b'{"version":1,"online":false,"clean":true}')
    rows = {r.table: r for r in view.rows()}
    assert rows[names[0]].name == names[0] and rows[names[0]].seq == 812
    assert (
        rows[names[1]].status == "offline"
        and rows[names[1]].alarms == ""
        and rows[names[1]].alarm_level == "none"
    )
    assert rows[names[3]].shoe == "blue deck, by hand"
    console = Console(record=True, width=80, file=io.StringIO())  # a pipe is drawn 80 wide
    console.print(render(view, rows=10, width=console.width))
    text = console.export_text()
    assert all(name in text for name in names), text
    assert "…" not in text and "example/" not in text, text
    for line in text.splitlines():
        assert len(line) <= 80
    first = next(line for line in text.splitlines() if names[0] in line)
    assert "online" in first and "17" in first and "blue 250" in first, text
    assert "replace" in text and "reader" in text  # the alarm wraps, its words kept
    # What happened, not only the section and the action (issue 37).
    assert rows[names[0]].alarms == "673a.13(j): reader failed -> replace the reader"
    assert "failed" in text


async def test_a_monitor_started_late_shows_the_journals_seq(broker: Broker, tmp_path: pathlib.Path) -> None:
    """Issue 37: a monitor started after the table's birth showed seq 1 for a table whose journal
    (tablectl_journal_seq) was at 204: the birth said the seq at connect time and nothing said it
    again. The retained state now carries the seq published so far."""
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        append_records(journal, 1)
    telemetry = telemetry_for(broker, path)
    early = NotifyingView()
    watching = asyncio.create_task(consume(broker.settings("monitor-ops"), early))
    key = ("site-a", "t1")
    late = NotifyingView()
    consumer: asyncio.Task[None] | None = None
    await early.until(lambda: early.broker_connected)  # subscribed before the first event goes by
    await telemetry.start()
    try:
        telemetry.state_changed(snapshot_with_alarms())
        await early.until(lambda: key in early.tables and early.tables[key].last_seq == 1)
        with Journal.open(path) as journal:
            last = append_records(journal, 203)
            assert last == journal.last_seq == 204
        telemetry.journal_appended()
        await early.until(lambda: early.tables[key].last_seq == last)  # every event is out
        consumer = asyncio.create_task(consume(broker.settings("monitor-ops"), late))
        await late.until(lambda: key in late.tables and late.tables[key].online is True)
        await late.until(lambda: late.rows()[0].seq == last)
        assert late.tables[key].events == 0  # known from the retained messages alone, no event seen
    finally:
        await telemetry.stop()
        for task in (watching, consumer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def test_the_message_rate_is_steady_under_bursts() -> None:
    """Issue 37: the rate between two redraws flickered between 0/s and 6/s for a table that
    publishes a burst of 6 each second. Over the window it reads 6/s at every redraw."""
    view = FleetView()
    seen: list[float] = []
    for tick in range(1, 81):  # redraws every 0.5 s for 40 s; the burst lands at each whole second
        now = tick * 0.5
        if tick % 2 == 0:
            for _ in range(6):
                view.ingest("tablectl/s/t/events", _event(view.messages + 1))
        seen.append(view.sample_rate(now))
        assert view.summary().rate_per_s == round(seen[-1], 1)
    steady = seen[len(seen) // 2 :]  # past the first window
    assert all(abs(rate - 6.0) <= 0.6 for rate in steady), steady
    assert f"{view.messages} messages (6/s)" in view.summary().text
    for tick in range(81, 110):  # the table stops: the rate falls to 0 within the window
        view.sample_rate(tick * 0.5)
    assert view.rate_per_s == 0.0


async def test_piped_the_monitor_writes_a_line_per_change_and_a_last_frame_on_sigterm(
    broker: Broker, tmp_path: pathlib.Path
) -> None:
    """Issue 37: piped (tee, a log, a service manager) the monitor printed nothing until it exited,
    and nothing at all when stopped with SIGTERM."""
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        last = append_records(journal, 12)
    env = {
        **os.environ,
        "TABLECTL_MQTT_USERNAME": "monitor-ops",
        "TABLECTL_MQTT_PASSWORD": PASSWORD["monitor-ops"],
    }
    ca = str(broker.pki / "ca.crt")
    args = ["monitor", "--broker", f"mqtts://127.0.0.1:{broker.port}", "--ca-file", ca, "--refresh", "0.1"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    telemetry = telemetry_for(broker, path)
    try:
        async with asyncio.timeout(GUARD_S):
            # Connected (said on stderr) before the table starts, so every change is seen live.
            assert (await proc.stderr.readline()).startswith(b"monitor: connected to the broker")
            await telemetry.start()
            telemetry.state_changed(snapshot_with_alarms())
            lines: list[str] = []
            while not any(" t1: " in line and "665a.13(i)" in line for line in lines):
                lines.append((await proc.stdout.readline()).decode())
            table_lines = [line for line in lines if " t1: " in line]
            assert table_lines, lines  # written while the monitor runs, not at its exit
            first = table_lines[0]
            assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} t1: status ", first), first
            await telemetry.stop()
            while not any(" t1: status offline" in line for line in lines):
                lines.append((await proc.stdout.readline()).decode())
            proc.send_signal(signal.SIGTERM)
            rest, err = await proc.communicate()
    finally:
        await telemetry.stop()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    frame = rest.decode()
    assert "1 tables, 0 online" in frame and "offline" in frame, frame  # the last frame, whole
    assert all(len(line) <= 80 for line in frame.splitlines())
    assert f"seq {last}," in lines[-1], lines  # the line says the seq at the change
    print("".join(lines) + frame)


def test_piped_lines_come_with_a_change_and_not_with_a_seq_alone() -> None:
    from controller.telemetry.monitor import ChangeLines

    view = FleetView()
    lines = ChangeLines()
    view.ingest("tablectl/s/t1/status", b'{"version":1,"online":true,"game":"down-under"}')
    first = lines.lines(view, "T0")
    assert first[0].startswith("T0 fleet: 1 tables, 1 online") and first[1].startswith("T0 t1: status online")
    for seq in (1, 2, 3):  # events alone: the seq moves, nothing a line is written for
        view.ingest("tablectl/s/t1/events", _event(seq))
    assert lines.lines(view, "T1") == []
    alarm = {"id": 1, "section": "685a.12(i)", "message": "the card reader failed",
             "floor_action": "replace the reader", "halts_dealing": True}  # fmt: skip
    view.ingest("tablectl/s/t1/alarms", json.dumps({"version": 1, "alarms": [alarm]}).encode())
    changed = lines.lines(view, "T2")
    assert changed[0] == "T2 fleet: 1 tables, 1 online, 1 with alarms, 0 stream gaps; 5 messages (0/s)"
    assert changed[1] == (
        "T2 t1: status online, game down-under, round -, shoe -, alarms 685a.12(i): the card reader "
        "failed -> replace the reader, devices 0 ok, seq 3, gaps 0"
    )


async def test_on_a_terminal_sigterm_stops_the_monitor_with_its_view_on_the_screen(broker: Broker) -> None:
    """A terminal (a pty here): the view is drawn in place; SIGTERM (a service manager, `kill`)
    is a normal stop, exit 0, and the last frame stays on the screen."""
    import pty

    env = {
        **os.environ,
        "TABLECTL_MQTT_USERNAME": "monitor-ops",
        "TABLECTL_MQTT_PASSWORD": PASSWORD["monitor-ops"],
        "COLUMNS": "120",
        "LINES": "30",
    }
    ca = str(broker.pki / "ca.crt")
    args = ["monitor", "--broker", f"mqtts://127.0.0.1:{broker.port}", "--ca-file", ca, "--refresh", "0.1"]
    main_fd, terminal_fd = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", *args, cwd=ROOT, env=env,
        stdout=terminal_fd, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    os.close(terminal_fd)
    assert proc.stderr is not None
    screen = bytearray()
    loop = asyncio.get_running_loop()
    drawn = asyncio.Event()

    def readable() -> None:
        with contextlib.suppress(OSError):  # EIO once the monitor has closed its end
            screen.extend(os.read(main_fd, 65536))
        if b"0 tables" in screen and b"connected to the broker" in screen:
            drawn.set()

    loop.add_reader(main_fd, readable)
    try:
        async with asyncio.timeout(GUARD_S):
            # On a terminal the line that says so is printed above the view (rich's Live).
            await drawn.wait()  # connected and drawn while it runs
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
    finally:
        loop.remove_reader(main_fd)
        os.close(main_fd)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    assert b"\x1b[" in screen  # drawn as a terminal's view (in place), not as piped lines
    assert b" fleet: " not in screen
