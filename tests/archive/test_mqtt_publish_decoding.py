"""The archive's MQTT client decodes a QoS 1 PUBLISH with no properties itself
(controller/archive/mqtt_client.py): the message it hands on is paho's, field for field, and
every other PUBLISH goes through paho's own decoding."""

from __future__ import annotations

import struct

import paho.mqtt.client as mqtt
from hypothesis import given
from hypothesis import strategies as st
from paho.mqtt.enums import CallbackAPIVersion

from controller.archive.mqtt_client import BufferedClient


def publish(
    topic: bytes, mid: int, payload: bytes, *, qos: int, dup: bool, retain: bool, props: bytes
) -> tuple[int, bytes]:
    """A PUBLISH's first byte and the rest after the remaining length [MQTT 5.0 3.3]."""
    command = 0x30 | (0x08 if dup else 0) | qos << 1 | (0x01 if retain else 0)
    body = struct.pack("!H", len(topic)) + topic + (struct.pack("!H", mid) if qos else b"") + props + payload
    return command, body


def delivered(client: mqtt.Client, command: int, body: bytes) -> mqtt.MQTTMessage:
    got: list[mqtt.MQTTMessage] = []
    client.on_message = lambda _c, _u, m: got.append(m)
    client._in_packet = {"command": command, "packet": body}
    client._handle_publish()
    assert len(got) == 1
    return got[0]


def fields(m: mqtt.MQTTMessage) -> tuple[object, ...]:
    return (m.topic, bytes(m.payload), m.mid, m.qos, m.dup, m.retain)


def clients() -> tuple[mqtt.Client, mqtt.Client]:
    ours = BufferedClient(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5, manual_ack=True)
    paho = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5, manual_ack=True)
    return ours, paho


levels = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/+#\x00"), min_size=1, max_size=12
)


@given(
    st.lists(levels, min_size=1, max_size=5).map("/".join),
    st.integers(1, 0xFFFF),
    st.binary(max_size=600),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0, 1]),  # QoS 2 is handed on at PUBREL, by paho alone
    st.sampled_from([b"\x00", b"\x02\x01\x01", b"\x03\x23\x00\x05"]),  # none; payload format; a topic alias
)
def test_every_publish_is_handed_on_as_paho_hands_it(
    topic: str, mid: int, payload: bytes, dup: bool, retain: bool, qos: int, props: bytes
) -> None:
    command, body = publish(topic.encode(), mid, payload, qos=qos, dup=dup, retain=retain, props=props)
    ours, paho = clients()
    mine, theirs = delivered(ours, command, body), delivered(paho, command, body)
    assert fields(mine) == fields(theirs)
    if qos == 1 and props == b"\x00":
        assert mine.properties is None  # the short cut: nobody in the worker reads them
    else:
        assert mine.properties is not None and str(mine.properties) == str(theirs.properties)


def test_a_bytearray_packet_gives_bytes_as_paho_does() -> None:
    command, body = publish(
        b"tablectl/s/t/events", 7, b'{"seq":1}', qos=1, dup=False, retain=False, props=b"\x00"
    )
    ours, paho = clients()
    mine = delivered(ours, command, bytearray(body))
    assert fields(mine) == fields(delivered(paho, command, body))
    assert type(mine.payload) is bytes
