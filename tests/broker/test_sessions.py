"""Connections and sessions: CONNECT refusals, client ids, credentials, keep alive, Last Will
(published on an abnormal end, never after DISCONNECT) and a second connection taking over a
client id."""

from __future__ import annotations

import pytest

from sim.mqtt_broker import EmbeddedBroker
from tests.broker.conftest import (
    DISCONNECT,
    PINGREQ,
    PINGRESP,
    Raw,
    Will,
    client,
    connect_packet,
    next_message,
    payload,
    raw,
    warnings,
)


@pytest.mark.parametrize(("protocol", "level"), [("MQTT", 3), ("MQTT", 5), ("MQTT", 0), ("MQIsdp", 4)])
async def test_an_unsupported_protocol_level_is_refused_with_0x01(
    broker: EmbeddedBroker, protocol: str, level: int
) -> None:
    conn = await Raw.open(broker.port)
    assert await conn.connect("old", protocol=protocol, level=level) == (0, 1)  # [MQTT-3.1.2-2]
    assert await conn.closed_by_peer() == b""
    assert broker.client_ids() == frozenset()


async def test_mqtt_3_1_is_accepted(broker: EmbeddedBroker) -> None:
    async with raw(broker) as conn:
        assert await conn.connect("legacy", protocol="MQIsdp", level=3) == (0, 0)
        await conn.send(PINGREQ)
        assert (await conn.read()).kind == PINGRESP


