"""MQTT 3.1.1 control packets: framing, parsing what a client sends, encoding what the broker sends.

Section numbers are those of the OASIS MQTT Version 3.1.1 standard (29 October 2014). Anything
that breaks it raises ``MalformedPacket``; the broker closes that one connection [4.8].
"""

from __future__ import annotations

import asyncio
import enum
import struct
from dataclasses import dataclass

MAX_REMAINING_LENGTH = 268_435_455  # four bytes of the variable length encoding [2.2.3]
MAX_PACKET_ID = 0xFFFF


class PacketType(enum.IntEnum):
    """The control packet types [2.2.1]; 0 and 15 are reserved (forbidden)."""

    CONNECT = 1
    CONNACK = 2
    PUBLISH = 3
    PUBACK = 4
    PUBREC = 5
    PUBREL = 6
    PUBCOMP = 7
    SUBSCRIBE = 8
    SUBACK = 9
    UNSUBSCRIBE = 10
    UNSUBACK = 11
    PINGREQ = 12
    PINGRESP = 13
    DISCONNECT = 14


# The fixed header's low nibble for every type but PUBLISH (Table 2.2); anything else is malformed
# and the connection is closed [MQTT-2.2.2-2].
_FLAGS_0010 = (PacketType.PUBREL, PacketType.SUBSCRIBE, PacketType.UNSUBSCRIBE)
REQUIRED_FLAGS: dict[PacketType, int] = {
    t: (0b0010 if t in _FLAGS_0010 else 0) for t in PacketType if t is not PacketType.PUBLISH
}


class ConnackCode(enum.IntEnum):
    """CONNACK return codes [3.2.2.3, Table 3.1]."""

    ACCEPTED = 0
    UNACCEPTABLE_PROTOCOL_VERSION = 1
    IDENTIFIER_REJECTED = 2
    SERVER_UNAVAILABLE = 3
    BAD_USERNAME_OR_PASSWORD = 4
    NOT_AUTHORIZED = 5


class MalformedPacket(Exception):
    """A packet that breaks the specification: a protocol violation, the connection is closed [4.8]."""


class UnacceptableProtocol(Exception):
    """A CONNECT for a protocol level we do not speak: CONNACK 0x01, then close [MQTT-3.1.2-2]."""


@dataclass(frozen=True, slots=True)
class Message:
    """An application message as the broker routes it (a PUBLISH's, or a Will)."""

    topic: str
    payload: bytes
    qos: int
    retain: bool


@dataclass(frozen=True, slots=True)
class Connect:
    protocol: str  # "MQTT" (3.1.1, level 4) or "MQIsdp" (3.1, level 3)
    level: int
    clean_session: bool
    keepalive: int  # seconds; 0 turns the mechanism off [3.1.2.10]
    client_id: str
    will: Message | None
    username: str | None
    password: bytes | None


@dataclass(frozen=True, slots=True)
class Publish:
    message: Message
    dup: bool
    packet_id: int | None  # present only for QoS 1 and 2 [2.3.1]


@dataclass(frozen=True, slots=True)
class Subscribe:
    packet_id: int
    filters: tuple[tuple[str, int], ...]  # (topic filter, requested QoS)


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    packet_id: int
    filters: tuple[str, ...]


# -- framing ---------------------------------------------------------------------------------------


async def read_packet(reader: asyncio.StreamReader, max_size: int) -> tuple[PacketType, int, bytes]:
    """One control packet: (type, the fixed header's flag nibble, the rest of the packet).

    Raises ``MalformedPacket`` for a reserved type, wrong flag bits, a remaining length longer
    than four bytes or larger than ``max_size``; ``asyncio.IncompleteReadError`` at end of stream.
    """
    (first,) = await reader.readexactly(1)
    kind, flags = first >> 4, first & 0x0F
    length, multiplier = 0, 1
    for _ in range(4):  # at most four bytes; a fifth continuation is malformed [2.2.3]
        (byte,) = await reader.readexactly(1)
        length += (byte & 0x7F) * multiplier
        if not byte & 0x80:
            break
        multiplier *= 128
    else:
        raise MalformedPacket("remaining length runs past four bytes [2.2.3]")
    if not PacketType.CONNECT <= kind <= PacketType.DISCONNECT:
        raise MalformedPacket(f"reserved control packet type {kind} [2.2.1]")
    ptype = PacketType(kind)
    required = REQUIRED_FLAGS.get(ptype)
    if required is not None and flags != required:
        raise MalformedPacket(f"{ptype.name} with fixed header flags {flags:#06b} [MQTT-2.2.2-2]")
    if length > max_size:
        raise MalformedPacket(f"{ptype.name} of {length} bytes is over this broker's limit of {max_size}")
    body = await reader.readexactly(length) if length else b""
    return ptype, flags, body


