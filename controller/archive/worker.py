"""``tablectl archive``: one worker of the shared subscription, from the broker to PostgreSQL.

This module is the MQTT transport only; the pipeline (parse, refusals, commit, alarms, sweep) is
controller/archive/ingest.py, the same for the JetStream worker.

Why paho-mqtt and not aiomqtt here: aiomqtt acknowledges a QoS 1 message as soon as it is queued,
so a worker that died between receiving and committing would lose it. paho's ``manual_ack``
lets the PUBACK wait for the commit; with a persistent session (a fixed client id,
``clean_start=False`` and a session expiry) the broker sends every unacknowledged message again
when the worker comes back. paho runs its network loop in its own thread; messages cross to the
event loop through ``call_soon_threadsafe`` and the broker never has more than
``receive_maximum`` unacknowledged ones out to us, which bounds the queue.

An acknowledgement carries a packet id, which only means something on the connection that
delivered the message; a message from an earlier connection is not acknowledged on a later one
(the broker sends it again on the resumed session and the insert ignores the repeat).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from controller.archive import gaps
from controller.archive.alarms import ChainAlarm
from controller.archive.ingest import Ingest, IngestSettings
from controller.archive.mqtt_client import BufferedClient
from controller.telemetry.broker import BrokerSettings
from controller.telemetry.topics import ROOT


@dataclass(frozen=True)
class ArchiveSettings:
    broker: BrokerSettings
    dsn: str
    group: str = "archive"
    client_id: str = "tablectl-archive"
    batch: int = 2000  # messages per transaction at most
    receive_maximum: int = 10_000  # unacknowledged messages the broker may have out to us
    # How long the broker keeps our session (and our share of the events) while we are away. Short:
    # a worker that is gone for good gives its share back to the group within a minute, and the
    # records it would have missed meanwhile stay in the tables' journals (gaps are asked for).
    session_expiry_s: int = 60
    sweep_s: float = 1.0
    gap_grace_s: float = 10.0  # a missing record this long after the next one is a gap: ask for it
    gap_alarm_s: float = 120.0  # a gap still open this long (the table does not answer) is raised
    gap_ask_initial_s: float = 1.0  # the first wait before asking for a gap again; doubles
    gap_ask_max_s: float = 60.0
    retry_max_s: float = 10.0
    # Tables whose events are archived, (site, table_id), added to known_tables on start; events
    # of a table not there are an unknown_table alarm, not rows.
    tables: tuple[tuple[str, str], ...] = ()
    tables_source: str = "tablectl archive --table"
    # At start, how often PostgreSQL may refuse before the worker gives up with one line.
    start_attempts: int = 5

    @property
    def subscription(self) -> str:
        return f"$share/{self.group}/{ROOT}/+/+/events"

    @property
    def ingest(self) -> IngestSettings:
        return IngestSettings(
            self.dsn,
            self.client_id,
            sweep_s=self.sweep_s,
            gap_grace_s=self.gap_grace_s,
            gap_alarm_s=self.gap_alarm_s,
            gap_ask_initial_s=self.gap_ask_initial_s,
            gap_ask_max_s=self.gap_ask_max_s,
            retry_max_s=self.retry_max_s,
            tables=self.tables,
            tables_source=self.tables_source,
            start_attempts=self.start_attempts,
        )


@dataclass(frozen=True, slots=True)
class Incoming:
    connection: int  # which connection delivered it: an ack is only valid on that one
    mid: int
    qos: int
    topic: str
    body: bytes
    received: datetime


class ArchiveWorker(Ingest[Incoming]):
    def __init__(self, settings: ArchiveSettings) -> None:
        super().__init__(settings.ingest)
        self.settings = settings
        self.subscribed = self.ready  # the MQTT name of the same event
        # Tables' answers to republish (paho's thread appends, the loop pops): see controller/archive/gaps.py.
        self._answers: collections.deque[tuple[str, bytes]] = collections.deque(maxlen=10_000)
        self._connection = 0
        # paho's thread appends, the event loop pops: deque's append and popleft are atomic. The
        # loop is woken once per burst, not once per message (call_soon_threadsafe writes to the
        # loop's self-pipe each time, which at thousands a second costs more than the insert).
        self._inbox: collections.deque[Incoming] = collections.deque()
        self._arrived = asyncio.Event()
        self._wake_pending = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: mqtt.Client | None = None

    @property
    def inbox_depth(self) -> int:
        return len(self._inbox)

    # -- MQTT: paho's thread ---------------------------------------------------------------------

    def _on_connect(self, client: mqtt.Client, _u: object, _f: object, reason: Any, _p: object) -> None:
        if reason.is_failure:
            self._log.warning("archive.broker_refused", reason=str(reason))
            return
        self._connection += 1
        # The answers to our republish requests, and where each table's journal stands (its
        # retained birth, its heartbeat): QoS 0, as a lost one is followed by another.
        client.subscribe(
            [
                (self.settings.subscription, SubscribeOptions(qos=1)),
                (gaps.RESULTS, SubscribeOptions(qos=0)),
                *((t, SubscribeOptions(qos=0)) for t in gaps.ANNOUNCEMENTS),
            ]
        )

    def _on_subscribe(self, _c: mqtt.Client, _u: object, _mid: int, reasons: Any, _p: object) -> None:
        refused = [str(r) for r in reasons if r.is_failure]
        if refused:
            # An ACL without read on the events topics: say so, or the worker would wait for ever.
            self._log.error(
                "archive.subscribe_refused", subscription=self.settings.subscription, reason=refused[0]
            )
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(self.ready.set)

    def _on_disconnect(self, _c: mqtt.Client, _u: object, _f: object, reason: Any, _p: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.ready.clear)
        self._log.warning("archive.broker_disconnected", reason=str(reason))

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        if not msg.topic.endswith("/events"):
            self._answers.append((msg.topic, bytes(msg.payload)))  # a republish result, birth or heartbeat
            return
        self._inbox.append(
            Incoming(self._connection, msg.mid, msg.qos, msg.topic, bytes(msg.payload), datetime.now(UTC))
        )
        if not self._wake_pending.is_set():
            self._wake_pending.set()
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._arrived.set)

    def _start_mqtt(self) -> mqtt.Client:
        s, b = self.settings, self.settings.broker
        client = BufferedClient(
            CallbackAPIVersion.VERSION2, client_id=s.client_id, protocol=mqtt.MQTTv5, manual_ack=True
        )
        if b.username is not None:
            client.username_pw_set(b.username, b.password)
        context = b.tls_context()
        if context is not None:
            client.tls_set_context(context)
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.reconnect_delay_set(min_delay=1, max_delay=int(s.retry_max_s))
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = s.session_expiry_s
        props.ReceiveMaximum = s.receive_maximum
        client.connect_async(b.host, b.port, keepalive=b.keepalive, clean_start=False, properties=props)
        client.loop_start()
        return client

    # -- the transport ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def connected(self, stop: asyncio.Event) -> AsyncIterator[None]:
        self._loop = asyncio.get_running_loop()
        client = self._client = self._start_mqtt()
        self._log.info("archive.started", subscription=self.settings.subscription)
        try:
            yield
        finally:
            client.disconnect()
            client.loop_stop()

    async def take(self, wait_s: float) -> list[Incoming]:
        if not self._inbox:
            try:
                async with asyncio.timeout(wait_s):
                    await self._arrived.wait()
            except TimeoutError:
                return []
        # Cleared before taking: a message appended from here on sets it again.
        self._arrived.clear()
        self._wake_pending.clear()
        batch: list[Incoming] = []
        while self._inbox and len(batch) < self.settings.batch:
            batch.append(self._inbox.popleft())
        if self._inbox:
            self._arrived.set()
        return batch

    async def acknowledge(self, batch: list[Incoming]) -> None:
        client = self._client
        assert client is not None
        for item in batch:
            if item.qos > 0 and item.connection == self._connection:
                client.ack(item.mid, item.qos)

    async def send_alarm(self, alarm: ChainAlarm) -> None:
        if self._client is not None:
            self._client.publish(alarm.topic, json.dumps(alarm.message()), qos=1)

    async def send_ask(self, ask: gaps.Ask) -> None:
        if self._client is not None:
            self._client.publish(ask.topic, ask.message(self.settings.client_id), qos=1)

    def answers(self) -> list[tuple[str, bytes]]:
        return [self._answers.popleft() for _ in range(len(self._answers))]