async def test_an_unknown_protocol_name_is_closed_without_connack(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    conn = await Raw.open(broker.port)
    await conn.send(connect_packet("x", protocol="HTTP", level=4))
    assert await conn.closed_by_peer() == b""  # [MQTT-3.1.2-1]: the server MAY just disconnect
    assert len(warnings(caplog)) == 1


async def test_an_empty_client_id_gets_one_assigned_with_a_clean_session(broker: EmbeddedBroker) -> None:
    async with raw(broker) as conn:
        assert await conn.connect("") == (0, 0)  # [MQTT-3.1.3-6]
        (assigned,) = broker.client_ids()
        assert assigned.startswith("auto-")
        async with raw(broker) as other:
            assert await other.connect("") == (0, 0)
            assert len(broker.client_ids()) == 2  # unique


async def test_an_empty_client_id_without_clean_session_is_rejected(broker: EmbeddedBroker) -> None:
    conn = await Raw.open(broker.port)
    assert await conn.connect("", clean=False) == (0, 2)  # [MQTT-3.1.3-8]
    assert await conn.closed_by_peer() == b""


async def test_clean_session_0_is_served_as_a_clean_one(broker: EmbeddedBroker) -> None:
    async with raw(broker) as conn:
        assert await conn.connect("keeper", clean=False) == (0, 0)  # session present 0: none kept


async def test_credentials_checked_when_the_broker_has_users() -> None:
    async with EmbeddedBroker(users={"table": "s3cret"}) as broker:
        for kw, code in [
            ({"username": "table", "password": "s3cret"}, 0),
            ({"username": "table", "password": "wrong"}, 4),
            ({"username": "table"}, 4),
            ({"username": "nobody", "password": "s3cret"}, 4),
            ({}, 5),
        ]:
            conn = await Raw.open(broker.port)
            flags, rc = await conn.connect("c", **kw)
            assert (flags, rc) == (0, code), kw
            if code:
                assert await conn.closed_by_peer() == b""
            await conn.close()
        async with client(broker, "ok", username="table", password="s3cret") as c:
            await c.subscribe("x", qos=1)
            await c.publish("x", b"in", qos=1)
            assert payload(await next_message(c)) == b"in"


async def test_pingreq_gets_pingresp(broker: EmbeddedBroker) -> None:
    async with raw(broker, "pinger", keepalive=60) as conn:
        for _ in range(3):
            await conn.send(PINGREQ)
            resp = await conn.read()
            assert (resp.kind, resp.flags, resp.body) == (PINGRESP, 0, b"")


async def test_will_on_an_abrupt_close(broker: EmbeddedBroker) -> None:
    async with client(broker, "watch") as watch:
        await watch.subscribe("will/#", qos=1)
        conn = await Raw.open(broker.port)
        assert await conn.connect("crashy", will=Will("will/crashy", b"gone", qos=1)) == (0, 0)
        conn.abort()
        m = await next_message(watch)
    assert (m.topic.value, payload(m), m.qos, m.retain) == ("will/crashy", b"gone", 1, False)


async def test_will_when_keep_alive_expires(broker: EmbeddedBroker) -> None:
    """Silent for 1.5 x its 1 s keep alive: the broker closes it and publishes its Will [MQTT-3.1.2-24]."""
    async with client(broker, "watch") as watch:
        await watch.subscribe("will/#", qos=1)
        conn = await Raw.open(broker.port)
        assert await conn.connect("silent", keepalive=1, will=Will("will/silent", b"timed out")) == (0, 0)
        m = await next_message(watch)
        assert (m.topic.value, payload(m)) == ("will/silent", b"timed out")
        assert await conn.closed_by_peer() == b""


async def test_no_will_after_disconnect(broker: EmbeddedBroker) -> None:
    async with client(broker, "watch") as watch, client(broker, "pub") as pub:
        await watch.subscribe("will/#", qos=1)
        conn = await Raw.open(broker.port)
        assert await conn.connect("polite", will=Will("will/polite", b"should not appear")) == (0, 0)
        await conn.send(DISCONNECT)
        assert await conn.closed_by_peer() == b""  # the broker has finished with it [MQTT-3.14.4-3]
        await pub.publish("will/marker", b"after", qos=1)
        m = await next_message(watch)
    assert (m.topic.value, payload(m)) == ("will/marker", b"after")


async def test_a_retained_will_is_kept_for_later_subscribers(broker: EmbeddedBroker) -> None:
    conn = await Raw.open(broker.port)
    assert await conn.connect("t1", will=Will("status/t1", b"offline", qos=1, retain=True)) == (0, 0)
    async with client(broker, "watch") as watch:
        await watch.subscribe("status/#", qos=1)
        conn.abort()
        m = await next_message(watch)
        assert (payload(m), m.retain) == (b"offline", False)  # live subscription: RETAIN 0 [MQTT-3.3.1-9]
    async with client(broker, "later") as later:
        await later.subscribe("status/#", qos=1)
        m = await next_message(later)
        assert (m.topic.value, payload(m), m.retain, m.qos) == ("status/t1", b"offline", True, 1)


async def test_a_second_connection_with_the_same_client_id_takes_over(broker: EmbeddedBroker) -> None:
    """[MQTT-3.1.4-2]: the existing connection is closed. It never sent DISCONNECT, so its Will is
    published [MQTT-3.1.2-8]; the new connection has a session of its own (clean) and works."""
    async with client(broker, "watch") as watch:
        await watch.subscribe("will/#", qos=1)
        first = await Raw.open(broker.port)
        assert await first.connect("table-1", will=Will("will/table-1", b"first gone")) == (0, 0)
        async with raw(broker) as second:
            assert await second.connect("table-1") == (0, 0)
            assert await first.closed_by_peer() == b""
            m = await next_message(watch)
            assert (m.topic.value, payload(m)) == ("will/table-1", b"first gone")
            assert broker.client_ids() == {"watch", "table-1"}
            await second.send(PINGREQ)
            assert (await second.read()).kind == PINGRESP
            await second.send(DISCONNECT)
            assert await second.closed_by_peer() == b""
        assert broker.client_ids() == {"watch"}


async def test_aiomqtt_reconnecting_with_its_id_replaces_the_old_connection(broker: EmbeddedBroker) -> None:
    async with client(broker, "same") as a:
        await a.subscribe("x", qos=1)
        async with client(broker, "same") as b, client(broker, "pub") as pub:
            await b.subscribe("x", qos=1)
            await pub.publish("x", b"to the new one", qos=1)
            assert payload(await next_message(b)) == b"to the new one"


async def test_stop_closes_every_client() -> None:
    broker = EmbeddedBroker()
    await broker.start()
    conns = [await Raw.open(broker.port) for _ in range(3)]
    for i, conn in enumerate(conns):
        assert await conn.connect(f"c{i}", will=Will("w", b"x")) == (0, 0)
    pending = await Raw.open(broker.port)  # connected, no CONNECT yet
    await broker.stop()
    for conn in [*conns, pending]:
        assert await conn.closed_by_peer() == b""
        await conn.close()
    assert broker.client_ids() == frozenset()
