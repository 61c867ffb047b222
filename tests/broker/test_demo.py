"""The embedded broker as the demo uses it: a table's telemetry through it end to end, the
thread runner, and ``tablectl demo --embedded-broker`` as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import aiomqtt
import pytest

from controller.shipped import table_file
from controller.supervisor.config import load_table_config
from controller.supervisor.demo import SUMMARY_FIELDS
from controller.supervisor.rig import virtual_table
from controller.supervisor.wiring import build_telemetry
from controller.telemetry.broker import ENV_PASSWORD, ENV_USERNAME
from sim.mqtt_broker import EmbeddedBroker, embedded_broker_thread
from tests.broker.conftest import GUARD_S, client, next_message, payload

ROOT = Path(__file__).resolve().parents[2]


async def test_a_tables_telemetry_through_the_embedded_broker(
    broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's table publishes to the embedded broker: a subscriber sees every journal record on
    ``events`` in sequence, and one arriving later gets the retained ``status`` birth."""
    monkeypatch.delenv(ENV_USERNAME, raising=False)
    monkeypatch.delenv(ENV_PASSWORD, raising=False)
    path = table_file("down-under")
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    base = f"tablectl/{doc['table']['site']}/{doc['table']['id']}"
    journal = tmp_path / "journal.db"
    telemetry, forwarder = build_telemetry(
        load_table_config(path), f"mqtt://127.0.0.1:{broker.port}", journal
    )
    assert telemetry is not None
    async with client(broker, "floor") as floor:
        await floor.subscribe("tablectl/#", qos=1)
        async with virtual_table(path, journal, seed=3, boxes=2, telemetry=telemetry) as rig:
            forwarder.supervisor = rig.supervisor
            await rig.dealer.open_table()
            await rig.dealer.play(3)
            assert rig.supervisor.jt is not None
            last = rig.supervisor.jt.journal.last_seq
            assert last > 0
            events: list[int] = []
            while max(events, default=0) < last:
                m = await next_message(floor)
                if m.topic.value == f"{base}/events":
                    events.append(int(json.loads(payload(m))["seq"]))
            async with client(broker, "late") as late:
                await late.subscribe(f"{base}/status", qos=1)
                status = await next_message(late)
                assert status.retain and status.topic.value == f"{base}/status"
                assert json.loads(payload(status))["online"] is True
    assert _first_arrivals(events) == list(range(1, last + 1))


def _first_arrivals(seqs: list[int]) -> list[int]:
    """Each seq where it first arrived (QoS 1 may repeat one after a reconnect; none does here)."""
    first: list[int] = []
    for seq in seqs:
        if seq not in first:
            first.append(seq)
    return first


async def test_the_thread_runner_serves_another_loop_and_stops_cleanly() -> None:
    with embedded_broker_thread() as port:
        async with aiomqtt.Client("127.0.0.1", port, identifier="a") as a:
            await a.subscribe("t", qos=1)
            await a.publish("t", b"across threads", qos=1)
            assert payload(await next_message(a)) == b"across threads"
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def test_the_thread_runner_raises_a_start_error_in_the_caller() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError), embedded_broker_thread(port=taken.getsockname()[1]):
            pass


def test_demo_headless_with_the_embedded_broker(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", "demo", "--no-ui", "--rounds", "2", "--seed", "5",
         "--embedded-broker", "--journal", str(tmp_path / "j.db")],
        cwd=ROOT, capture_output=True, text=True, timeout=GUARD_S * 6,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["broker_kind"] == "embedded"
    assert summary["broker"].startswith("mqtt://127.0.0.1:")
    assert summary["rounds"] == 2 and summary["journal_verified"] is True
    assert "mqtt broker" not in done.stderr  # no client of the demo's was dropped or refused
    # Every field is explained in --help; the house's result per wager adds up.
    documented = re.findall(r"(?m)^  ([a-z_]+(?:, [a-z_]+)*) ", SUMMARY_FIELDS)
    assert set(summary) == {name for names in documented for name in names.split(", ")}
    bet = summary["house"]["bet"]
    assert bet["settled"] >= 2 and bet["staked"] >= 10 * bet["settled"]  # a sensed spot each, doubles more
    assert bet["house_edge"] == round(bet["house_net"] / bet["staked"], 4)


def test_demo_with_a_broker_survives_a_hostile_command(tmp_path: Path) -> None:
    """Issue 11: 3 KB of nested '[' on a command topic ended the demo's telemetry and the demo
    exited 1 with most of its journal unpublished. Retained, so the table gets it as it subscribes."""
    from controller.journal import Journal

    doc = tomllib.loads(table_file("down-under").read_text(encoding="utf-8"))
    base = f"tablectl/{doc['table']['site']}/{doc['table']['id']}"
    env = {k: v for k, v in os.environ.items() if k not in (ENV_USERNAME, ENV_PASSWORD)}
    journal = tmp_path / "j.db"

    async def publish(port: int) -> None:
        async with aiomqtt.Client("127.0.0.1", port, identifier="hostile") as c:
            await c.publish(f"{base}/cmd/reshuffle_ordered", b"[" * 3000, qos=1, retain=True)

    async def last_status(port: int) -> dict[str, object]:
        async with aiomqtt.Client("127.0.0.1", port, identifier="late") as c:
            await c.subscribe(f"{base}/status", qos=1)
            doc: dict[str, object] = json.loads(payload(await next_message(c)))
            return doc

    with embedded_broker_thread() as port:
        asyncio.run(publish(port))
        done = subprocess.run(
            [sys.executable, "-m", "controller.cli", "demo", "--no-ui", "--rounds", "3", "--seed", "5",
             "--broker", f"mqtt://127.0.0.1:{port}", "--journal", str(journal)],
            cwd=ROOT, capture_output=True, text=True, timeout=GUARD_S * 6, env=env,
        )  # fmt: skip
        status = asyncio.run(last_status(port))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["journal_verified"] is True
    assert status["online"] is False and status["clean"] is True  # a clean farewell, so it lived on
    with Journal.open(journal, create=False, readonly=True) as j:
        assert j.published_seq() == j.last_seq  # every record reached the broker
