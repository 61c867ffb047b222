"""``tablectl archive``: one worker of the shared subscription, from the broker to PostgreSQL.

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
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import paho.mqtt.client as mqtt
import psycopg
import structlog
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from controller.archive import alarms, gaps
from controller.archive.alarms import ChainAlarm
from controller.archive.connection import ArchiveConnection
from controller.archive.messages import ArchivedEvent, Refused, Unreadable, parse_event
from controller.archive.mqtt_client import BufferedClient
from controller.archive.upkeep import upkeep
from controller.backoff import Backoff, BackoffPolicy
from controller.errors import TablectlError
from controller.telemetry.broker import BrokerSettings
from controller.telemetry.topics import ROOT

log = structlog.get_logger("tablectl.archive")


@dataclass(frozen=True)
class ArchiveSettings:
    broker: BrokerSettings
    dsn: str
    group: str = "archive"
    client_id: str = "tablectl-archive"
    batch: int = 2000  # messages per transaction at most
    receive_maximum: int = 10_000  # unacknowledged messages the broker may have out to us
    session_expiry_s: int = 7 * 86400  # how long the broker keeps our queue while we are away
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
    # At start, how often PostgreSQL may refuse before the worker gives up with one line (a wrong
    # URL or database never comes right by waiting); once running, it waits for PostgreSQL for
    # as long as it takes, holding the messages unacknowledged.
    start_attempts: int = 5

    @property
    def subscription(self) -> str:
        return f"$share/{self.group}/{ROOT}/+/+/events"


@dataclass(frozen=True, slots=True)
class Incoming:
    connection: int  # which connection delivered it: an ack is only valid on that one
    mid: int
    qos: int
    topic: str
    body: bytes
    received: datetime


_REFUSALS_REMEMBERED = 10_000

# A batch as received, the events parsed from it, and the alarms for the records refused.
Parsed = tuple[list[Incoming], list[ArchivedEvent], list[ChainAlarm]]


class ArchiveWorker:
    def __init__(self, settings: ArchiveSettings) -> None:
        self.settings = settings
        self.stored = 0  # rows this worker inserted
        self.duplicates = 0
        self.unreadable = 0
        self.refused = 0  # records parsed and refused (kind, classification, shape or hash)
        # Refusals already raised: one alarm each, however often the same record comes (bounded).
        self._refusals_said: set[tuple[str, str, int, str]] = set()
        self.dropped = 0  # events of unknown tables, and records quarantined at arrival
        self.timings = {"parse_s": 0.0, "commit_s": 0.0, "ack_s": 0.0}  # where a batch's time goes
        self.db_failures = 0  # attempts PostgreSQL refused (it was away); the batch was kept
        self.batches = 0  # batches committed (with timings["commit_s"]: /metrics' commit summary)
        self.lag_s: float | None = None  # the newest record of the last batch: its age at commit
        self.last_commit: float | None = None  # when (epoch seconds)
        self.alarms: list[ChainAlarm] = []
        self.gap_requests = 0  # cmd/republish sent by this worker
        # Tables' answers to republish (paho's thread appends, the loop pops): see controller/archive/gaps.py.
        self._answers: collections.deque[tuple[str, bytes]] = collections.deque(maxlen=10_000)
        self.subscribed = asyncio.Event()
        self._connection = 0
        # paho's thread appends, the event loop pops: deque's append and popleft are atomic. The
        # loop is woken once per burst, not once per message (call_soon_threadsafe writes to the
        # loop's self-pipe each time, which at thousands a second costs more than the insert).
        self._inbox: collections.deque[Incoming] = collections.deque()
        self._arrived = asyncio.Event()
        self._wake_pending = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: mqtt.Client | None = None
        self._pg = ArchiveConnection(
            settings.dsn, settings.client_id, settings.tables, settings.tables_source
        )
        self._log = log.bind(client_id=settings.client_id)
        self._progress = asyncio.Event()

    @property
    def inbox_depth(self) -> int:
        return len(self._inbox)

    @property
    def db_connected(self) -> bool:
        return self._pg.store is not None

    @property
    def chain_alarms(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for alarm in self.alarms:
            counts[alarm.kind] = counts.get(alarm.kind, 0) + 1
        return counts

    async def progressed(self) -> None:
        """Returns after the next commit, sweep or failed attempt: for whoever waits on this worker."""
        await self._progress.wait()

    def _notify(self) -> None:
        self._progress.set()
        self._progress = asyncio.Event()

    # -- MQTT: paho's thread ---------------------------------------------------------------------

    def _on_connect(self, client: mqtt.Client, _u: object, _f: object, reason: Any, _p: object) -> None:
        if reason.is_failure:
            self._log.warning("archive.broker_refused", reason=str(reason))
            return
        self._connection += 1
        # The answers to our republish requests: QoS 0, as a lost answer is asked for again.
        client.subscribe(
            [(self.settings.subscription, SubscribeOptions(qos=1)), (gaps.RESULTS, SubscribeOptions(qos=0))]
        )

    def _on_subscribe(self, _c: mqtt.Client, _u: object, _mid: int, reasons: Any, _p: object) -> None:
        refused = [str(r) for r in reasons if r.is_failure]
        if refused:
            # An ACL without read on the events topics: say so, or the worker would wait for ever.
            self._log.error(
                "archive.subscribe_refused", subscription=self.settings.subscription, reason=refused[0]
            )
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(self.subscribed.set)

    def _on_disconnect(self, _c: mqtt.Client, _u: object, _f: object, reason: Any, _p: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.subscribed.clear)
        self._log.warning("archive.broker_disconnected", reason=str(reason))

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        if not msg.topic.endswith("/events"):
            self._answers.append((msg.topic, bytes(msg.payload)))  # a republish result (QoS 0)
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

    def _ack(self, items: list[Incoming]) -> None:
        client = self._client
        assert client is not None
        for item in items:
            if item.qos > 0 and item.connection == self._connection:
                client.ack(item.mid, item.qos)

    def _publish_alarms(self, found: list[ChainAlarm]) -> None:
        client = self._client
        for alarm in found:
            self._log.error(
                "archive.chain_alarm",
                site=alarm.site,
                table=alarm.table_id,
                seq=alarm.seq,
                alarm=alarm.kind,
                detail=alarm.detail,
            )
            self.alarms.append(alarm)
            if client is not None:
                client.publish(alarm.topic, json.dumps(alarm.message()), qos=1)

    def _ask(self, asks: list[gaps.Ask]) -> None:
        client = self._client
        for ask in asks:
            if client is not None:
                client.publish(ask.topic, ask.message(self.settings.client_id), qos=1)
                self.gap_requests += 1

    # -- PostgreSQL -------------------------------------------------------------------------------

    async def _until_committed(
        self, events: list[ArchivedEvent], refused: list[ChainAlarm], stop: asyncio.Event
    ) -> bool:
        """Store the batch, retrying while PostgreSQL is away; False when asked to stop first."""
        backoff = Backoff(BackoffPolicy(initial_s=0.2, max_s=self.settings.retry_max_s))
        while True:
            try:
                store = await self._pg.open()
                result = await store.store(events, refused)
            except psycopg.OperationalError as e:
                self._log.warning("archive.db_unavailable", error=str(e).splitlines()[0][:200])
                self.db_failures += 1
                self._notify()
                await self._pg.drop()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff.failed()):
                        await stop.wait()
                if stop.is_set():
                    return False
                continue
            self.stored += result.inserted
            self.duplicates += result.duplicates
            self.dropped += result.dropped
            self.batches += 1
            self.last_commit = time.time()
            dated = [e.at for e in events if e.at is not None]
            if dated:
                self.lag_s = max(0.0, self.last_commit - max(dated))
            self._publish_alarms(result.alarms)
            return True

    async def _sweep(self) -> None:
        s = self.settings
        try:
            conn = (await self._pg.open()).conn
            answers = [self._answers.popleft() for _ in range(len(self._answers))]
            found, asks = await upkeep(
                conn,
                answers,
                gap_grace_s=s.gap_grace_s,
                gap_alarm_s=s.gap_alarm_s,
                ask_initial_s=s.gap_ask_initial_s,
                ask_max_s=s.gap_ask_max_s,
            )
            self._publish_alarms(found)
            self._ask(asks)
        except psycopg.OperationalError as e:
            self._log.warning("archive.db_unavailable", error=str(e).splitlines()[0][:200])
            await self._pg.drop()

    # -- the loop ---------------------------------------------------------------------------------

    async def _next_batch(self, wait_s: float) -> list[Incoming]:
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

    async def run(self, stop: asyncio.Event) -> None:
        """Archive until ``stop`` is set; what was received but not committed is left unacknowledged."""
        self._loop = asyncio.get_running_loop()
        await self._db_ready(stop)
        self._client = self._start_mqtt()
        self._log.info("archive.started", subscription=self.settings.subscription)
        # Two stages, so the next batch is parsed while PostgreSQL commits this one. The queue holds
        # one parsed batch: commits (and so acknowledgements) stay in the order messages came.
        parsed: asyncio.Queue[Parsed] = asyncio.Queue(maxsize=1)
        parser = asyncio.create_task(self._parse_loop(parsed, stop))
        try:
            await self._commit_loop(parsed, stop)
        finally:
            parser.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await parser
            self._client.disconnect()
            self._client.loop_stop()
            await self._pg.drop()
            spent = {k: round(v, 2) for k, v in self.timings.items()}
            self._log.info("archive.stopped", stored=self.stored, duplicates=self.duplicates, **spent)

    async def _db_ready(self, stop: asyncio.Event) -> None:
        # The schema is brought up to date before anything is received: a worker that cannot reach
        # PostgreSQL does not take messages off the broker for nothing. A few attempts with the
        # one backoff (a database restarting with the worker), then one line and out.
        backoff = Backoff(BackoffPolicy(initial_s=0.25, max_s=self.settings.retry_max_s))
        for attempt in range(1, self.settings.start_attempts + 1):
            if stop.is_set():
                return
            try:
                await self._pg.open()
                return
            except psycopg.OperationalError as e:
                reason = str(e).splitlines()[0][:200]
                self._log.warning("archive.db_unavailable", error=reason, attempt=attempt)
                if attempt == self.settings.start_attempts:
                    raise TablectlError(
                        f"archive: PostgreSQL unreachable after {attempt} attempts: {reason}"
                    ) from None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff.failed()):
                        await stop.wait()

    async def _parse_loop(self, parsed: asyncio.Queue[Parsed], stop: asyncio.Event) -> None:
        while not stop.is_set():
            batch = await self._next_batch(0.5)
            if not batch:
                continue
            t0 = time.perf_counter()
            events: list[ArchivedEvent] = []
            refused: list[ChainAlarm] = []
            for item in batch:
                try:
                    events.append(parse_event(item.topic, item.body, item.received))
                except Refused as e:
                    self.refused += 1
                    said = (e.site, e.table_id, e.seq, e.reason)
                    if said in self._refusals_said:
                        continue  # the same refusal again (a redelivery, or a flood): counted only
                    if len(self._refusals_said) >= _REFUSALS_REMEMBERED:
                        self._refusals_said.clear()
                    self._refusals_said.add(said)
                    make = alarms.bad_hash if e.alarm == "bad_hash" else None
                    refused.append(
                        make(e.site, e.table_id, e.seq)
                        if make is not None
                        else alarms.refused(e.site, e.table_id, e.seq, e.reason)
                    )
                except Unreadable as e:
                    self.unreadable += 1
                    self._log.warning("archive.unreadable", error=str(e))
            self.timings["parse_s"] += time.perf_counter() - t0
            await parsed.put((batch, events, refused))

    async def _commit_loop(self, parsed: asyncio.Queue[Parsed], stop: asyncio.Event) -> None:
        next_sweep = time.monotonic() + self.settings.sweep_s
        while not stop.is_set():
            try:
                async with asyncio.timeout(max(0.0, min(next_sweep - time.monotonic(), 0.5))):
                    batch, events, refused = await parsed.get()
            except TimeoutError:
                pass
            else:
                t1 = time.perf_counter()
                if not await self._until_committed(events, refused, stop):
                    return  # asked to stop while PostgreSQL was away: nothing acknowledged
                t2 = time.perf_counter()
                self._ack(batch)
                self.timings["commit_s"] += t2 - t1
                self.timings["ack_s"] += time.perf_counter() - t2
                self._notify()
            if time.monotonic() >= next_sweep:
                await self._sweep()
                self._notify()
                next_sweep = time.monotonic() + self.settings.sweep_s
