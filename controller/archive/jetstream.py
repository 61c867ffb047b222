"""``tablectl archive --nats``: one worker of a JetStream cluster's durable consumer.

The clustered events pipeline (docs/scale-out.md): the tables publish over MQTT to the NATS
servers' MQTT listener as they do to mosquitto; a stream replicated on three nodes captures every
table's events subject (MQTT ``tablectl/<site>/<table>/events`` is NATS
``tablectl.<site>.<table>.events``), and the archive's workers pull from one durable consumer,
so they share the load, and acknowledge each message only after PostgreSQL committed it. A
message a worker took and never acknowledged (it died) goes to another after ``ack_wait_s``; a
repeat costs nothing (the insert is idempotent). Gaps, the chain sweep and the alarms are the
MQTT worker's (controller/archive/upkeep.py): republish requests and chain alarms go out as NATS
messages, which the MQTT listener hands to the tables and the floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats
import psycopg
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError, NoServersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from controller.archive.alarms import ChainAlarm
from controller.archive.connection import ArchiveConnection
from controller.archive.gaps import RESULTS, Ask
from controller.archive.messages import ArchivedEvent, Unreadable, parse_event
from controller.archive.upkeep import upkeep
from controller.backoff import Backoff, BackoffPolicy
from controller.telemetry.nats_link import subject_of, topic_of
from controller.telemetry.topics import ROOT

log = structlog.get_logger("tablectl.archive")

EVENTS_SUBJECT = f"{ROOT}.*.*.events"
DUPLICATE_WINDOW_S = 120.0  # nats-server's default; ids are kept in memory for this long


@dataclass(frozen=True)
class JetStreamSettings:
    servers: list[str] = field(default_factory=list)  # nats://host:port of every node
    dsn: str = ""
    client_id: str = "tablectl-archive"
    stream: str = "TABLECTL_EVENTS"
    durable: str = "archive"
    replicas: int = 3  # the stream and the consumer, on three nodes: one may be lost
    batch: int = 500  # messages pulled (and committed) at a time
    ack_wait_s: float = 30.0  # a message taken by a worker that died goes to another after this
    max_ack_pending: int = 20_000
    sweep_s: float = 1.0
    gap_grace_s: float = 10.0
    gap_alarm_s: float = 120.0
    gap_ask_initial_s: float = 1.0
    gap_ask_max_s: float = 60.0
    retry_max_s: float = 10.0
    # Tables whose events are archived, (site, table_id), added to known_tables on start; events
    # of a table not there are an unknown_table alarm, not rows (as on the MQTT path).
    tables: tuple[tuple[str, str], ...] = ()
    tables_source: str = "tablectl archive --table"


async def ensure_stream(js: JetStreamContext, s: JetStreamSettings) -> None:
    """The replicated stream of every table's events, made once by whichever worker starts first."""
    try:
        await js.stream_info(s.stream)
    except NotFoundError:
        await js.add_stream(
            StreamConfig(
                name=s.stream,
                subjects=[EVENTS_SUBJECT],
                retention=RetentionPolicy.WORK_QUEUE,  # a message is gone once the archive has it
                storage=StorageType.FILE,
                num_replicas=s.replicas,
                # A record sent again within this window (a PubAck lost, a republish) is stored
                # once: the tables' Nats-Msg-Id. After it, the archive's primary key still is.
                duplicate_window=DUPLICATE_WINDOW_S,
            )
        )


