"""The public contract (controller/telemetry/contract.py): the shipped JSON Schemas are exactly
what the code's types generate, each is a valid Draft 2020-12 schema, and every message a demo
run and a wire run (`tablectl run` beside `tablectl sim --dealer`, floor commands over MQTT)
publish validates against the schema of its topic, with `schema_version` on each.

After a change to a payload type (another helper's field, a new ask), regenerate the files with
`python -m controller.telemetry.contract` and commit them: the first test says so."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import paho.mqtt.client as paho
import pytest

from controller.console.display import display
from controller.telemetry.contract import SCHEMA_DIR, render, schemas
from tests.relocated import relocated_table
from tests.supervisor.conftest import tablectl

GUARD_S = 180.0  # failure guard only


def test_the_shipped_schemas_are_a_fresh_generation() -> None:
    fresh = schemas()
    shipped = sorted(p.name for p in SCHEMA_DIR.glob("*.json"))
    assert shipped == sorted(fresh), "run: python -m controller.telemetry.contract"
    for name, schema in fresh.items():
        assert (SCHEMA_DIR / name).read_text(encoding="utf-8") == render(schema), (
            f"{name} is stale: run python -m controller.telemetry.contract"
        )
        jsonschema.Draft202012Validator.check_schema(schema)


def _validators() -> dict[str, jsonschema.Draft202012Validator]:
    return {n.removesuffix(".json"): jsonschema.Draft202012Validator(s) for n, s in schemas().items()}


def schema_of(topic: str) -> str:
    parts = topic.split("/")
    if parts[2] == "archive":
        return "archive"
    if parts[-1] == "result":
        return "results"
    if len(parts) >= 5 and parts[3] == "cmd":
        return "commands"
    if len(parts) >= 5 and parts[3] == "devices":
        return "devices"
    return parts[3]


@contextlib.contextmanager
def collected(port: int) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every message on tablectl/# while the block runs (paho in its own thread)."""
    got: list[tuple[str, dict[str, Any]]] = []
    ready = threading.Event()
    client = paho.Client(paho.CallbackAPIVersion.VERSION2)
    client.on_connect = lambda c, *_: (c.subscribe("tablectl/#", qos=1), ready.set())
    client.on_message = lambda c, u, m: got.append((m.topic, json.loads(m.payload))) if m.payload else None
    client.connect("127.0.0.1", port)
    client.loop_start()
    assert ready.wait(GUARD_S)
    try:
        yield got
    finally:
        client.loop_stop()
        client.disconnect()


def assert_all_valid(messages: list[tuple[str, dict[str, Any]]], must_see: set[str]) -> None:
    validators = _validators()
    seen: set[str] = set()
    for topic, message in messages:
        name = schema_of(topic)
        errors = sorted(validators[name].iter_errors(message), key=lambda e: list(e.path))
        assert not errors, f"{topic}: {errors[0].message} at {list(errors[0].path)}"
        assert message.get("schema_version") == 1 or name == "commands", topic
        seen.add(name)
    assert must_see <= seen, seen


@pytest.mark.parametrize("game", ["double-attack", "dj-wild"])
def test_every_message_of_a_demo_run_validates(game: str, broker_port: int) -> None:
    with collected(broker_port) as messages:
        demo = subprocess.run(
            [*tablectl_argv(), "demo", "--game", game, "--rounds", "6", "--no-ui",
             "--broker", f"mqtt://127.0.0.1:{broker_port}"],
            capture_output=True, text=True, timeout=GUARD_S, cwd=Path(__file__).parents[2],
        )  # fmt: skip
        assert demo.returncode == 0, demo.stderr[-2000:]
    assert_all_valid(messages, {"status", "state", "events", "alarms", "devices"})
    asks = {
        m["snapshot"]["asking"]["what"]
        for t, m in messages
        if t.endswith("/state") and "asking" in m["snapshot"]
    }
    assert "bets" in asks


def tablectl_argv() -> list[str]:
    import sys

    return [sys.executable, "-m", "controller.cli"]


def test_every_message_of_a_wire_run_validates(tmp_path: Path, broker_port: int) -> None:
    broker = f"mqtt://127.0.0.1:{broker_port}"
    config = relocated_table("double-back-jack", tmp_path)
    config.write_text(re.sub(r"(?m)^cycle_s = \d+", "cycle_s = 1", config.read_text(encoding="utf-8")))
    with collected(broker_port) as messages:
        sim = tablectl(
            "sim", "--config", config, "--dealer", "--rounds", "4", "--broker", broker, "--seed", "3"
        )
        run = None
        try:
            assert sim.stdout is not None
            for _ in range(4):
                assert " at=" in sim.stdout.readline()
            run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db", "--broker", broker,
                           "--log-level", "warning")  # fmt: skip
            _, err = sim.communicate(timeout=GUARD_S)
            assert sim.returncode == 0, err
        finally:
            for proc in (sim, run):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.communicate(timeout=GUARD_S)
    assert_all_valid(messages, {"status", "state", "events", "alarms", "devices", "commands", "results"})
    asks = [m["snapshot"].get("asking") or {} for t, m in messages if t.endswith("/state")]
    offers = [a for a in asks if a.get("what") == "offer"]
    for ask in offers:
        assert {a["key"] for a in ask["answers"]} == set(ask["legal"]) and "next" in ask["legal"]


def test_the_display_validates() -> None:
    snapshot = {"table": "t", "site": "s", "game": "down-under", "devices": {"shoe": "online"}, "round": 3,
                "in_round": True, "halted": [{"id": 1, "section": "685a.12(i)", "message": "m"}],
                "alarms": [{"id": 1, "section": "685a.12(i)", "message": "m", "floor_action": "f"}],
                "batches": {"red": {"location": "shoe", "shuffler": "unshuffled"}}}  # fmt: skip
    out = display(snapshot, {"shoe": "shoe"}, {"who": "dealer", "what": "bets"}, "dealer-1")
    errors = list(_validators()["display"].iter_errors(out))
    assert not errors, errors[0].message
