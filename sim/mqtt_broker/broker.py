"""The broker: one asyncio task per connection, routing in the publisher's task, writes that never wait.

Routing is synchronous: a PUBLISH is matched against every connected client's subscriptions and
written to each subscriber's own ``StreamWriter`` without awaiting, so a subscriber that does not
read cannot hold up the publisher or anyone else. Its unread bytes pile up in its own transport's
buffer instead; past ``max_write_buffer`` the broker drops that client (publishing its Will).

Every connection ends in ``_close``: it publishes the Will unless the client sent DISCONNECT
[MQTT-3.1.2-8], forgets the client's subscriptions (clean sessions only, see ``__init__``) and
logs one line saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from sim.mqtt_broker.packets import (
    MAX_PACKET_ID,
    PINGRESP,
    ConnackCode,
    Connect,
    MalformedPacket,
    Message,
    PacketType,
    UnacceptableProtocol,
    ack,
    connack,
    parse_connect,
    parse_empty,
    parse_packet_id,
    parse_publish,
    parse_subscribe,
    parse_unsubscribe,
    publish,
    read_packet,
    suback,
    topic_matches,
)

MAX_QOS = 1  # the highest QoS we grant a subscription; QoS 2 is accepted from publishers only
LOG = logging.getLogger("sim.mqtt_broker")


class _KeepAliveExpired(Exception):
    pass


@dataclass(eq=False)
class _Client:
    """One network connection, and once its CONNECT is accepted, its (clean) session."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    peer: str
    client_id: str | None = None
    will: Message | None = None
    subscriptions: dict[str, int] = field(default_factory=dict)  # topic filter -> granted QoS
    inflight: set[int] = field(default_factory=set)  # our QoS 1 PUBLISHes awaiting the client's PUBACK
    qos2_received: set[int] = field(default_factory=set)  # its QoS 2 packet ids awaiting PUBREL
    next_packet_id: int = 1
    disconnected: bool = False  # sent DISCONNECT: the Will is discarded [MQTT-3.14.4-3]
    dead: bool = False  # nothing more is written to it
    closed: bool = False  # _close has run
    reason: str = "connection closed"
    level: int = logging.INFO  # of the line logged when it is closed

    def name(self) -> str:
        return f"{self.client_id!r} ({self.peer})" if self.client_id is not None else self.peer

    def fail(self, reason: str, level: int = logging.WARNING) -> None:
        """Record why the connection ends (the first reason wins)."""
        if not self.dead:
            self.reason, self.level = reason, level
        self.dead = True


