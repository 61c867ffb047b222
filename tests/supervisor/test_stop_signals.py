"""Issue 12: SIGTERM to `tablectl demo` fired the table's MQTT Last Will (an unclean death, as if
the table had been lost) while Ctrl-C was clean. Every way an operator stops the demo or the
appliance (Ctrl-C, SIGTERM, a closed terminal's SIGHUP) must end the same way: the table says it
is offline itself (``clean: true``) and disconnects, the journal is closed and verifies.

A real mosquitto, the real commands as subprocesses, real signals; the tests wait for the
table's birth on the broker and for the process to end, never for time to pass."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from controller.journal import verify_journal
from tests.relocated import relocated_table

ROOT = Path(__file__).resolve().parents[2]
GUARD_S = 60.0  # failure guard only


class StatusWatch:
    """Every message on the tables' retained status topics, in order."""

    def __init__(self, client: aiomqtt.Client) -> None:
        self.client = client

    async def next(self) -> dict[str, Any]:
        async with asyncio.timeout(GUARD_S):
            message = await anext(self.client.messages)
        assert isinstance(message.payload, bytes)
        doc = json.loads(message.payload)
        assert isinstance(doc, dict)
        return doc

    async def until(self, online: bool) -> dict[str, Any]:
        while (doc := await self.next()).get("online") is not online:
            pass
        return doc


async def _watch(port: int) -> AsyncIterator[StatusWatch]:
    async with aiomqtt.Client("127.0.0.1", port, identifier="status-watch") as client:
        await client.subscribe("tablectl/+/+/status", qos=1)
        yield StatusWatch(client)


async def _stopped_cleanly(port: int, argv: list[str], sig: signal.Signals) -> tuple[int, str, str]:
    """Start ``tablectl argv``, wait for its table's birth, send ``sig``: the exit status and
    output, once the first offline status after the birth said it was a clean stop."""
    async for watch in _watch(port):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "controller.cli",
            *argv,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            birth = await watch.until(online=True)
            proc.send_signal(sig)
            async with asyncio.timeout(GUARD_S):
                out, err = await proc.communicate()
            death = await watch.until(online=False)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        # The Last Will says clean: false; only the table's own farewell says clean: true.
        assert death["clean"] is True, (death, err.decode()[-2000:])
        assert death["birth"] == birth["birth"]
        return proc.returncode, out.decode(), err.decode()
    raise AssertionError("unreachable")


DEMO_CASES = [
    pytest.param(["--no-ui", "--rounds", "100000"], signal.SIGTERM, id="headless-SIGTERM"),
    pytest.param(["--no-ui", "--rounds", "100000"], signal.SIGINT, id="headless-SIGINT"),
    pytest.param([], signal.SIGTERM, id="piped-view-SIGTERM"),
    pytest.param([], signal.SIGHUP, id="piped-view-SIGHUP"),
]


@pytest.mark.parametrize(("mode", "sig"), DEMO_CASES)
async def test_the_demo_stops_cleanly_on_every_stop_signal(
    broker_port: int, tmp_path: Path, mode: list[str], sig: signal.Signals
) -> None:
    journal = tmp_path / "j.db"
    argv = [
        "demo",
        *mode,
        "--seed",
        "4",
        "--pace",
        "0",
        "--broker",
        f"mqtt://127.0.0.1:{broker_port}",
        "--journal",
        str(journal),
    ]
    rc, out, err = await _stopped_cleanly(broker_port, argv, sig)
    assert rc == 0, err[-2000:]
    assert "Traceback" not in err and "never retrieved" not in err
    assert verify_journal(journal).ok  # closed, and whole
    if "--no-ui" in mode:
        summary = json.loads(out)
        assert summary["interrupted"] is True and summary["journal_verified"] is True
    else:  # stdout is a pipe here: the line view, ending with how it ended
        lines = out.splitlines()
        assert lines[0].startswith("tablectl demo: dub-01 Down Under Blackjack, telemetry to mqtt://")
        assert lines[-1].startswith("tablectl demo: stopped after ")


