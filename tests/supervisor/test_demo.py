"""``tablectl demo`` as a user runs it: headless, with its own mosquitto on a free port (never a
broker already running), its JSON summary explained field by field in ``--help``; and with a broker
of the user's that holds a hostile retained command."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import aiomqtt
import pytest

from controller.appliance.demo import SUMMARY_FIELDS
from controller.journal import Journal
from controller.shipped import table_file
from controller.supervisor.rig import ROOT
from controller.table_file import read_table_doc
from controller.telemetry.broker import ENV_PASSWORD, ENV_USERNAME
from tests import mosquitto_fixtures
from tests.ports import free_port

GUARD_S = 240.0  # failure guard only


def _demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "demo", "--no-ui", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        env=env,
    )


@pytest.mark.parametrize("game", ["down-under", "dj-wild"])
def test_demo_headless_with_its_own_mosquitto(game: str, tmp_path: Path) -> None:
    mosquitto_fixtures.mosquitto_binary()  # skips when mosquitto is not installed
    started = time.time()
    done = _demo("--game", game, "--rounds", "3", "--seed", "5", "--journal", str(tmp_path / "j.db"))
    assert done.returncode == 0, done.stderr
    # The virtual clock starts at the real now: every record, table_opened first, is dated today
    # (give or take the virtual hours the demo plays), not in 1970 or 2027.
    with Journal.open(tmp_path / "j.db", create=False, readonly=True) as j:
        records = list(j.records())
        times = [r.at for r in records]
    assert started - 1 <= times[0] <= time.time() and times == sorted(times)
    assert times[-1] - times[0] < 86_400
    summary = json.loads(done.stdout)
    assert summary["broker_kind"] == "mosquitto" and summary["broker"].startswith("mqtt://127.0.0.1:")
    assert summary["rounds"] == 3 and summary["journal_verified"] is True
    # The summary's figures, read back against the journal they come from.
    assert summary["journal_records"] == records[-1].seq == len(records)
    if game != "dj-wild":
        assert summary["rounds"] == sum(1 for r in records if r.kind == "round_settled")
    assert "-0.0" not in done.stdout  # a figure that rounds to nothing reads 0.0 (issue 37)
    # Every field is explained in --help.
    documented = re.findall(r"(?m)^  ([a-z_]+(?:, [a-z_]+)*) ", SUMMARY_FIELDS)
    assert set(summary) == {name for names in documented for name in names.split(", ")}
    if game == "dj-wild":  # dealt from the hand, the stub counted by the counter (687a.9(f))
        assert summary["cards_drawn"] == 0 and summary["stub_counts"] == 3 and summary["house"] == {}
        return
    bet = summary["house"]["bet"]  # the house's result per wager adds up
    # A sensed spot each (10); a double is a line of its own, for 10 or for less (5).
    assert bet["settled"] >= 3 and bet["staked"] >= 5 * bet["settled"]
    assert bet["house_edge"] == round(bet["house_net"] / bet["staked"], 4)
    assert bet["house_edge_stderr"] > 0  # a standard error beside each edge, as simulate gives


def test_demo_with_a_broker_survives_a_hostile_command(tmp_path: Path, broker_port: int) -> None:
    """Issue 11: 3 KB of nested '[' on a command topic ended the demo's telemetry and the demo
    exited 1 with most of its journal unpublished. Retained, so the table gets it as it subscribes."""
    doc = read_table_doc(table_file("down-under"))
    base = f"tablectl/{doc['table']['site']}/{doc['table']['id']}"
    env = {k: v for k, v in os.environ.items() if k not in (ENV_USERNAME, ENV_PASSWORD)}
    journal = tmp_path / "j.db"

    async def publish() -> None:
        async with aiomqtt.Client("127.0.0.1", broker_port, identifier="hostile") as c:
            await c.publish(f"{base}/cmd/reshuffle_ordered", b"[" * 3000, qos=1, retain=True)

    async def last_status() -> dict[str, object]:
        async with aiomqtt.Client("127.0.0.1", broker_port, identifier="late") as c, asyncio.timeout(10):
            await c.subscribe(f"{base}/status", qos=1)
            message = await anext(aiter(c.messages))
            status: dict[str, object] = json.loads(bytes(message.payload))
            return status

    asyncio.run(publish())
    done = _demo(
        "--rounds",
        "3",
        "--seed",
        "5",
        "--broker",
        f"mqtt://127.0.0.1:{broker_port}",
        "--journal",
        str(journal),
        env=env,
    )
    status = asyncio.run(last_status())
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["journal_verified"] is True and summary["broker_kind"] == "external"
    assert status["online"] is False and status["clean"] is True  # a clean farewell, so it lived on
    with Journal.open(journal, create=False, readonly=True) as j:
        assert j.published_seq() == j.last_seq  # every record reached the broker


def test_demo_with_a_broker_it_cannot_reach_exits_non_zero_in_one_line(tmp_path: Path) -> None:
    """Issue 26: it used to play on with a warning and exit 0, telemetry going nowhere."""
    port = free_port()
    done = _demo("--rounds", "1", "--broker", f"mqtt://127.0.0.1:{port}", "--journal", str(tmp_path / "j.db"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"tablectl demo: --broker mqtt://127.0.0.1:{port}: cannot connect to 127.0.0.1:{port}"
        " (Connection refused)\n"
    )
    assert not (tmp_path / "j.db").exists()


def test_demo_with_the_console_says_where_it_is(tmp_path: Path) -> None:
    from tests.console.conftest import write_users

    users = write_users(tmp_path / "users.toml")
    # Port 0: the system's choice, said back. A port picked here and bound later by the demo was
    # free in between, and the demo's own simulated devices (started before the console, on
    # ports of the system's choosing) could be given it first.
    done = _demo("--rounds", "1", "--seed", "2", "--console", "127.0.0.1:0", "--users", str(users))
    assert done.returncode == 0, done.stderr
    said = re.search(r"tablectl demo: table console at http://127\.0\.0\.1:(\d+)/ ", done.stderr)
    assert said is not None and int(said[1]) > 0, done.stderr
    port = said[1]
    assert (
        f"tablectl demo: table console at http://127.0.0.1:{port}/ (dealer display),"
        f" http://127.0.0.1:{port}/floor (floor console; sign in as a user of {users})\n"
    ) in done.stderr
    # stdout carries what the command promises, the JSON summary, and nothing else: the console's
    # process logged its lines there (issue 37); logs go to stderr like the table's own.
    summary = json.loads(done.stdout)
    assert summary["rounds"] == 1
    assert '"event"' in done.stderr  # the logs are there, on stderr
