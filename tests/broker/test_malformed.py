"""Malformed and out-of-order packets: each closes only the connection that sent it (publishing its
Will if it had one), logs one line naming the rule, and the broker goes on serving the others."""

from __future__ import annotations

import logging

import pytest

from sim.mqtt_broker import EmbeddedBroker
from tests.broker.conftest import (
    LOGGER,
    PINGREQ,
    Raw,
    Will,
    client,
    connect_packet,
    id_packet,
    next_message,
    packet,
    payload,
    publish_packet,
    s,
    subscribe_packet,
    unsubscribe_packet,
    warnings,
)

# (what, bytes sent after an accepted CONNECT, a piece of the log line)
AFTER_CONNECT = [
    ("remaining length of five bytes", b"\x30\xff\xff\xff\xff\x01", "four bytes"),
    ("reserved packet type 0", b"\x00\x00", "reserved control packet type"),
    ("reserved packet type 15", b"\xf0\x00", "reserved control packet type"),
    ("SUBSCRIBE flags 0000", subscribe_packet(1, ("a", 0)).replace(b"\x82", b"\x80", 1), "MQTT-2.2.2-2"),
    ("UNSUBSCRIBE flags 0000", unsubscribe_packet(1, "a").replace(b"\xa2", b"\xa0", 1), "MQTT-2.2.2-2"),
    ("PUBREL flags 0000", id_packet(0x60, 1), "MQTT-2.2.2-2"),
    ("PUBACK flags 0010", id_packet(0x42, 1), "MQTT-2.2.2-2"),
    ("PINGREQ flags 0001", b"\xc1\x00", "MQTT-2.2.2-2"),
    ("DISCONNECT flags 1000", b"\xe8\x00", "MQTT-2.2.2-2"),
    ("PUBLISH QoS 3", packet(0x36, s("a") + b"\x00\x01x"), "MQTT-3.3.1-4"),
    ("PUBLISH DUP at QoS 0", publish_packet("a", b"x", dup=True), "MQTT-3.3.1-2"),
    ("PUBLISH topic not UTF-8", publish_packet(b"bad\xff\xfe", b"x"), "MQTT-1.5.3-1"),
    ("PUBLISH topic with a surrogate", publish_packet(b"a\xed\xa0\x80", b"x"), "MQTT-1.5.3-1"),
    ("PUBLISH topic with U+0000", publish_packet(b"a\x00b", b"x"), "MQTT-1.5.3-2"),
    ("PUBLISH topic with +", publish_packet("a/+/c", b"x"), "MQTT-3.3.2-2"),
    ("PUBLISH topic with #", publish_packet("a/#", b"x"), "MQTT-3.3.2-2"),
    ("PUBLISH empty topic", publish_packet("", b"x"), "MQTT-4.7.3-1"),
    ("PUBLISH packet id 0", publish_packet("a", b"x", qos=1, packet_id=0), "MQTT-2.3.1-1"),
    ("PUBLISH topic longer than the packet", packet(0x30, b"\x00\x09abc"), "ends inside a field"),
    ("SUBSCRIBE without filters", packet(0x82, b"\x00\x01"), "MQTT-3.8.3-3"),
    ("SUBSCRIBE requested QoS 3", subscribe_packet(1, ("a", 3)), "MQTT-3-8.3-4"),
    ("SUBSCRIBE reserved QoS bits", subscribe_packet(1, ("a", 0x81)), "MQTT-3-8.3-4"),
    ("SUBSCRIBE # not last", subscribe_packet(1, ("a/#/b", 0)), "MQTT-4.7.1-2"),
    ("SUBSCRIBE + inside a level", subscribe_packet(1, ("a/b+", 0)), "MQTT-4.7.1-3"),
    ("UNSUBSCRIBE without filters", packet(0xA2, b"\x00\x01"), "MQTT-3.10.3-2"),
    ("PUBACK with extra bytes", packet(0x40, b"\x00\x01\x00"), "unexpected bytes"),
    ("PINGREQ with a body", packet(0xC0, b"\x00"), "remaining length of 1"),
    ("a second CONNECT", connect_packet("again"), "MQTT-3.1.0-2"),
    ("CONNACK from a client", packet(0x20, b"\x00\x00"), "from a client"),
    ("SUBACK from a client", packet(0x90, b"\x00\x01\x00"), "from a client"),
    ("over the size limit", b"\x30\xff\xff\x7f", "over this broker's limit"),
]

