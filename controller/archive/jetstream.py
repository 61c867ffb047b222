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
from controller.telemetry.nats_link import NatsSettings, subject_of, topic_of
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
    batch: int = 500  # messages pulled at a time
    fetch_ahead: int = 8  # batches fetched while a commit runs
    fetchers: int = 4  # pulls outstanding at once
    commit_max: int = 4000  # messages committed together at most (well under max_ack_pending)
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
    # User, password and TLS; None: servers as they are, no user (a test's or a bench's cluster).
    nats: NatsSettings | None = None

    def connection(self) -> NatsSettings:
        return self.nats or NatsSettings(tuple(self.servers))


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


async def _ack(msgs: list[Msg]) -> None:
    for msg in msgs:
        with contextlib.suppress(Exception):
            await msg.ack()  # buffered by the client; flushed with the next fetch


class Lag:
    """The archive's lag, an event's ``at`` to its commit, as the worst of the last ``window_s``."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._worst: list[tuple[float, float]] = []  # (when, worst lag of a batch)

    def observe(self, when: float, events: list[ArchivedEvent]) -> None:
        if events:
            ats = [e.at for e in events if e.at is not None]
            if ats:
                self._worst.append((when, max(0.0, when - min(ats))))

    def recent_s(self) -> float:
        now = time.time()
        self._worst = [(w, lag) for w, lag in self._worst if now - w <= self.window_s]
        return max((lag for _, lag in self._worst), default=0.0)


async def setup(settings: JetStreamSettings) -> None:
    """``tablectl archive --nats ... --setup``: an admin makes the stream and the workers' durable
    consumer (the workers' own permissions cannot make a stream)."""
    nc = await settings.connection().connect("tablectl-archive-setup", on_error=_quiet)
    try:
        js = nc.jetstream(timeout=10)
        await ensure_stream(js, settings)
        await js.add_consumer(settings.stream, JetStreamWorker(settings)._consumer_config())
    finally:
        await nc.close()


async def _quiet(_e: Exception) -> None:
    pass  # the setup's one request fails or not; its result says


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
        self.stream_problem: str | None = None  # the stream or consumer is missing: /healthz fails
        self._problem_logged = 0.0
        self.pending = 0  # the consumer's messages not yet delivered, at the last check
        self._lag = Lag()

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
        nc = await s.connection().connect(
            s.client_id,
            on_error=self._on_error,
            on_disconnected=self._on_disconnected,
            on_reconnected=self._on_reconnected,
        )
        self._nc = nc
        try:
            js = nc.jetstream(timeout=5)
            await self._until(lambda: self._check_stream(js), stop)
            # Several pulls outstanding at once (each its own inbox): one pull at a time left the
            # worker waiting on the cluster's delivery between fetches.
            subs = [await js.pull_subscribe_bind(s.durable, s.stream) for _ in range(s.fetchers)]
            await nc.subscribe(subject_of(RESULTS).replace("+", "*"), cb=self._on_answer)
            self.ready.set()
            self._log.info("archive.started", stream=s.stream, durable=s.durable)
            await self._loop(js, subs, stop)
        finally:
            with contextlib.suppress(Exception):
                await nc.close()
            await self._pg.drop()
            self._log.info("archive.stopped", stored=self.stored, duplicates=self.duplicates)

    def _consumer_config(self) -> ConsumerConfig:
        s = self.settings
        return ConsumerConfig(
            durable_name=s.durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=s.ack_wait_s,
            max_ack_pending=s.max_ack_pending,
            num_replicas=s.replicas,
            filter_subject=EVENTS_SUBJECT,
        )

    async def _check_stream(self, js: JetStreamContext) -> None:
        """The stream and the durable consumer are there, checked every loop: a missing consumer
        is made again (a worker's own right); a missing stream is made again only by a worker
        allowed to (no user: a lab's open cluster), else it is the ``stream_missing`` alarm,
        logged at once and every minute while it lasts. Meanwhile the tables get no PubAck and
        keep their records: nothing is lost, the floor's record waits."""
        s = self.settings
        try:
            await js.stream_info(s.stream)
        except NotFoundError:
            if s.connection().username is not None:
                self._stream_problem(f"stream {s.stream} does not exist; an admin must make it (--setup)")
                return
            await ensure_stream(js, s)
            self._stream_problem(f"stream {s.stream} did not exist; made again", recovered=True)
        try:
            info = await js.consumer_info(s.stream, s.durable)
        except NotFoundError:
            await js.add_consumer(s.stream, self._consumer_config())
            self._log.error("archive.consumer_recreated", stream=s.stream, durable=s.durable)
            info = await js.consumer_info(s.stream, s.durable)
        self.pending = info.num_pending
        if self.stream_problem is not None:
            self._log.warning("archive.stream_back", stream=s.stream, was=self.stream_problem)
            self.stream_problem = None
            self._problem_logged = 0.0

    def _stream_problem(self, problem: str, *, recovered: bool = False) -> None:
        now = time.monotonic()
        if recovered or problem != self.stream_problem or now - self._problem_logged >= 60.0:
            self._log.error("archive.stream_missing", stream=self.settings.stream, problem=problem)
            self._problem_logged = now
        self.stream_problem = None if recovered else problem

    async def _until(self, attempt: Any, stop: asyncio.Event) -> None:
        backoff = Backoff(BackoffPolicy(initial_s=0.2, max_s=self.settings.retry_max_s))
        while not stop.is_set():
            try:
                await attempt()
                if self.stream_problem is None:
                    return
            except (TimeoutError, NatsTimeout, NoServersError, ConnectionClosedError, nats.errors.Error) as e:
                self._log.warning("archive.cluster_unavailable", error=type(e).__name__)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff.failed()):
                    await stop.wait()

    async def _fetch(
        self, sub: JetStreamContext.PullSubscription, batches: asyncio.Queue[list[Msg]], stop: asyncio.Event
    ) -> None:
        """Pulls the next batch while the one before is committed (two in hand at most)."""
        s = self.settings
        while not stop.is_set():
            try:
                msgs = await sub.fetch(s.batch, timeout=0.5)
            except (NatsTimeout, TimeoutError):
                continue
            except (ConnectionClosedError, NoServersError, nats.errors.Error) as e:
                # A node went away under the fetch: the client reconnects to another on its own.
                self._log.warning("archive.cluster_unavailable", error=type(e).__name__)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await stop.wait()
                continue
            await batches.put(msgs)

    async def _loop(
        self, js: JetStreamContext, subs: list[JetStreamContext.PullSubscription], stop: asyncio.Event
    ) -> None:
        s = self.settings
        next_sweep = time.monotonic() + s.sweep_s
        # A fetch returns what the server had at hand, often a few dozen: the commit takes every
        # batch fetched meanwhile (up to commit_max), so a commit's cost (an fsync) is shared by
        # as many rows as are waiting.
        batches: asyncio.Queue[list[Msg]] = asyncio.Queue(maxsize=s.fetch_ahead)
        fetchers = [asyncio.create_task(self._fetch(sub, batches, stop)) for sub in subs]
        acking: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                try:
                    async with asyncio.timeout(max(0.0, next_sweep - time.monotonic())):
                        msgs = await batches.get()
                except TimeoutError:
                    msgs = []
                while msgs and len(msgs) < s.commit_max and not batches.empty():
                    msgs += batches.get_nowait()
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
                    self._lag.observe(received.timestamp(), events)
                    if acking is not None:
                        await acking  # acks go out in order, one batch behind at most
                    # After the commit: a lost ack only means the message comes again.
                    acking = asyncio.create_task(_ack(msgs))
                    self._notify()
                if time.monotonic() >= next_sweep:
                    with contextlib.suppress(NatsTimeout, TimeoutError, nats.errors.Error):
                        await self._check_stream(js)
                    await self._sweep()
                    self._notify()
                    next_sweep = time.monotonic() + s.sweep_s
        finally:
            for fetcher in fetchers:
                fetcher.cancel()
            await asyncio.gather(*fetchers, return_exceptions=True)
            if acking is not None:
                await acking

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
        # A gap is asked for only once its records, had they been sent, would have come: the
        # grace and the first re-ask follow the lag now measured and what waits in the consumer.
        behind = self._lag.recent_s() + (s.gap_grace_s if self.pending > s.batch else 0.0)
        try:
            conn = (await self._pg.open()).conn
            answers, self._answers = self._answers, []
            found, asks = await upkeep(
                conn,
                answers,
                gap_grace_s=s.gap_grace_s + 2 * behind,
                gap_alarm_s=s.gap_alarm_s,
                ask_initial_s=max(s.gap_ask_initial_s, behind),
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
