"""Topic filters against topic names [4.7], with the standard's own examples, and which names and
filters are valid at all."""

from __future__ import annotations

import pytest

from sim.mqtt_broker import MalformedPacket, check_topic_filter, check_topic_name, topic_matches
from sim.mqtt_broker.packets import encode_remaining_length


@pytest.mark.parametrize(
    ("topic_filter", "topic", "matches"),
    [
        # 4.7.1.2, the multi-level wildcard, including the parent level itself
        ("sport/tennis/player1/#", "sport/tennis/player1", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
        ("sport/#", "sport", True),
        ("sport/tennis/#", "sport/tennis/", True),
        ("sport/tennis/#", "sport/tenniss", False),
        ("#", "sport/tennis/player1", True),
        ("#", "/", True),
        ("#", "a", True),
        # 4.7.1.3, the single-level wildcard: exactly one level, which may be empty
        ("sport/tennis/+", "sport/tennis/player1", True),
        ("sport/tennis/+", "sport/tennis/player2", True),
        ("sport/tennis/+", "sport/tennis/player1/ranking", False),
        ("sport/+", "sport", False),
        ("sport/+", "sport/", True),
        ("+/+", "/finance", True),
        ("/+", "/finance", True),
        ("+", "/finance", False),
        ("+", "finance", True),
        ("+/tennis/#", "sport/tennis/player1/ranking", True),
        ("sport/+/player1", "sport/tennis/player1", True),
        ("sport/+/player1", "sport/tennis/player2", False),
        ("a/+/#", "a/b", True),
        ("a/+/#", "a", False),
        # no wildcard: exact and case-sensitive [4.7.3]
        ("tablectl/site/t1/status", "tablectl/site/t1/status", True),
        ("ACCOUNTS", "Accounts", False),
        ("a/b", "a/b/", False),
        ("a/b/", "a/b", False),
        ("/a", "a", False),
        # $-topics are not matched by a filter starting with a wildcard [MQTT-4.7.2-1] [4.7.2]
        ("#", "$SYS/broker/clients", False),
        ("+/monitor/Clients", "$SYS/monitor/Clients", False),
        ("+", "$SYS", False),
        ("$SYS/#", "$SYS/monitor/Clients", True),
        ("$SYS/#", "$SYS", True),
        ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
        ("$SYS/+/Clients", "$SYS/monitor/Clients", True),
        ("$SYS/monitor/Clients", "$SYS/monitor/Clients", True),
        ("a/#", "a/$SYS", True),  # '$' only matters at the first level
        ("tablectl/+/+/status", "tablectl/example-floor/dub-01/status", True),
        ("tablectl/#", "tablectl/example-floor/dub-01/devices/shoe", True),
    ],
)
def test_topic_filter_matching(topic_filter: str, topic: str, matches: bool) -> None:
    assert check_topic_filter(topic_filter, "test") == topic_filter
    assert check_topic_name(topic, "test") == topic
    assert topic_matches(topic_filter, topic) is matches


@pytest.mark.parametrize(
    "topic_filter", ["", "sport/tennis#", "sport/tennis/#/ranking", "#/a", "sport+", "a/+b", "##"]
)
def test_invalid_topic_filters(topic_filter: str) -> None:
    with pytest.raises(MalformedPacket, match=r"MQTT-4\.7\."):
        check_topic_filter(topic_filter, "test")


@pytest.mark.parametrize("topic", ["", "a/+", "a/#", "+", "#", "a+b"])
def test_invalid_topic_names(topic: str) -> None:
    with pytest.raises(MalformedPacket, match=r"MQTT-(4\.7\.3-1|3\.3\.2-2)"):
        check_topic_name(topic, "test")


@pytest.mark.parametrize(
    ("length", "encoded"),  # Table 2.4: the bounds of each size of the remaining length
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (2_097_151, b"\xff\xff\x7f"),
        (2_097_152, b"\x80\x80\x80\x01"),
        (268_435_455, b"\xff\xff\xff\x7f"),
    ],
)
def test_remaining_length_encoding(length: int, encoded: bytes) -> None:
    assert encode_remaining_length(length) == encoded