def encode_remaining_length(length: int) -> bytes:
    if not 0 <= length <= MAX_REMAINING_LENGTH:
        raise ValueError(f"remaining length {length} cannot be encoded [2.2.3]")
    out = bytearray()
    while True:
        length, byte = divmod(length, 128)
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out)


def packet(ptype: PacketType, flags: int, body: bytes) -> bytes:
    """A control packet: fixed header (type, flags, remaining length) and body [2.2]."""
    return bytes([ptype << 4 | flags]) + encode_remaining_length(len(body)) + body


def utf8_field(text: str) -> bytes:
    """A UTF-8 encoded string field: two bytes of length, then the bytes [1.5.3]."""
    data = text.encode("utf-8")
    return struct.pack("!H", len(data)) + data


# -- fields ----------------------------------------------------------------------------------------


class Fields:
    """A cursor over a packet's bytes; running off the end is a malformed packet."""

    def __init__(self, what: str, data: bytes) -> None:
        self.what, self._data, self._at = what, data, 0

    def _take(self, n: int) -> bytes:
        if self._at + n > len(self._data):
            raise MalformedPacket(f"{self.what} ends inside a field")
        chunk = self._data[self._at : self._at + n]
        self._at += n
        return chunk

    def u8(self) -> int:
        return self._take(1)[0]

    def u16(self) -> int:
        return int.from_bytes(self._take(2), "big")

    def binary(self) -> bytes:
        """Two-byte length then the bytes [1.5.3, 3.1.3.3]."""
        return self._take(self.u16())

    def utf8(self, field: str) -> str:
        """A UTF-8 encoded string [1.5.3]: well-formed, no surrogates [MQTT-1.5.3-1], no U+0000
        [MQTT-1.5.3-2]. Control characters are allowed: the server MAY refuse them, need not [1.5.3]."""
        raw = self.binary()
        try:
            text = raw.decode("utf-8")  # strict: refuses ill-formed sequences and encoded surrogates
        except UnicodeDecodeError:
            raise MalformedPacket(f"{self.what}: {field} is not well-formed UTF-8 [MQTT-1.5.3-1]") from None
        if "\x00" in text:
            raise MalformedPacket(f"{self.what}: {field} holds U+0000 [MQTT-1.5.3-2]")
        return text

    def packet_id(self) -> int:
        pid = self.u16()
        if pid == 0:
            raise MalformedPacket(f"{self.what}: packet identifier 0 [MQTT-2.3.1-1]")
        return pid

    def remaining(self) -> int:
        return len(self._data) - self._at

    def rest(self) -> bytes:
        return self._take(self.remaining())

    def end(self) -> None:
        if self.remaining():
            raise MalformedPacket(f"{self.what}: {self.remaining()} unexpected bytes at the end")


# -- topics (4.7) ----------------------------------------------------------------------------------


def check_topic_name(topic: str, what: str) -> str:
    """A topic name as published: at least one character [MQTT-4.7.3-1], no wildcards [MQTT-3.3.2-2]."""
    if not topic:
        raise MalformedPacket(f"{what}: empty topic name [MQTT-4.7.3-1]")
    if "+" in topic or "#" in topic:
        raise MalformedPacket(f"{what}: wildcard in topic name {topic!r} [MQTT-3.3.2-2]")
    return topic


