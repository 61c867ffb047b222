"""A fleet of simulated tables on the wire, cheap enough not to be the thing measured.

Each table is its own MQTT 3.1.1 connection (own client id, retained Last Will on ``status``),
publishes a retained birth, then ``rate`` QoS 1 events a second with contiguous seq and a retained
state once a second: the topics and JSON a real appliance sends (built by
``controller.telemetry.payloads``). What makes it cheap is that it speaks MQTT itself: the frames are
packed with ``struct`` and written straight to each table's socket, and the broker's PUBACKs are
counted, not parsed into objects. 500 tables through aiomqtt in Python take a whole core on their
own; on a two-core machine that core is the one the fleet view needs, so the view's figure would be
the load generator's.

Used by ``bench/telemetry_fleet.py --load wire`` (one or more worker processes).
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.gaming_day import PENNSYLVANIA
from controller.journal import GENESIS_HASH, Classification, Record, canonical_json, record_hash
from controller.telemetry.payloads import birth, death, encode, event_message, state
from controller.telemetry.topics import TableTopics

BENCH_INCARNATION = "bench"  # the one process each simulated table stands for (docs/mqtt.md)
KEEPALIVE_S = 60  # the tables publish ten times a second: the broker never needs a PINGREQ
MAX_PACKET_ID = 0xFFFF
CONNECT = 1  # the CONNECT control packet's type [MQTT 3.1.1 2.2.1]


# -- the few MQTT 3.1.1 frames a publishing table needs ---------------------------------------------
def encode_remaining_length(length: int) -> bytes:
    """The fixed header's variable-length "remaining length" [2.2.3]: 7 bits a byte, high bit = more."""
    out = bytearray()
    while True:
        length, byte = divmod(length, 128)
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out)


def packet(ptype: int, flags: int, body: bytes) -> bytes:
    """A control packet: fixed header (type, flags, remaining length) and body [2.2]."""
    return bytes([ptype << 4 | flags]) + encode_remaining_length(len(body)) + body


def utf8_field(text: str) -> bytes:
    """A UTF-8 encoded string field: two bytes of length, then the bytes [1.5.3]."""
    data = text.encode("utf-8")
    return struct.pack("!H", len(data)) + data


def connect_frame(
    client_id: str, will_topic: str, will: bytes, login: tuple[str, str] | None = None
) -> bytes:
    # MQTT 3.1.1 3.1.2.3: clean session (0x02), will flag (0x04), will QoS 1 (0x08), will retain
    # (0x20); with ``login`` (user, password) the user name (0x80) and password (0x40) flags.
    flags = 0x02 | 0x04 | 0x08 | 0x20 | (0xC0 if login else 0)
    variable = utf8_field("MQTT") + bytes([4, flags]) + struct.pack("!H", KEEPALIVE_S)
    body = variable + utf8_field(client_id) + utf8_field(will_topic) + struct.pack("!H", len(will)) + will
    if login is not None:  # [3.1.3.4, 3.1.3.5]
        body += utf8_field(login[0]) + utf8_field(login[1])
    return packet(CONNECT, 0, body)


