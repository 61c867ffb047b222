"""The appliance end to end over MQTT: simulated devices on the wire, the supervisor, its journal,
and telemetry to a real mosquitto with TLS, passwords and the shipped ACL. A floor console sees
the table's birth, state and events, and its command reaches the table and is journalled with who
sent it; a malformed one changes nothing (issue 6)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import aiomqtt
import pytest

from controller.appliance.wiring import build_telemetry
from controller.journal import Journal
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import virtual_table
from tests.support.flat_table import flat_text
from tests.telemetry.conftest import PASSWORD, Broker, observer

ROOT = Path(__file__).resolve().parents[2]


def table_file(tmp_path: Path, broker: Broker) -> Path:
    """config/tables/down-under.toml as table site-a/t1, with the test broker's CA."""
    src = ROOT / "config" / "tables" / "down-under.toml"
    text = flat_text(src)
    doc = tomllib.loads(text)
    text = text.replace(f'id = "{doc["table"]["id"]}"', 'id = "t1"', 1)
    text = text.replace(f'site = "{doc["table"]["site"]}"', 'site = "site-a"', 1)
    text = text.replace('"../', f'"{src.parent.parent}/')
    text += f'\n[telemetry]\nca_file = "{broker.pki / "ca.crt"}"\n'
    path = tmp_path / "t1.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def send(broker: Broker, name: str, body: dict[str, object]) -> None:
    s = broker.settings("floor-console")
    async with aiomqtt.Client(
        s.host, s.port, username=s.username, password=s.password, tls_context=s.tls_context()
    ) as client:
        await client.publish(f"tablectl/site-a/t1/cmd/{name}", json.dumps(body), qos=1)


async def test_floor_commands_reach_the_table_over_mqtt(
    broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TABLECTL_MQTT_USERNAME", "site-a/t1")
    monkeypatch.setenv("TABLECTL_MQTT_PASSWORD", PASSWORD["site-a/t1"])
    path = table_file(tmp_path, broker)
    journal = tmp_path / "t1.db"
    telemetry, forwarder = build_telemetry(
        load_table_config(path), f"mqtts://127.0.0.1:{broker.port}", journal
    )
    assert telemetry is not None
    async with (
        observer(broker) as floor,
        virtual_table(path, journal, seed=3, boxes=2, telemetry=telemetry) as rig,
    ):
        forwarder.supervisor = rig.supervisor
        await rig.dealer.open_table()
        await rig.dealer.play(3)
        await floor.wait_for(
            lambda ms: any(m.topic.endswith("/status") and m.json().get("online") for m in ms)
        )
        await floor.wait_for(lambda ms: any(m.topic.endswith("/events") for m in ms))

        await send(
            broker, "reshuffle_ordered", {"version": 1, "id": "r1", "who": "floor-ann", "role": "floor"}
        )
        await floor.wait_for(lambda ms: any(m.topic.endswith("cmd/reshuffle_ordered/result") for m in ms))
        (result,) = [m.json() for m in floor.on("cmd/reshuffle_ordered/result")]
        assert result["ok"] is True, result

        # Issue 11: out of order and back, over MQTT, each journalled with who sent it.
        for name in ("mark_out_of_order", "device_restored"):
            body = {
                "version": 1,
                "id": name,
                "who": "floor-bo",
                "role": "floor",
                "args": {"device": "keypad"},
            }
            await send(broker, name, body)
            await floor.wait_for(lambda ms, n=name: any(m.topic.endswith(f"cmd/{n}/result") for m in ms))
            (done,) = [m.json() for m in floor.on(f"cmd/{name}/result")]
            assert done["ok"] is True, done

        before = rig.supervisor.jt.journal.last_seq if rig.supervisor.jt else 0
        await send(
            broker,
            "alarm_acknowledged",
            {"version": 1, "id": "a1", "who": "floor-ann", "role": "floor", "args": {"alarm": "one"}},
        )
        await floor.wait_for(lambda ms: any(m.topic.endswith("cmd/alarm_acknowledged/result") for m in ms))
        (refused,) = [m.json() for m in floor.on("cmd/alarm_acknowledged/result")]
        assert refused["ok"] is False and "\n" not in refused["error"]
        assert (rig.supervisor.jt.journal.last_seq if rig.supervisor.jt else 0) == before  # nothing changed

        # Every journalled record reaches the events stream by sequence number, none missing.
        last = rig.supervisor.jt.journal.last_seq if rig.supervisor.jt else 0
        await floor.wait_for(
            lambda ms: max((m.json()["seq"] for m in floor.on("/events")), default=0) >= last
        )
    seqs = sorted({m.json()["seq"] for m in floor.on("/events")})
    assert seqs == list(range(seqs[0], seqs[-1] + 1))
    with Journal.open(journal, create=False, readonly=True) as j:
        reshuffles = [r for r in j.records() if r.kind == "reshuffle_ordered"]
    assert [r.payload["by"] for r in reshuffles if r.payload.get("reason") == "floor"] == ["floor-ann"]
    with Journal.open(journal, create=False, readonly=True) as j:
        marks = [
            (r.kind, r.payload["by"])
            for r in j.records()
            if r.kind.startswith("device_") and "by" in r.payload
        ]
    assert marks == [("device_out_of_order", "floor-bo"), ("device_restored", "floor-bo")]