# (what, bytes sent first, a piece of the log line): no session, so no Will
BEFORE_CONNECT = [
    ("PINGREQ before CONNECT", PINGREQ, "MQTT-3.1.0-1"),
    ("PUBLISH before CONNECT", publish_packet("a", b"x"), "MQTT-3.1.0-1"),
    ("CONNECT reserved flag", connect_packet("c").replace(b"\x04\x02", b"\x04\x03", 1), "MQTT-3.1.2-3"),
    (
        "CONNECT will QoS without will",
        connect_packet("c").replace(b"\x04\x02", b"\x04\x0a", 1),
        "MQTT-3.1.2-13",
    ),
    (
        "CONNECT will retain without will",
        connect_packet("c").replace(b"\x04\x02", b"\x04\x22", 1),
        "MQTT-3.1.2-15",
    ),
    ("CONNECT will QoS 3", connect_packet("c", will=Will("w", b"x", qos=3)), "MQTT-3.1.2-14"),
    (
        "CONNECT password without user",
        connect_packet("c").replace(b"\x04\x02", b"\x04\x42", 1),
        "MQTT-3.1.2-22",
    ),
    ("CONNECT will topic with a wildcard", connect_packet("c", will=Will("w/#", b"x")), "MQTT-3.3.2-2"),
    (
        "CONNECT client id not UTF-8",
        packet(0x10, s("MQTT") + b"\x04\x02\x00\x00" + s(b"\xc3\x28")),
        "MQTT-1.5.3-1",
    ),
    ("CONNECT truncated", packet(0x10, s("MQTT") + b"\x04\x02\x00"), "ends inside a field"),
    ("CONNECT with trailing bytes", packet(0x10, connect_packet("c")[2:] + b"!"), "unexpected bytes"),
]


async def _still_serving(broker: EmbeddedBroker, watch_id: str = "watch") -> None:
    async with client(broker, "prober") as prober:
        await prober.subscribe("probe", qos=1)
        await prober.publish("probe", b"alive", qos=1)
        assert payload(await next_message(prober)) == b"alive"
    assert watch_id in broker.client_ids()


@pytest.mark.parametrize(("what", "data", "rule"), AFTER_CONNECT, ids=[c[0] for c in AFTER_CONNECT])
async def test_a_malformed_packet_closes_only_its_sender_and_publishes_its_will(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture, what: str, data: bytes, rule: str
) -> None:
    async with client(broker, "watch") as watch:
        await watch.subscribe("will/#", qos=1)
        bad = await Raw.open(broker.port)
        assert await bad.connect("offender", will=Will("will/offender", b"broke the rules")) == (0, 0)
        await bad.send(data)
        assert await bad.closed_by_peer() == b""
        m = await next_message(watch)
        assert (m.topic.value, payload(m)) == ("will/offender", b"broke the rules")
        await _still_serving(broker)
    (line,) = warnings(caplog)
    assert "'offender'" in line and rule in line and "\n" not in line


@pytest.mark.parametrize(("what", "data", "rule"), BEFORE_CONNECT, ids=[c[0] for c in BEFORE_CONNECT])
async def test_a_bad_first_packet_closes_the_connection_without_connack(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture, what: str, data: bytes, rule: str
) -> None:
    async with client(broker, "watch"):
        bad = await Raw.open(broker.port)
        await bad.send(data)
        assert await bad.closed_by_peer() == b""  # no CONNACK [MQTT-3.1.4-1]
        await _still_serving(broker)
    (line,) = warnings(caplog)
    assert rule in line and "\n" not in line


async def test_a_connection_that_never_sends_connect_is_closed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with EmbeddedBroker(connect_timeout=0.2) as broker:
        idle = await Raw.open(broker.port)
        assert await idle.closed_by_peer() == b""
    assert any("no CONNECT within" in r.getMessage() for r in caplog.records)


async def test_a_packet_split_across_many_writes_is_not_malformed(broker: EmbeddedBroker) -> None:
    async with client(broker, "watch") as watch:
        await watch.subscribe("slow/#", qos=0)
        conn = await Raw.open(broker.port)
        data = connect_packet("dribble") + publish_packet("slow/drip", b"x" * 300)
        for i in range(len(data)):
            await conn.send(data[i : i + 1])
        m = await next_message(watch)
        assert (m.topic.value, payload(m)) == ("slow/drip", b"x" * 300)