def test_tablectl_run_stops_cleanly_on_sigterm(broker_port: int, tmp_path: Path) -> None:
    """The appliance as systemd stops it: SIGTERM, a clean farewell, the journal closed."""
    config = relocated_table("down-under", tmp_path)
    journal = tmp_path / "run.db"
    argv = [
        "run",
        "--config",
        str(config),
        "--journal",
        str(journal),
        "--broker",
        f"mqtt://127.0.0.1:{broker_port}",
    ]
    rc, out, err = asyncio.run(_stopped_cleanly(broker_port, argv, signal.SIGTERM))
    assert rc == 0, err[-2000:]
    events = [json.loads(line)["event"] for line in out.splitlines()]
    assert events[-1] == "stopped" and {"journal_closed", "telemetry.offline"} <= set(events)
    assert verify_journal(journal).ok


def test_piping_the_demo_prints_a_line_per_round_as_it_settles(tmp_path: Path) -> None:
    """Issue 12: `tablectl demo | tee x` showed nothing (the terminal view draws nothing on a pipe).
    On a pipe each settled round is one line, flushed as it settles: the cards a player saw, the
    totals, each hand's result and the house's net for the round."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "demo",
            "--rounds",
            "3",
            "--seed",
            "4",
            "--pace",
            "0",
            "--journal",
            str(tmp_path / "j.db"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=GUARD_S * 3,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    journal = tmp_path / "j.db"
    assert len(lines) == 6 and lines[-1] == f"tablectl demo: done after 3 rounds; journal kept at {journal}"
    assert "box 3.1 is box 3's first hand after a split" in lines[1] and "table units" in lines[1]
    for n, line in enumerate(lines[2:5], start=1):
        assert line.startswith(f"round {n}: dealer ") and "; box 1 " in line and "; house " in line, line
        assert line.endswith(" units")
        assert "hole" not in line  # settled: the hole card has been turned
    # Down Under's side wagers are settled with the main bet, each one said (issue 26).
    assert any("side: box " in line for line in lines[2:5])


def test_the_piped_demo_stops_cleanly_when_its_reader_goes(tmp_path: Path) -> None:
    """`tablectl demo | head -2`, or tee ended by the same Ctrl-C: the next line finds the pipe
    closed; the demo stops as for a closed terminal, without a BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "demo",
            "--seed",
            "4",
            "--pace",
            "0",
            "--journal",
            str(tmp_path / "j.db"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith("tablectl demo: dub-01 ")
        assert proc.stdout.readline().startswith("tablectl demo: a line per settled round; box 3.1 ")
        assert proc.stdout.readline().startswith("round 1: dealer ")
        proc.stdout.close()  # the reader goes; the demo plays on until it next writes
        assert proc.wait(timeout=GUARD_S) == 0
        err = proc.stderr.read()
        assert "Traceback" not in err and "BrokenPipe" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert verify_journal(tmp_path / "j.db").ok


async def test_the_terminal_view_says_how_it_ended_after_ctrl_c(broker_port: int, tmp_path: Path) -> None:
    """On a terminal (a pty here) the live view, then after Ctrl-C a closing line below it (issue 26)."""
    master, slave = os.openpty()
    argv = ["demo", "--seed", "4", "--pace", "0", "--broker", f"mqtt://127.0.0.1:{broker_port}"]
    async for watch in _watch(broker_port):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "controller.cli", *argv, cwd=ROOT, stdout=slave, stderr=slave,
            env={**os.environ, "COLUMNS": "80", "LINES": "24", "TERM": "xterm"},
        )  # fmt: skip
        os.close(slave)
        try:
            await watch.until(online=True)
            proc.send_signal(signal.SIGINT)
            async with asyncio.timeout(GUARD_S):
                rc = await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        break
    out = b""
    with contextlib.suppress(OSError):  # EIO once the pty's last writer has gone
        while chunk := os.read(master, 65536):
            out += chunk
    os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode(errors="replace"))  # the terminal's codes
    assert rc == 0, text[-2000:]
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("tablectl demo: stopped after ") and last.endswith(" rounds"), last