def check_topic_filter(topic_filter: str, what: str) -> str:
    """A subscription's filter: '#' only as the whole last level, '+' only as a whole level [4.7.1]."""
    if not topic_filter:
        raise MalformedPacket(f"{what}: empty topic filter [MQTT-4.7.3-1]")
    levels = topic_filter.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            raise MalformedPacket(f"{what}: '#' not alone as last level: {topic_filter!r} [MQTT-4.7.1-2]")
        if "+" in level and level != "+":
            raise MalformedPacket(f"{what}: '+' not alone in a level of {topic_filter!r} [MQTT-4.7.1-3]")
    return topic_filter


def topic_matches(topic_filter: str, topic: str) -> bool:
    """Whether a (valid) topic filter matches a (valid) topic name [4.7].

    '+' matches exactly one level, which may be empty; '#' matches its parent level and any number
    of levels below [4.7.1.2]; a filter starting with a wildcard does not match a topic starting
    with '$' [MQTT-4.7.2-1], so ``#`` does not see ``$SYS/...`` but ``$SYS/#`` does.
    """
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    f_levels, t_levels = topic_filter.split("/"), topic.split("/")
    for i, level in enumerate(f_levels):
        if level == "#":
            return True  # the rest, including none at all: "sport/#" matches "sport"
        if i >= len(t_levels):
            return False
        if level != "+" and level != t_levels[i]:
            return False
    return len(f_levels) == len(t_levels)


# -- parsing what a client sends -------------------------------------------------------------------

_PROTOCOLS = {"MQTT": 4, "MQIsdp": 3}  # 3.1.1 [3.1.2.1-2]; and the older 3.1, which clients still send


def parse_connect(body: bytes) -> Connect:
    """A CONNECT's variable header and payload [3.1].

    Raises ``UnacceptableProtocol`` for a level we do not speak (the caller answers CONNACK 0x01)
    and ``MalformedPacket`` for anything else wrong (the caller closes without a CONNACK [MQTT-3.1.4-1]).
    """
    f = Fields("CONNECT", body)
    protocol = f.utf8("protocol name")
    level = f.u8()
    if protocol not in _PROTOCOLS:
        # [MQTT-3.1.2-1]: the server MAY disconnect; what follows need not even be MQTT.
        raise MalformedPacket(f"CONNECT: protocol name {protocol!r} [MQTT-3.1.2-1]")
    if level != _PROTOCOLS[protocol]:
        raise UnacceptableProtocol(f"CONNECT: {protocol!r} level {level} is not supported [MQTT-3.1.2-2]")
    flags = f.u8()
    if flags & 0x01:
        raise MalformedPacket("CONNECT: reserved connect flag set [MQTT-3.1.2-3]")
    clean_session = bool(flags & 0x02)
    will_flag, will_qos, will_retain = bool(flags & 0x04), (flags >> 3) & 0x03, bool(flags & 0x20)
    password_flag, username_flag = bool(flags & 0x40), bool(flags & 0x80)
    if not will_flag and (will_qos or will_retain):
        raise MalformedPacket("CONNECT: will QoS or retain without a will [MQTT-3.1.2-13] [MQTT-3.1.2-15]")
    if will_qos == 3:
        raise MalformedPacket("CONNECT: will QoS 3 [MQTT-3.1.2-14]")
    if password_flag and not username_flag:
        raise MalformedPacket("CONNECT: a password without a user name [MQTT-3.1.2-22]")
    keepalive = f.u16()
    # The payload's fields, in this order, each present only when its flag says so [MQTT-3.1.3-1].
    client_id = f.utf8("client identifier")
    will = None
    if will_flag:
        topic = check_topic_name(f.utf8("will topic"), "CONNECT will")
        will = Message(topic, f.binary(), will_qos, will_retain)
    username = f.utf8("user name") if username_flag else None
    password = f.binary() if password_flag else None
    f.end()
    return Connect(protocol, level, clean_session, keepalive, client_id, will, username, password)


def parse_publish(flags: int, body: bytes) -> Publish:
    """A PUBLISH [3.3]: DUP, QoS and RETAIN from the fixed header, topic and packet id, payload."""
    dup, qos, retain = bool(flags & 0x08), (flags >> 1) & 0x03, bool(flags & 0x01)
    if qos == 3:
        raise MalformedPacket("PUBLISH with QoS 3 [MQTT-3.3.1-4]")
    if dup and qos == 0:
        raise MalformedPacket("PUBLISH with DUP set at QoS 0 [MQTT-3.3.1-2]")
    f = Fields("PUBLISH", body)
    topic = check_topic_name(f.utf8("topic name"), "PUBLISH")
    packet_id = f.packet_id() if qos else None
    return Publish(Message(topic, f.rest(), qos, retain), dup, packet_id)


