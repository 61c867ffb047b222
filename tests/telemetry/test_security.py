"""The broker set-up and the controller refuse what they must: Last Will on SIGKILL, the ACL
(no publishing as another table, no commands but the floor's) and malformed commands."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import sys
from typing import Any

import aiomqtt
import pytest

from controller.actions import ACTIONS
from controller.errors import ConfigError
from controller.journal import Journal
from controller.telemetry import COMMANDS, parse_broker_url, telemetry_from_config
from controller.telemetry.commands import Refused, parse_command
from tests.telemetry.conftest import PASSWORD, ROOT, Broker, observer
from tests.telemetry.helpers import append_records, telemetry_for

T1 = "tablectl/site-a/t1"
T2 = "tablectl/site-a/t2"


async def test_last_will_on_sigkill_is_retained(broker: Broker, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "j.db"
    Journal.open(path).close()
    env = {**os.environ, "TABLECTL_MQTT_PASSWORD": PASSWORD["site-a/t2"]}
    async with observer(broker, topic=f"{T2}/status") as obs:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.telemetry.child_publisher",
            str(broker.port),
            str(broker.pki / "ca.crt"),
            str(path),
            cwd=ROOT,
            env=env,
        )
        try:
            await obs.wait_for(lambda ms: any(m.json()["online"] is True for m in ms))
            birth, incarnation = (obs.messages[-1].json()[k] for k in ("birth", "incarnation"))
            child.send_signal(signal.SIGKILL)
            await child.wait()
            await obs.wait_for(lambda ms: ms[-1].json()["online"] is False)
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
        will = obs.messages[-1].json()
        assert will == {
            "version": 1,
            "schema_version": 1,
            "online": False,
            "clean": False,
            "birth": birth,
            "incarnation": incarnation,  # the will names the process it speaks for
            "site": "site-a",
            "table": "t2",
        }
    async with observer(broker, "monitor-ops", f"{T2}/status") as late:
        await late.wait_for(lambda ms: bool(ms))
        assert late.messages[0].retain and late.messages[0].json()["clean"] is False


async def _publish(broker: Broker, user: str, messages: list[tuple[str, bytes]]) -> None:
    s = broker.settings(user)
    async with aiomqtt.Client(
        s.host, s.port, username=s.username, password=s.password, tls_context=s.tls_context()
    ) as client:
        for topic, body in messages:
            await client.publish(topic, body, qos=1)


async def test_an_appliance_cannot_publish_as_another_table(broker: Broker) -> None:
    forged = b'{"version":1,"seq":1,"kind":"round_started","payload":{}}'
    sentinel = b'{"version":1,"online":true,"birth":"sentinel"}'
    async with observer(broker, "floor-console") as obs:
        await _publish(
            broker,
            "site-a/t1",
            [
                (f"{T2}/events", forged),
                (f"{T2}/status", forged),
                ("tablectl/site-b/t1/events", forged),
                ("tablectl/site-a/t1x/events", forged),
                (f"{T2}/cmd/reshuffle_ordered/result", forged),
                (f"{T1}/cmd/reshuffle_ordered", forged),  # not even a command to itself
                (f"{T1}/status", sentinel),  # allowed, and sent last by the same client
            ],
        )
        # The broker keeps one client's messages in order: the sentinel arriving means the rest was dropped.
        await obs.wait_for(lambda ms: any(m.payload == sentinel for m in ms))
        assert [m.topic for m in obs.messages] == [f"{T1}/status"]


async def test_only_the_floor_may_command_a_table(broker: Broker, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "j.db"
    Journal.open(path).close()
    calls: list[tuple[str, dict[str, Any], str, str]] = []

    async def command(name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        calls.append((name, args, who, role))
        return {"ok": True, "message": "reshuffle ordered"}

    telemetry = telemetry_for(broker, path, command=command)
    await telemetry.start()
    try:
        async with observer(broker, "floor-console", f"{T1}/#") as obs:
            await obs.wait_for(lambda ms: any(m.topic.endswith("/status") and m.json()["online"] for m in ms))
            body = json.dumps({"version": 1, "id": "x", "who": "mallory", "role": "floor"}).encode()
            await _publish(broker, "site-a/t2", [(f"{T1}/cmd/reshuffle_ordered", body)])
            await _publish(broker, "monitor-ops", [(f"{T1}/cmd/reshuffle_ordered", body)])
            probe = json.dumps({"version": 1, "id": "probe", "who": "floor-7", "role": "floor"}).encode()
            await _publish(broker, "floor-console", [(f"{T1}/cmd/reshuffle_ordered", probe)])
            await obs.wait_for(lambda ms: any(m.topic.endswith("/result") for m in ms))
            results = [m.json() for m in obs.on("/result")]
    finally:
        await telemetry.stop()
    assert calls == [("reshuffle_ordered", {}, "floor-7", "floor")]
    assert results == [
        {
            "version": 1,
            "schema_version": 1,
            "command": "reshuffle_ordered",
            "id": "probe",
            "who": "floor-7",
            "ok": True,
            "message": "reshuffle ordered",
        }
    ]


async def test_the_archive_may_only_ask_for_records_again(broker: Broker, tmp_path: pathlib.Path) -> None:
    """The archive's account publishes cmd/republish and nothing else (the ACL drops the rest);
    the table sends the records again byte for byte (placeholders stay placeholders) and names
    what its journal does not hold. Refused: a range too long, backwards, or from a dealer."""
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        last = append_records(journal, 12)
    calls: list[str] = []

    async def command(name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        calls.append(name)
        return {"ok": True}

    def ask(i: str, first: int, to: int, role: str = "archive") -> bytes:
        doc = {
            "version": 1,
            "id": i,
            "who": "archive-1",
            "role": role,
            "args": {"from_seq": first, "to_seq": to},
        }
        return json.dumps(doc).encode()

    telemetry = telemetry_for(broker, path, command=command)
    # Subscribed before the table starts: the events are not retained, so an observer that came in
    # after the table had published them (a slow TLS handshake) would wait for them in vain.
    async with observer(broker, "floor-console", f"{T1}/#") as obs:
        await telemetry.start()
        try:
            await obs.wait_for(lambda ms: len(ms_on(ms, "/events")) >= last)
            first_time = [m.payload for m in obs.on("/events")]
            void = json.dumps({"version": 1, "id": "v", "who": "archive-1", "role": "floor"}).encode()
            await _publish(
                broker,
                "archive-1",
                [
                    (f"{T1}/cmd/no_gaming_activity", void),  # dropped by the ACL
                    (f"{T1}/cmd/republish", ask("r1", 3, 7)),
                    (f"{T1}/cmd/republish", ask("r2", 11, 15)),
                    (f"{T1}/cmd/republish", ask("r3", 1, 10_001)),
                    (f"{T1}/cmd/republish", ask("r4", 5, 4)),
                    (f"{T1}/cmd/republish", ask("r5", 1, 2, role="dealer")),
                ],
            )
            await obs.wait_for(lambda ms: len(ms_on(ms, "/result")) >= 5)
            results = {m.json()["id"]: m.json() for m in obs.on("/result")}
            again = [m.payload for m in obs.on("/events")][last:]
        finally:
            await telemetry.stop()
    assert calls == [] and set(results) == {"r1", "r2", "r3", "r4", "r5"}
    assert results["r1"]["ok"] and results["r1"]["republished"] == 5
    assert results["r2"]["missing_from"] == 13 and results["r2"]["missing_to"] == 15
    assert "not in this table's journal" in results["r2"]["error"] and results["r2"]["republished"] == 2
    assert "at most 10000" in results["r3"]["error"] and "before" in results["r4"]["error"]
    assert "role may not command republish" in results["r5"]["error"]
    assert again == first_time[2:7] + first_time[10:12]  # exactly as the first time


def ms_on(messages: list[Any], suffix: str) -> list[Any]:
    return [m for m in messages if m.topic.endswith(suffix)]


BAD_COMMANDS = [
    # Issue 11: 3 KB of nested '[' raised RecursionError and ended the telemetry task; the results
    # of every command after it prove the listener lives on.
    ("reshuffle_ordered", b"[" * 3000, "nested deeper than"),
    ("reshuffle_ordered", b"not json", "not valid JSON"),
    ("reshuffle_ordered", b"[1, 2]", "JSON object"),
    ("reshuffle_ordered", b'{"version": 1, "id": "b1", "who": "f", "role": "dealer"}', "role"),
    ("reshuffle_ordered", b'{"version": 2, "id": "b2", "who": "f", "role": "floor"}', "version"),
    ("reshuffle_ordered", b'{"version": 1, "id": "b3", "role": "floor"}', "who"),
    (
        "reshuffle_ordered",
        b'{"version": 1, "id": "b4", "who": "f", "role": "floor", "sudo": true}',
        "unknown keys",
    ),
    ("alarm_acknowledged", b'{"version": 1, "id": "b5", "who": "f", "role": "floor", "args": {}}', "missing"),
    (
        "alarm_acknowledged",
        b'{"version":1,"id":"b6","who":"f","role":"floor","args":{"alarm":"1"}}',
        "integer",
    ),
    (
        "alarm_acknowledged",
        b'{"version":1,"id":"b7","who":"f","role":"floor","args":{"alarm":true}}',
        "integer",
    ),
    ("first_player_seated", b'{"version":1,"id":"b8","who":"f","role":"floor","args":{"seat":9}}', "range"),
    ("new_dealer", b'{"version":1,"id":"b9","who":"f","role":"floor","args":{"name":"a\\nb"}}', "one-line"),
    (
        "reshuffle_ordered",
        b'{"version":1,"id":"b10","who":"f","role":"floor","args":{"x":1}}',
        "unknown argument",
    ),
    ("shutdown", b'{"version":1,"id":"b11","who":"f","role":"floor"}', "unknown command"),
    ("reshuffle_ordered", b'{"version":1,"id":"' + b"x" * 5000 + b'"}', "larger"),
]


async def test_a_malformed_command_is_refused_and_changes_nothing(
    broker: Broker, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        last = append_records(journal, 5)
    calls: list[str] = []

    async def command(name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        calls.append(name)
        return {"ok": True}

    telemetry = telemetry_for(broker, path, command=command)
    await telemetry.start()
    try:
        async with observer(broker, "floor-console", f"{T1}/#") as obs:
            # The table's birth comes after its subscription to commands: a command sent before
            # it is subscribed is dropped by the broker, and its result never comes.
            await obs.wait_for(lambda ms: any(m.topic.endswith("/status") and m.json()["online"] for m in ms))
            await _publish(broker, "floor-console", [(f"{T1}/cmd/{n}", b) for n, b, _ in BAD_COMMANDS])
            await obs.wait_for(
                lambda ms: len([m for m in ms if m.topic.endswith("/result")]) == len(BAD_COMMANDS)
            )
            results = [m.json() for m in obs.on("/result")]
    finally:
        await telemetry.stop()
    assert calls == []
    for (name, _, why), result in zip(BAD_COMMANDS, results, strict=True):
        assert result["ok"] is False and result["command"] == name
        assert why in result["error"], (why, result)
    with Journal.open(path) as journal:
        assert journal.last_seq == last


def test_mqtt_takes_the_floor_s_actions_from_the_one_allow_list() -> None:
    assert set(COMMANDS) == {n for n, a in ACTIONS.items() if "floor" in a.roles}
    assert {"shuffler_restored", "device_restored", "void_round", "recut_ordered"} <= set(COMMANDS)


def test_an_unknown_or_refused_command_keeps_its_id() -> None:
    for name, body in [
        ("shutdown", b'{"version":1,"id":"u1","who":"f","role":"floor"}'),
        ("hand_shuffled", b'{"version":1,"id":"u2","who":"f","role":"floor","args":{"back":"red"}}'),
    ]:
        with pytest.raises(Refused) as refused:
            parse_command(name, body)
        assert refused.value.request_id == body.split(b'"id":"')[1][:2].decode()
        assert refused.value.who == "f"


def test_broker_urls() -> None:
    assert parse_broker_url("mqtt://broker") == (False, "broker", 1883)
    assert parse_broker_url("mqtts://10.0.0.5:9883") == (True, "10.0.0.5", 9883)
    for bad in ("http://x:1", "mqtt://", "mqtts://x:99999", "mqtt://x:1/path", "x:1"):
        with pytest.raises(ConfigError):
            parse_broker_url(bad)
    with pytest.raises(ConfigError) as e:
        parse_broker_url("mqtts://user:s3cret@broker:8883")
    assert "s3cret" not in str(e.value)


def test_telemetry_from_config(tmp_path: pathlib.Path, pki: pathlib.Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes((pki / "ca.crt").read_bytes())  # a real one: a non-certificate is refused
    doc: dict[str, Any] = {
        "table": {"id": "dab-01", "site": "example-floor", "game": "../games/double-attack.toml"},
        "telemetry": {
            "broker": "mqtts://b:8883",
            "ca_file": "ca.crt",
            "username": "u",
            "password": "from-file",
        },
    }
    assert telemetry_from_config({"table": doc["table"]}, tmp_path, None, tmp_path / "j.db") is None
    t = telemetry_from_config(
        doc, tmp_path, None, tmp_path / "j.db", environ={"TABLECTL_MQTT_PASSWORD": "env"}
    )
    assert t is not None
    assert (t.broker.host, t.broker.port, t.broker.tls, t.broker.ca_file) == ("b", 8883, True, ca)
    assert (t.broker.username, t.broker.password) == ("u", "env")  # the environment wins
    assert "env" not in repr(t.broker) and "from-file" not in repr(t.broker)
    assert t.topics.status == "tablectl/example-floor/dab-01/status"
    assert t.identity.game == "double-attack" and t.identity.config_hash.startswith("sha256:")
    t2 = telemetry_from_config(doc, tmp_path, "mqtt://other:1884", tmp_path / "j.db", environ={})
    assert t2 is not None and (t2.broker.host, t2.broker.tls, t2.broker.password) == (
        "other",
        False,
        "from-file",
    )
    # the hash does not depend on (nor reveal) the broker section
    assert t2.identity.config_hash == t.identity.config_hash
    for broken in (
        {**doc, "telemetry": {**doc["telemetry"], "require_tls": True}},
        {**doc, "table": {**doc["table"], "id": "a/b"}},
        {**doc, "telemetry": {**doc["telemetry"], "ca_file": "missing.crt"}},
    ):
        with pytest.raises(ConfigError):
            telemetry_from_config(broken, tmp_path, "mqtt://other:1884", tmp_path / "j.db", environ={})