def card_dealt(seq: int) -> dict[str, Any]:
    """A card_dealt payload of the table core's own shape, the ``seq``-th of a table's stream:
    the archive refuses a record of any other shape."""
    return {"round": seq // 12, "seat": seq % 6 + 1, "hand": 0, "card": "QH", "back": "red", "purpose": ""}


def publish_frame(topic: bytes, packet_id: int, payload: bytes, *, retain: bool = False) -> bytes:
    """PUBLISH at QoS 1 (3.3.1): 0x32, or 0x33 retained; topic is pre-encoded (length prefix included)."""
    body_len = len(topic) + 2 + len(payload)
    first = b"\x33" if retain else b"\x32"
    return b"".join((first, encode_remaining_length(body_len), topic, struct.pack("!H", packet_id), payload))


class _Acks(asyncio.Protocol):
    """Reads what the broker sends a publisher: one CONNACK, then 4-byte PUBACKs."""

    def __init__(self) -> None:
        self.connected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.received = 0  # bytes after the CONNACK

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.connected.done():
            if data[:2] != b"\x20\x02" or data[3] != 0:
                self.connected.set_exception(ConnectionError(f"CONNACK refused: {data[:4].hex()}"))
                return
            self.connected.set_result(None)
            data = data[4:]
        self.received += len(data)

    @property
    def acks(self) -> int:
        return self.received // 4  # only PUBACKs (0x40 0x02 id id) follow: nothing is subscribed

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.connected.done():
            self.connected.set_exception(exc or ConnectionError("closed before CONNACK"))


@dataclass
class SimTable:
    topics: TableTopics
    proto: _Acks
    seq: int = 0
    packet_id: int = 0
    sent: int = 0
    # chained: each event carries its real hash and prev_hash (bench/archive_load.py checks the
    # chain); otherwise placeholders, which a fleet view does not look at.
    chained: bool = False
    prev_hash: str = GENESIS_HASH
    events_topic: bytes = field(init=False)
    state_topic: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.events_topic = utf8_field(self.topics.events)
        self.state_topic = utf8_field(self.topics.state)

    def _next_id(self) -> int:
        self.packet_id = self.packet_id % MAX_PACKET_ID + 1
        return self.packet_id

    def event(self, now: float) -> bytes:
        self.seq += 1
        self.sent += 1
        dealt = card_dealt(self.seq)
        if self.chained:
            public = Classification.PUBLIC.value
            digest = record_hash(self.seq, now, "card_dealt", public, canonical_json(dealt), self.prev_hash)
            record = Record(self.seq, now, "card_dealt", Classification.PUBLIC, dealt, self.prev_hash, digest)
            self.prev_hash = digest
        else:
            record = Record(self.seq, now, "card_dealt", Classification.PUBLIC, dealt, "0" * 64, "f" * 64)
        body = encode(event_message(record, PENNSYLVANIA, prev_public=self.chained))
        return publish_frame(self.events_topic, self._next_id(), body)

    def state(self) -> bytes:
        self.sent += 1
        snap = {"round": self.seq // 12, "cards_in_shoe": 300 - self.seq % 300, "batch_in_shoe": "A"}
        body = encode(
            state(snap, {"shoe": "online", "keypad": "online"}, "double-attack", BENCH_INCARNATION, self.seq)
        )
        return publish_frame(self.state_topic, self._next_id(), body, retain=True)


async def open_tables(
    port: int,
    first: int,
    count: int,
    site: str = "bench",
    *,
    chained: bool = False,
    tls: ssl.SSLContext | None = None,
    passwords: Mapping[str, str] | None = None,
) -> list[SimTable]:
    """``tls``: connect over TLS (a broker with the shipped config); ``passwords``: each table
    logs in as its account ``<site>/<table>`` with the password found here."""
    loop = asyncio.get_running_loop()
    tables: list[SimTable] = []
    for i in range(first, first + count):
        topics = TableTopics(site, f"t{i:04d}")
        identity = {"site": site, "table": topics.table, "game": "double-attack"}
        will = encode(death(identity, f"bench-{i}", BENCH_INCARNATION, clean=False))
        _, proto = await loop.create_connection(_Acks, "127.0.0.1", port, ssl=tls)
        assert proto.transport is not None
        account = f"{site}/{topics.table}"
        login = None if passwords is None else (account, passwords[account])
        proto.transport.write(connect_frame(f"bench-{topics.table}", topics.status, will, login))
        await proto.connected
        table = SimTable(topics, proto, chained=chained)
        status = encode(birth(identity, f"bench-{i}", 0, 0, BENCH_INCARNATION))
        proto.transport.write(publish_frame(utf8_field(topics.status), table._next_id(), status, retain=True))
        tables.append(table)
    return tables


async def publish(tables: list[SimTable], rate: float, seconds: float, start_at: float) -> int:
    """Every table ``rate`` events a second (spread evenly over each period) and a state a second,
    from wall time ``start_at`` for ``seconds``; waits for every PUBACK (births included); returns
    the messages sent after the births."""
    await asyncio.sleep(max(0.0, start_at - time.time()))
    period = 1.0 / rate
    slices = 10  # each period is cut in ten, so the load is smooth, not 500 messages in one burst
    began = time.monotonic()
    step = 0
    while time.monotonic() - began < seconds:
        now = time.time()
        part = step % slices
        state_due = step % (slices * round(rate)) < slices  # the first period of each second
        for table in tables[part::slices]:
            transport = table.proto.transport
            assert transport is not None
            frame = table.event(now)
            transport.write(frame + table.state() if state_due else frame)
        step += 1
        await asyncio.sleep(max(0.0, began + step * period / slices - time.monotonic()))
    sent = sum(t.sent for t in tables)
    while sum(t.proto.acks for t in tables) < sent + len(tables):  # noqa: ASYNC110 - a load generator may poll
        await asyncio.sleep(0.05)
    for t in tables:
        assert t.proto.transport is not None
        t.proto.transport.write(b"\xe0\x00")  # DISCONNECT: a clean end, no Last Will
        t.proto.transport.close()
    return sent


async def run_worker(
    port: int, first: int, count: int, rate: float, seconds: float, start_at: float, *, chained: bool = False
) -> int:
    tables = await open_tables(port, first, count, chained=chained)
    return await publish(tables, rate, seconds, start_at)