class JetStreamWorker:
    def __init__(self, settings: JetStreamSettings) -> None:
        self.settings = settings
        self.stored = 0
        self.duplicates = 0  # redeliveries the idempotent insert absorbed
        self.unreadable = 0
        self.gap_requests = 0
        self.db_failures = 0
        self.alarms: list[ChainAlarm] = []
        self.ready = asyncio.Event()  # subscribed to the durable consumer
        self._answers: list[tuple[str, bytes]] = []
        self._nc: NATS | None = None
        self._pg = ArchiveConnection(settings.dsn, "", settings.tables, settings.tables_source)
        self._log = log.bind(client_id=settings.client_id)
        self._progress = asyncio.Event()

    # nats-py prints its connection errors with tracebacks unless given these: one line each.
    async def _on_error(self, e: Exception) -> None:
        self._log.warning("archive.cluster_error", error=type(e).__name__)

    async def _on_disconnected(self) -> None:
        self._log.warning("archive.cluster_disconnected")

    async def _on_reconnected(self) -> None:
        nc = self._nc
        self._log.info(
            "archive.cluster_reconnected",
            server=str(nc.connected_url.netloc) if nc and nc.connected_url else None,
        )

    async def _on_answer(self, msg: Msg) -> None:
        if len(self._answers) < 10_000:
            self._answers.append((topic_of(msg.subject), msg.data))

    async def progressed(self) -> None:
        """Returns after the next commit or sweep: for whoever waits on this worker."""
        await self._progress.wait()

    def _notify(self) -> None:
        self._progress.set()
        self._progress = asyncio.Event()

    async def _db_ready(self, stop: asyncio.Event) -> None:
        # The schema is brought up to date before anything is taken from the stream.
        backoff = Backoff(BackoffPolicy(initial_s=0.2, max_s=self.settings.retry_max_s))
        while not stop.is_set():
            try:
                await self._pg.open()
                return
            except psycopg.OperationalError as e:
                self._log.warning("archive.db_unavailable", error=str(e).splitlines()[0][:200])
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff.failed()):
                        await stop.wait()

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        await self._db_ready(stop)
        nc = await nats.connect(
            servers=s.servers,
            name=s.client_id,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            connect_timeout=2,
            error_cb=self._on_error,
            disconnected_cb=self._on_disconnected,
            reconnected_cb=self._on_reconnected,
        )
        self._nc = nc
        try:
            js = nc.jetstream(timeout=5)
            await self._until(lambda: ensure_stream(js, s), stop)
            config = ConsumerConfig(
                durable_name=s.durable,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=s.ack_wait_s,
                max_ack_pending=s.max_ack_pending,
                num_replicas=s.replicas,
            )
            sub = await js.pull_subscribe(EVENTS_SUBJECT, durable=s.durable, stream=s.stream, config=config)
            await nc.subscribe(subject_of(RESULTS).replace("+", "*"), cb=self._on_answer)
            self.ready.set()
            self._log.info("archive.started", stream=s.stream, durable=s.durable)
            await self._loop(sub, stop)
        finally:
            with contextlib.suppress(Exception):
                await nc.close()
            await self._pg.drop()
            self._log.info("archive.stopped", stored=self.stored, duplicates=self.duplicates)

    async def _until(self, attempt: Any, stop: asyncio.Event) -> None:
        backoff = Backoff(BackoffPolicy(initial_s=0.2, max_s=self.settings.retry_max_s))
        while not stop.is_set():
            try:
                await attempt()
                return
            except (TimeoutError, NatsTimeout, NoServersError, ConnectionClosedError, nats.errors.Error) as e:
                self._log.warning("archive.cluster_unavailable", error=type(e).__name__)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff.failed()):
                        await stop.wait()

    async def _loop(self, sub: JetStreamContext.PullSubscription, stop: asyncio.Event) -> None:
        s = self.settings
        next_sweep = time.monotonic() + s.sweep_s
        while not stop.is_set():
            try:
                msgs = await sub.fetch(s.batch, timeout=0.5)
            except (NatsTimeout, TimeoutError):
                msgs = []
            except (ConnectionClosedError, NoServersError, nats.errors.Error) as e:
                # A node went away under the fetch: the client reconnects to another on its own.
                self._log.warning("archive.cluster_unavailable", error=type(e).__name__)
                msgs = []
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await stop.wait()
            if msgs:
                received = datetime.now(UTC)
                events: list[ArchivedEvent] = []
                for msg in msgs:
                    try:
                        events.append(parse_event(topic_of(msg.subject), msg.data, received))
                    except Unreadable as e:
                        self.unreadable += 1
                        self._log.warning("archive.unreadable", error=str(e))
                if not await self._until_committed(events, stop):
                    return  # asked to stop while PostgreSQL was away: nothing acknowledged
                for msg in msgs:
                    # After the commit: a lost ack only means the message comes again.
                    with contextlib.suppress(Exception):
                        await msg.ack()
                self._notify()
            if time.monotonic() >= next_sweep:
                await self._sweep()
                self._notify()
                next_sweep = time.monotonic() + s.sweep_s

    async def _until_committed(self, events: list[ArchivedEvent], stop: asyncio.Event) -> bool:
        backoff = Backoff(BackoffPolicy(initial_s=0.2, max_s=self.settings.retry_max_s))
        while True:
            try:
                result = await (await self._pg.open()).store(events)
            except psycopg.OperationalError as e:
                self._log.warning("archive.db_unavailable", error=str(e).splitlines()[0][:200])
                self.db_failures += 1
                await self._pg.drop()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff.failed()):
                        await stop.wait()
                if stop.is_set():
                    return False
                continue
            self.stored += result.inserted
            self.duplicates += result.duplicates
            await self._publish_alarms(result.alarms)
            return True

    async def _sweep(self) -> None:
        s = self.settings
        try:
            conn = (await self._pg.open()).conn
            answers, self._answers = self._answers, []
            found, asks = await upkeep(
                conn,
                answers,
                gap_grace_s=s.gap_grace_s,
                gap_alarm_s=s.gap_alarm_s,
                ask_initial_s=s.gap_ask_initial_s,
                ask_max_s=s.gap_ask_max_s,
            )
        except psycopg.OperationalError as e:
            self._log.warning("archive.db_unavailable", error=str(e).splitlines()[0][:200])
            await self._pg.drop()
            return
        await self._publish_alarms(found)
        await self._ask(asks)

    async def _publish_alarms(self, found: list[ChainAlarm]) -> None:
        for alarm in found:
            self._log.error(
                "archive.chain_alarm", site=alarm.site, table=alarm.table_id, seq=alarm.seq, alarm=alarm.kind
            )
            self.alarms.append(alarm)
            if self._nc is not None:
                with contextlib.suppress(Exception):
                    await self._nc.publish(subject_of(alarm.topic), json.dumps(alarm.message()).encode())

    async def _ask(self, asks: list[Ask]) -> None:
        for ask in asks:
            if self._nc is not None:
                with contextlib.suppress(Exception):
                    await self._nc.publish(subject_of(ask.topic), ask.message(self.settings.client_id))
                    self.gap_requests += 1
