"""An embedded broker per test in the test's own loop, raw MQTT connections that write bytes as
given, and aiomqtt clients. Nothing sleeps to synchronise: tests wait for packets and messages
under ``asyncio.timeout(GUARD_S)``, a failure guard a passing test never gets near."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiomqtt
import pytest

from sim.mqtt_broker import EmbeddedBroker

GUARD_S = 10.0
LOGGER = "sim.mqtt_broker"

CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 2, 3, 4, 5, 6, 7
SUBACK, UNSUBACK, PINGRESP = 9, 11, 13


_opened: list[Raw] = []


@pytest.fixture(autouse=True)
async def _close_raw_connections() -> AsyncIterator[None]:
    """Every raw connection a test opened is closed when it ends, whatever the test did."""
    yield
    while _opened:
        await _opened.pop().close()


@pytest.fixture
async def broker(caplog: pytest.LogCaptureFixture) -> AsyncIterator[EmbeddedBroker]:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with EmbeddedBroker() as b:
        yield b


# -- bytes on the wire, written here independently of the broker's encoder ------------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        n, byte = divmod(n, 128)
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def s(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("!H", len(data)) + data


def packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + varint(len(body)) + body


@dataclass(frozen=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False


def connect_packet(
    client_id: str = "raw",
    *,
    keepalive: int = 0,
    clean: bool = True,
    will: Will | None = None,
    username: str | None = None,
    password: str | None = None,
    protocol: str = "MQTT",
    level: int = 4,
) -> bytes:
    flags = 0x02 if clean else 0
    flags |= (0x80 if username is not None else 0) | (0x40 if password is not None else 0)
    payload = s(client_id)
    if will is not None:
        flags |= 0x04 | will.qos << 3 | (0x20 if will.retain else 0)
        payload += s(will.topic) + s(will.payload)
    if username is not None:
        payload += s(username)
    if password is not None:
        payload += s(password)
    return packet(0x10, s(protocol) + bytes([level, flags]) + struct.pack("!H", keepalive) + payload)


def publish_packet(topic: str | bytes, payload: bytes, qos: int = 0, packet_id: int = 0, *,
                   retain: bool = False, dup: bool = False) -> bytes:  # fmt: skip
    flags = (0x08 if dup else 0) | qos << 1 | (0x01 if retain else 0)
    pid = struct.pack("!H", packet_id) if qos else b""
    return packet(0x30 | flags, s(topic) + pid + payload)


def id_packet(first: int, packet_id: int) -> bytes:
    return packet(first, struct.pack("!H", packet_id))


def subscribe_packet(packet_id: int, *filters: tuple[str, int]) -> bytes:
    return packet(0x82, struct.pack("!H", packet_id) + b"".join(s(f) + bytes([q]) for f, q in filters))


def unsubscribe_packet(packet_id: int, *filters: str) -> bytes:
    return packet(0xA2, struct.pack("!H", packet_id) + b"".join(s(f) for f in filters))


PINGREQ = b"\xc0\x00"
DISCONNECT = b"\xe0\x00"


@dataclass(frozen=True)
class Packet:
    kind: int
    flags: int
    body: bytes

    @property
    def packet_id(self) -> int:
        if self.kind == PUBLISH:
            (n,) = struct.unpack_from("!H", self.body)
            return int(struct.unpack_from("!H", self.body, 2 + n)[0])
        return int(struct.unpack_from("!H", self.body)[0])

    @property
    def topic(self) -> str:
        (n,) = struct.unpack_from("!H", self.body)
        return self.body[2 : 2 + n].decode()

    @property
    def payload(self) -> bytes:
        (n,) = struct.unpack_from("!H", self.body)
        return self.body[2 + n + (2 if self.qos else 0) :]

    @property
    def qos(self) -> int:
        return (self.flags >> 1) & 3

    @property
    def retain(self) -> bool:
        return bool(self.flags & 1)


class Raw:
    """One TCP connection speaking MQTT by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Raw:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conn = cls(reader, writer)
        _opened.append(conn)
        return conn

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read(self) -> Packet:
        async with asyncio.timeout(GUARD_S):
            (first,) = await self.reader.readexactly(1)
            length, shift = 0, 0
            while True:
                (byte,) = await self.reader.readexactly(1)
                length |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            return Packet(first >> 4, first & 0x0F, await self.reader.readexactly(length))

    async def connect(self, client_id: str = "raw", **kw: Any) -> tuple[int, int]:
        """CONNECT; returns CONNACK's (session present flags, return code)."""
        await self.send(connect_packet(client_id, **kw))
        ack = await self.read()
        assert ack.kind == CONNACK and len(ack.body) == 2, ack
        return ack.body[0], ack.body[1]

    async def closed_by_peer(self) -> bytes:
        """Wait for the broker to close the connection; returns whatever came before the end."""
        async with asyncio.timeout(GUARD_S):
            return await self.reader.read()

    def abort(self) -> None:
        """Drop the connection without DISCONNECT (a reset, as a crashed client would)."""
        self.writer.transport.abort()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


@contextlib.asynccontextmanager
async def raw(broker: EmbeddedBroker, client_id: str | None = None, **kw: Any) -> AsyncIterator[Raw]:
    """A raw connection, CONNECTed (accepted) when ``client_id`` is given."""
    conn = await Raw.open(broker.port)
    try:
        if client_id is not None:
            assert await conn.connect(client_id, **kw) == (0, 0)
        yield conn
    finally:
        await conn.close()


def client(broker: EmbeddedBroker, identifier: str | None = None, **kw: Any) -> aiomqtt.Client:
    return aiomqtt.Client("127.0.0.1", broker.port, identifier=identifier, **kw)


async def next_message(c: aiomqtt.Client) -> aiomqtt.Message:
    async with asyncio.timeout(GUARD_S):
        return await anext(c.messages)


async def messages(c: aiomqtt.Client, count: int) -> list[aiomqtt.Message]:
    return [await next_message(c) for _ in range(count)]


def payload(m: aiomqtt.Message) -> bytes:
    assert isinstance(m.payload, bytes), m.payload
    return m.payload


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]