def parse_subscribe(body: bytes) -> Subscribe:
    """A SUBSCRIBE [3.8]: a packet id and at least one (filter, requested QoS) pair [MQTT-3.8.3-3]."""
    f = Fields("SUBSCRIBE", body)
    packet_id = f.packet_id()
    filters: list[tuple[str, int]] = []
    while f.remaining():
        topic_filter = check_topic_filter(f.utf8("topic filter"), "SUBSCRIBE")
        qos = f.u8()
        if qos > 2:  # the upper six bits are reserved and QoS 3 is not a QoS [MQTT-3-8.3-4]
            raise MalformedPacket(f"SUBSCRIBE: requested QoS byte {qos:#04x} [MQTT-3-8.3-4]")
        filters.append((topic_filter, qos))
    if not filters:
        raise MalformedPacket("SUBSCRIBE without a topic filter [MQTT-3.8.3-3]")
    return Subscribe(packet_id, tuple(filters))


def parse_unsubscribe(body: bytes) -> Unsubscribe:
    """An UNSUBSCRIBE [3.10]: a packet id and at least one topic filter [MQTT-3.10.3-2]."""
    f = Fields("UNSUBSCRIBE", body)
    packet_id = f.packet_id()
    filters: list[str] = []
    while f.remaining():
        filters.append(check_topic_filter(f.utf8("topic filter"), "UNSUBSCRIBE"))
    if not filters:
        raise MalformedPacket("UNSUBSCRIBE without a topic filter [MQTT-3.10.3-2]")
    return Unsubscribe(packet_id, tuple(filters))


def parse_packet_id(ptype: PacketType, body: bytes) -> int:
    """PUBACK, PUBREC, PUBREL, PUBCOMP: exactly a packet identifier (remaining length 2) [3.4-3.7]."""
    f = Fields(ptype.name, body)
    packet_id = f.packet_id()
    f.end()
    return packet_id


def parse_empty(ptype: PacketType, body: bytes) -> None:
    """PINGREQ, DISCONNECT: no variable header, no payload [3.12, 3.14]."""
    if body:
        raise MalformedPacket(f"{ptype.name} with a remaining length of {len(body)}, not 0")


# -- encoding what the broker sends ----------------------------------------------------------------


def connack(session_present: bool, code: ConnackCode) -> bytes:
    # Session present is 0 with any refusal [MQTT-3.2.2-4].
    return packet(PacketType.CONNACK, 0, bytes([int(session_present and code == 0), code]))


def publish(message: Message, packet_id: int | None = None, *, dup: bool = False) -> bytes:
    """A PUBLISH; ``packet_id`` is required for QoS 1 and 2 and absent for QoS 0 [2.3.1]."""
    if (packet_id is None) != (message.qos == 0):
        raise ValueError("a packet id goes with QoS 1 and 2 only")
    flags = (0x08 if dup else 0) | message.qos << 1 | (0x01 if message.retain else 0)
    pid = b"" if packet_id is None else struct.pack("!H", packet_id)
    return packet(PacketType.PUBLISH, flags, utf8_field(message.topic) + pid + message.payload)


def ack(ptype: PacketType, packet_id: int) -> bytes:
    """PUBACK, PUBREC, PUBREL, PUBCOMP or UNSUBACK: the fixed header and the packet id."""
    return packet(ptype, REQUIRED_FLAGS[ptype], struct.pack("!H", packet_id))


def suback(packet_id: int, codes: list[int]) -> bytes:
    """One return code per filter, in the order of the SUBSCRIBE [MQTT-3.8.4-5] [MQTT-3.9.3-1]."""
    return packet(PacketType.SUBACK, 0, struct.pack("!H", packet_id) + bytes(codes))


PINGRESP = packet(PacketType.PINGRESP, 0, b"")