class EmbeddedBroker:
    """A small MQTT 3.1.1 broker for the demo and the tests (docs/design.md says what it leaves out).

    ``users`` maps user names to passwords; when given, a CONNECT without a user name is refused
    with 0x05 (not authorised) and a wrong name or password with 0x04 [3.2.2.3]. Otherwise any
    credentials are accepted. ``max_packet_size`` bounds what a client may send (the spec's own
    bound is 256 MB [2.2.3]); ``max_write_buffer`` bounds what may wait for a client to read.
    """

    def __init__(
        self,
        *,
        users: Mapping[str, str] | None = None,
        max_packet_size: int = 1 << 20,
        max_write_buffer: int = 8 << 20,
        connect_timeout: float = 10.0,
        logger: logging.Logger = LOG,
    ) -> None:
        self._users = dict(users) if users is not None else None
        self.max_packet_size = max_packet_size
        self.max_write_buffer = max_write_buffer
        self.connect_timeout = connect_timeout
        self._log = logger
        self._server: asyncio.Server | None = None
        self._connections: dict[_Client, asyncio.Task[None] | None] = {}
        self._sessions: dict[str, _Client] = {}  # client id -> its live connection
        self._retained: dict[str, Message] = {}
        self._stopping = False
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on ``host``:``port`` (0: a free port) and return the port bound."""
        if self._server is not None:
            raise RuntimeError("the broker is already started")
        self._stopping = False
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._log.info("mqtt broker: listening on %s:%d", host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop listening and close every connection (their Wills are not published: the broker is
        going away, not the clients)."""
        if self._server is None:
            return
        self._stopping = True
        self._server.close()
        for client in list(self._connections):
            client.fail("the broker is stopping", logging.DEBUG)
            client.writer.transport.abort()
        tasks = [t for t in self._connections.values() if t is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None
        self._retained.clear()

    async def __aenter__(self) -> EmbeddedBroker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def client_ids(self) -> frozenset[str]:
        """The client ids of the sessions connected now."""
        return frozenset(self._sessions)

    # -- one connection ----------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = _Client(reader, writer, f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer))
        self._connections[client] = asyncio.current_task()
        try:
            if self._stopping:
                return
            await self._session(client)
        except MalformedPacket as e:
            client.fail(f"protocol violation: {e}")  # [4.8]: close the connection
        except _KeepAliveExpired:
            client.fail("no packet within 1.5 times its keep alive [MQTT-3.1.2-24]", logging.INFO)
        except TimeoutError:
            client.fail(f"no CONNECT within {self.connect_timeout:g} s of connecting", logging.INFO)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            client.fail("the connection was lost", logging.INFO)
        except Exception as e:  # a bug of ours: it ends this connection, not the broker
            self._log.exception("mqtt broker: internal error serving %s", client.name())
            client.fail(f"internal error: {type(e).__name__}", logging.ERROR)
        finally:
            self._close(client)
            await self._drain_and_close(client)
            del self._connections[client]

    async def _session(self, client: _Client) -> None:
        async with asyncio.timeout(self.connect_timeout):
            ptype, _, body = await read_packet(client.reader, self.max_packet_size)
        if ptype is not PacketType.CONNECT:
            raise MalformedPacket(f"{ptype.name} before CONNECT [MQTT-3.1.0-1]")
        try:
            connect = parse_connect(body)
        except UnacceptableProtocol as e:
            self._send(client, connack(False, ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION))
            client.fail(f"refused: {e}", logging.INFO)
            return
        code = self._accept(client, connect)
        if code is not ConnackCode.ACCEPTED:
            self._send(client, connack(False, code))  # then close [MQTT-3.2.2-5]
            client.fail(f"refused: CONNACK {code:#04x} ({code.name.lower().replace('_', ' ')})", logging.INFO)
            return
        # clean_session=0 asks us to keep the session across connections [MQTT-3.1.2-4]; we keep none,
        # so there never is one to resume and session present is 0 [MQTT-3.2.2-3] (docs/design.md).
        self._send(client, connack(False, ConnackCode.ACCEPTED))
        # [MQTT-3.1.2-24]: no control packet within one and a half keep alive periods -> disconnect as
        # for a network failure (so the Will is published); 0 turns the mechanism off.
        limit = connect.keepalive * 1.5 if connect.keepalive else None
        while not client.dead:
            try:
                async with asyncio.timeout(limit):
                    ptype, flags, body = await read_packet(client.reader, self.max_packet_size)
            except TimeoutError:
                raise _KeepAliveExpired from None
            if not self._handle(client, ptype, flags, body):
                return

    def _accept(self, client: _Client, connect: Connect) -> ConnackCode:
        """Check the client id and credentials; when accepted, the session is registered."""
        client_id = connect.client_id
        if connect.protocol == "MQIsdp" and not 1 <= len(client_id) <= 23:
            return ConnackCode.IDENTIFIER_REJECTED  # MQTT 3.1 requires 1 to 23 characters
        if not client_id:
            if not connect.clean_session:
                return ConnackCode.IDENTIFIER_REJECTED  # [MQTT-3.1.3-8]
            client_id = f"auto-{secrets.token_hex(8)}"  # zero-length id: assign a unique one [MQTT-3.1.3-6]
        if self._users is not None:
            if connect.username is None:
                return ConnackCode.NOT_AUTHORIZED
            expected = self._users.get(connect.username, "").encode()
            given = connect.password or b""
            if not (connect.username in self._users and hmac.compare_digest(expected, given)):
                return ConnackCode.BAD_USERNAME_OR_PASSWORD
        client.client_id, client.will = client_id, connect.will
        old = self._sessions.get(client_id)
        if old is not None:
            # [MQTT-3.1.4-2]: a client id already connected -> disconnect the existing client. It did
            # not send DISCONNECT, so its Will is published now, before the new CONNACK [MQTT-3.1.2-8].
            old.fail(f"taken over by a new connection from {client.peer} [MQTT-3.1.4-2]", logging.INFO)
            self._close(old)
        self._sessions[client_id] = client
        return ConnackCode.ACCEPTED

    def _handle(self, client: _Client, ptype: PacketType, flags: int, body: bytes) -> bool:
        """Act on one packet after CONNECT; False once the client has said DISCONNECT."""
        if ptype is PacketType.PUBLISH:
            pub = parse_publish(flags, body)
            msg = pub.message
            if msg.qos == 0:
                self._publish(msg)
            elif msg.qos == 1:
                self._publish(msg)  # routed before the PUBACK: ownership has passed [MQTT-4.3.2-2]
                self._send(client, ack(PacketType.PUBACK, pub.packet_id or 0))
            else:
                # QoS 2, method A of 4.3.3 (figure 4.3): deliver on the PUBLISH and keep its packet id
                # until PUBREL, so a resent PUBLISH with that id is acknowledged but not delivered
                # again [MQTT-4.3.3-2]. Onward delivery is at QoS 1 at most: a subscription is
                # granted at most QoS 1, and delivery is at the lower of the two QoS [3.8.4].
                pid = pub.packet_id or 0
                if pid not in client.qos2_received:
                    client.qos2_received.add(pid)
                    self._publish(msg)
                self._send(client, ack(PacketType.PUBREC, pid))
        elif ptype is PacketType.PUBACK:
            client.inflight.discard(parse_packet_id(ptype, body))  # an unknown id: nothing to do
        elif ptype is PacketType.PUBREL:
            pid = parse_packet_id(ptype, body)
            client.qos2_received.discard(pid)
            self._send(client, ack(PacketType.PUBCOMP, pid))  # also for an id we no longer hold [4.3.3]
        elif ptype in (PacketType.PUBREC, PacketType.PUBCOMP):
            parse_packet_id(ptype, body)  # we never send QoS 2, so these acknowledge nothing of ours
        elif ptype is PacketType.SUBSCRIBE:
            self._subscribe(client, body)
        elif ptype is PacketType.UNSUBSCRIBE:
            unsub = parse_unsubscribe(body)
            for topic_filter in unsub.filters:  # compared character by character [MQTT-3.10.4-1]
                client.subscriptions.pop(topic_filter, None)
            # Acknowledged even when no filter matched a subscription [MQTT-3.10.4-5].
            self._send(client, ack(PacketType.UNSUBACK, unsub.packet_id))
        elif ptype is PacketType.PINGREQ:
            parse_empty(ptype, body)
            self._send(client, PINGRESP)  # [MQTT-3.12.4-1]
        elif ptype is PacketType.DISCONNECT:
            parse_empty(ptype, body)
            client.disconnected = True  # the Will is discarded unpublished [MQTT-3.14.4-3]
            client.fail("sent DISCONNECT", logging.DEBUG)
            return False
        elif ptype is PacketType.CONNECT:
            raise MalformedPacket("a second CONNECT [MQTT-3.1.0-2]")
        else:  # CONNACK, SUBACK, UNSUBACK, PINGRESP: only a server sends these
            raise MalformedPacket(f"{ptype.name} from a client")
        return True

    def _subscribe(self, client: _Client, body: bytes) -> None:
        sub = parse_subscribe(body)
        granted = [min(qos, MAX_QOS) for _, qos in sub.filters]  # [3.8.4]: the server may grant less
        for (topic_filter, _), qos in zip(sub.filters, granted, strict=True):
            client.subscriptions[topic_filter] = qos  # an identical filter is replaced [MQTT-3.8.4-3]
        self._send(client, suback(sub.packet_id, granted))
        # Retained messages matching each new (or replaced) subscription, with RETAIN set
        # [MQTT-3.3.1-6] [MQTT-3.3.1-8] [MQTT-3.8.4-3]; after the SUBACK (either order is allowed [3.8.4]).
        for (topic_filter, _), qos in zip(sub.filters, granted, strict=True):
            for msg in list(self._retained.values()):
                if topic_matches(topic_filter, msg.topic):
                    self._deliver(client, Message(msg.topic, msg.payload, min(msg.qos, qos), True))

    # -- routing -----------------------------------------------------------------------------------

    def _publish(self, msg: Message) -> None:
        """Route one application message to every matching subscription, and keep it if retained."""
        if msg.retain:
            if msg.payload:
                self._retained[msg.topic] = msg  # replaces the topic's previous one [MQTT-3.3.1-5]
            else:
                self._retained.pop(msg.topic, None)  # empty: clear, and store nothing [MQTT-3.3.1-10/11]
        for client in list(self._sessions.values()):
            if client.dead:
                continue
            # Overlapping subscriptions: one copy at the highest QoS among them [MQTT-3.3.5-1].
            granted = max(
                (q for f, q in client.subscriptions.items() if topic_matches(f, msg.topic)), default=-1
            )
            if granted >= 0:
                # RETAIN is 0 towards established subscriptions, however it was published [MQTT-3.3.1-9].
                self._deliver(client, Message(msg.topic, msg.payload, min(msg.qos, granted), False))

    def _deliver(self, client: _Client, msg: Message) -> None:
        if msg.qos == 0:
            self._send(client, publish(msg))
            return
        if len(client.inflight) >= MAX_PACKET_ID:
            self._drop(client, f"{MAX_PACKET_ID} QoS 1 messages unacknowledged")
            return
        pid = client.next_packet_id
        while pid in client.inflight:
            pid = pid % MAX_PACKET_ID + 1
        client.next_packet_id = pid % MAX_PACKET_ID + 1  # 1..65535, never 0 [MQTT-2.3.1-1]
        # Unacknowledged messages are re-sent only on reconnection with a kept session [4.4]; with
        # clean sessions only, they are forgotten when the connection ends.
        client.inflight.add(pid)
        self._send(client, publish(msg, pid))

    def _send(self, client: _Client, data: bytes) -> None:
        """Queue bytes on the client's own transport; never waits for it to read them."""
        if client.dead:
            return
        client.writer.write(data)
        if client.writer.transport.get_write_buffer_size() > self.max_write_buffer:
            self._drop(client, f"over {self.max_write_buffer} bytes waiting to be read: a slow consumer")

    def _drop(self, client: _Client, reason: str) -> None:
        """End a connection from inside routing: its own task closes it (and publishes its Will)."""
        client.fail(reason)
        client.writer.transport.abort()  # its read ends at once; the task's finally runs _close

    # -- the end of a connection -------------------------------------------------------------------

    def _close(self, client: _Client) -> None:
        """Forget the session, publish the Will unless DISCONNECT came [MQTT-3.1.2-8], log one line."""
        if client.closed:
            return
        client.closed = True
        client.dead = True  # nothing more is written to it; its reason is what ended it, or the default
        if client.client_id is not None and self._sessions.get(client.client_id) is client:
            del self._sessions[client.client_id]
        client.subscriptions.clear()
        will, client.will = client.will, None  # published at most once [MQTT-3.1.2-10]
        self._log.log(client.level, "mqtt broker: closed %s: %s", client.name(), client.reason)
        if will is not None and not client.disconnected and not self._stopping:
            self._publish(will)  # a retained Will is stored as retained [3.1.2.7]
        client.writer.close()  # flushes what is queued (a refusing CONNACK) before closing

    async def _drain_and_close(self, client: _Client) -> None:
        try:
            async with asyncio.timeout(2.0):
                await client.writer.wait_closed()
        except (TimeoutError, ConnectionError, OSError):
            client.writer.transport.abort()  # a peer that does not read does not hold up the close
        with contextlib.suppress(Exception):
            await client.writer.wait_closed()
