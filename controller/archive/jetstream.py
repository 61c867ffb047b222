"""``tablectl archive --nats``: one worker of a JetStream cluster's durable consumer.

The clustered events pipeline (docs/scale-out.md): the tables publish their events with JetStream
(controller/telemetry/jetstream_events.py) into a stream replicated on three nodes (MQTT
``tablectl/<site>/<table>/events`` is NATS ``tablectl.<site>.<table>.events``, as the cluster's
MQTT listener maps it), and the archive's workers pull from one durable consumer,
so they share the load, and acknowledge each message only after PostgreSQL committed it. A
message a worker took and never acknowledged (it died) goes to another after ``ack_wait_s``; a
repeat costs nothing (the insert is idempotent). Gaps, the chain sweep and the alarms are the
MQTT worker's: this module is the JetStream transport only, and the pipeline (parse, refusals,
commit, alarms, sweep, /metrics) is controller/archive/ingest.py. Republish requests and chain
alarms go out as NATS messages, which the MQTT listener hands to the tables and the floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import ConnectionClosedError, NoServersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError

from controller.archive.alarms import ChainAlarm
from controller.archive.gaps import ANNOUNCEMENTS, RESULTS, Ask
from controller.archive.ingest import Ingest, IngestSettings
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
    batch: int = 500  # messages asked for by one pull request
    fetch_ahead: int = 8  # batches' worth of messages fetched and waiting while a commit runs, at most
    fetchers: int = 4  # pull requests outstanding at once
    commit_max: int = 4000  # messages committed together at most (well under max_ack_pending)
    # While less than a batch has come, how long a batch waits for more before its commit: each
    # commit costs the worker some 3 ms of CPU and PostgreSQL an fsync, whatever it holds.
    linger_s: float = 0.05
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
    start_attempts: int = 5
    # User, password and TLS; None: servers as they are, no user (a test's or a bench's cluster).
    nats: NatsSettings | None = None

    def connection(self) -> NatsSettings:
        return self.nats or NatsSettings(tuple(self.servers))

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


# A cluster just started answers a stream's creation with "no suitable peers for placement"
# (JetStream error 10005) until its nodes have told the metadata leader they are there: a second
# or more on a loaded machine, where the stream asks for three replicas. Tried again for this long.
PLACEMENT_WAIT_S = 30.0
_NO_PEERS_YET = 10005
_PLACEMENT_BACKOFF = BackoffPolicy(initial_s=0.1, max_s=2.0)


async def ensure_stream(js: JetStreamContext, s: JetStreamSettings) -> None:
    """The replicated stream of every table's events, made once by whichever worker starts first
    (or by ``--setup``), waiting up to PLACEMENT_WAIT_S for a new cluster's peers to join."""
    backoff, deadline = Backoff(_PLACEMENT_BACKOFF), time.monotonic() + PLACEMENT_WAIT_S
    while True:
        try:
            await make_stream_once(js, s)
            return
        except BadRequestError as e:
            if e.err_code != _NO_PEERS_YET or time.monotonic() > deadline:
                raise
            log.info("stream_placement_waits", stream=s.stream, error=e.description)
        await asyncio.sleep(backoff.failed())


async def make_stream_once(js: JetStreamContext, s: JetStreamSettings) -> None:
    """The stream made if it is not there, in one try (a new cluster may refuse it: ensure_stream waits)."""
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


class Lag:
    """How long records waited in the stream before their commit (the stream's own timestamp of
    each to the acknowledgement), as the worst of the last ``window_s``."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._worst: list[tuple[float, float]] = []  # (when, worst wait of a batch)

    def observe(self, when: float, batch: list[Pulled]) -> None:
        stored = []
        # The pulls deliver messages in stream order, whose timestamps only grow: the oldest of a
        # batch heads it (a redelivery aside), and only the heads' metadata is parsed.
        for item in (item for item in batch if item.head):
            with contextlib.suppress(Exception):  # a message without JetStream metadata: not timed
                stored.append(item.msg.metadata.timestamp.timestamp())
        if stored:
            self._worst.append((when, max(0.0, when - min(stored))))

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


@dataclass(frozen=True, slots=True)
class Pulled:
    """One message fetched from the consumer."""

    msg: Msg
    topic: str
    body: bytes
    received: datetime
    head: bool = True  # the first message of its batch: the one its wait is timed by


def stream_seq(reply: str | None) -> int:
    """A JetStream message's sequence in its stream, from its ack subject
    (``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>...``, or the longer form with a domain
    and an account hash); 0 for a message without one."""
    tokens: list[str] = reply.split(".") if reply else []
    try:
        return int(tokens[5] if len(tokens) == 9 else tokens[Msg.Ack.StreamSeq])
    except (IndexError, ValueError):
        return 0


def _first(item: tuple[int, Msg]) -> int:
    return item[0]


# How long one pull request waits on the server for messages (then it ends with a 408 status and
# the next is sent), and how much longer the worker waits for that end before it sends the next
# anyway (the request, or its end, lost with a node or a reconnection).
PULL_EXPIRES_S = 1.0
PULL_LOST_S = 2.0
_STATUS = "Status"
_HEARTBEAT = "100"
_EXPIRED = "408"


class _Pull:
    """One of the worker's pull requests, on an inbox of its own: its messages go straight into
    the worker's buffer from the subscription's callback (no wait with a timeout per message, as
    nats-py's ``fetch`` has), and the request is over when it brought all it asked for or the
    server ended it with a status (408: it expired; 409: the consumer is gone, or its leader
    changed)."""

    __slots__ = ("arrived", "buffer", "over", "status", "want")

    def __init__(self, buffer: list[tuple[int, Msg]], arrived: asyncio.Event) -> None:
        self.buffer, self.arrived = buffer, arrived
        self.want = 0
        self.over = asyncio.Event()
        self.status: str | None = None

    def refused(self, asked: int) -> bool:
        """Ended by a status other than its expiry, with nothing brought."""
        return self.status not in (None, _EXPIRED) and self.want == asked

    async def on_message(self, msg: Msg) -> None:
        headers = msg.headers
        status = headers.get(_STATUS) if headers else None
        if status is not None:
            if status != _HEARTBEAT:
                self.status = status
                self.over.set()
            return
        self.buffer.append((stream_seq(msg.reply), msg))
        self.arrived.set()
        self.want -= 1
        if self.want <= 0:
            self.over.set()


class ArchiveClient(NATS):
    """nats-py's client (the version pinned: ~=2.16), its message headers read faster.

    Every event the stream delivers carries the table's ``Nats-Msg-Id`` header, and nats-py's
    reader looks for whitespace in each header name one character at a time, through a generator:
    2.3 us a message, more than a tenth of a worker's CPU outside the parse. This reads the same
    dict (tests/archive/test_nats_headers.py holds it to nats-py's own over any header block); if
    a later nats-py no longer calls this method, its own reader is used, as before."""

    @staticmethod
    def _parse_header_lines(raw: bytes) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in raw.split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if not sep:
                continue  # an empty line too
            try:
                key = name.strip().decode("ascii")
            except UnicodeDecodeError:
                continue
            # str.split() splits at exactly the characters str.isspace() names.
            if key and key.split() != [key]:
                continue
            out[key] = value.strip().decode("utf-8", "replace")
        return out


class JetStreamWorker(Ingest[Pulled]):
    def __init__(self, settings: JetStreamSettings) -> None:
        super().__init__(settings.ingest)
        self.settings = settings
        self._answers: list[tuple[str, bytes]] = []
        self._nc: NATS | None = None
        # Fetched, not yet taken: (stream sequence, message). The server hands a backlog to the
        # pulls outstanding in turn and each pull's callback runs on its own, so they come
        # interleaved; take puts them back in the stream's order.
        self._buffer: list[tuple[int, Msg]] = []
        self._arrived = asyncio.Event()  # set when a message comes into the buffer
        self._room = asyncio.Event()  # set when take made room in the buffer
        self._topics: dict[str, str] = {}  # subject -> topic (a few per table)
        self._fetched = 0  # fetched and not yet acknowledged
        self.stream_problem: str | None = None  # the stream or consumer is missing: /healthz fails
        self._problem_logged = 0.0
        self.pending = 0  # the consumer's messages not yet delivered, at the last check
        self._lag = Lag()

    def health(self) -> tuple[bool, str]:
        if self.stream_problem is not None:
            return False, self.stream_problem
        return super().health()

    def behind_s(self) -> float:
        """How long records now wait in the stream (the worst of the last 10 s, by the stream's own
        timestamps), and the grace again while more than a batch waits in the consumer."""
        s = self.settings
        return self._lag.recent_s() + (s.gap_grace_s if self.pending > s.batch else 0.0)

    @property
    def inbox_depth(self) -> int:
        return self._fetched

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

    # -- the transport ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def connected(self, stop: asyncio.Event) -> AsyncIterator[None]:
        s = self.settings
        nc = await s.connection().connect(
            s.client_id,
            client=ArchiveClient,
            on_error=self._on_error,
            on_disconnected=self._on_disconnected,
            on_reconnected=self._on_reconnected,
        )
        self._nc = nc
        tasks: list[asyncio.Task[None]] = []
        try:
            js = nc.jetstream(timeout=5)
            await self._until(lambda: self._check_stream(js), stop)
            # Several pulls outstanding at once, each on its own inbox: one pull at a time left the
            # worker waiting on the cluster's delivery between requests.
            for _ in range(s.fetchers):
                tasks.append(asyncio.create_task(self._pull(nc, stop)))
            tasks.append(asyncio.create_task(self._watch_stream(js, stop)))
            for topic in (RESULTS, *ANNOUNCEMENTS):
                await nc.subscribe(subject_of(topic).replace("+", "*"), cb=self._on_answer)
            self.ready.set()
            self._log.info("archive.started", stream=s.stream, durable=s.durable)
            yield
        finally:
            self.ready.clear()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await nc.close()

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

    async def _watch_stream(self, js: JetStreamContext, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._pause(self.settings.sweep_s, stop)
            with contextlib.suppress(NatsTimeout, TimeoutError, nats.errors.Error):
                await self._check_stream(js)
            self._notify()

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
            await self._pause(backoff.failed(), stop)

    async def _pull(self, nc: NATS, stop: asyncio.Event) -> None:
        """One of the pulls: a request for ``batch`` messages at a time, sent again as each ends,
        while the buffer ``take`` reads holds less than ``fetch_ahead`` batches."""
        s = self.settings
        pull = _Pull(self._buffer, self._arrived)
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{s.stream}.{s.durable}"
        request = json.dumps({"batch": s.batch, "expires": int(PULL_EXPIRES_S * 1e9)}).encode()
        sub: Subscription | None = None
        try:
            while not stop.is_set():
                if len(self._buffer) >= s.fetch_ahead * s.batch:
                    self._room.clear()
                    await self._pause_until(self._room, 0.5)
                    continue
                try:
                    if sub is None:
                        sub = await nc.subscribe(nc.new_inbox(), cb=pull.on_message)
                    pull.want, pull.status = s.batch, None
                    pull.over.clear()
                    await nc.publish(subject, request, reply=sub.subject)
                except (ConnectionClosedError, NoServersError, nats.errors.Error) as e:
                    # A node went away: the client reconnects to another on its own.
                    self._log.warning("archive.cluster_unavailable", error=type(e).__name__)
                    await self._pause(0.2, stop)
                    continue
                await self._pause_until(pull.over, PULL_EXPIRES_S + PULL_LOST_S)
                if pull.refused(s.batch):
                    # Refused outright (409: the consumer is gone, its leader changing, too many
                    # waiting): not again at once; the stream watch makes the consumer again.
                    await self._pause(0.2, stop)
        finally:
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()

    @staticmethod
    async def _pause_until(event: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()

    async def take(self, wait_s: float) -> list[Pulled]:
        """What the pulls brought, up to commit_max: a commit's fsync serves every message that
        came while the last one ran."""
        if not self._buffer:
            self._arrived.clear()
            await self._pause_until(self._arrived, wait_s)
            if not self._buffer:
                return []
        s = self.settings
        if len(self._buffer) < s.batch and s.linger_s > 0:
            # A trickle, or the workers sharing one: more come within the linger, so a commit
            # serves tens of records rather than a handful (the lag grows by the linger at most).
            loop = asyncio.get_running_loop()
            until = loop.time() + s.linger_s
            while len(self._buffer) < s.batch and (left := until - loop.time()) > 0:
                self._arrived.clear()
                await self._pause_until(self._arrived, left)
        # In the stream's order, so a batch holds a run of each table's records (each record's link
        # to the one before is then checked in the batch, not looked up) and its first is the
        # oldest (the lag is timed by it).
        self._buffer.sort(key=_first)
        n = min(len(self._buffer), s.commit_max)
        msgs = [m for _, m in self._buffer[:n]]
        del self._buffer[:n]
        self._room.set()
        received = datetime.now(UTC)
        self._fetched += n
        topics = self._topics
        if len(topics) > 100_000:
            topics.clear()
        taken = []
        for i, m in enumerate(msgs):
            topic = topics.get(m.subject)
            if topic is None:
                topic = topics[m.subject] = topic_of(m.subject)
            taken.append(Pulled(m, topic, m.data, received, i == 0))
        return taken

    async def acknowledge(self, batch: list[Pulled]) -> None:
        nc = self._nc
        for item in batch:
            # After the commit: a lost ack only means the message comes again. Buffered by the
            # client and written together: no round trip each.
            reply = item.msg.reply
            if nc is not None and reply:
                with contextlib.suppress(Exception):
                    await nc.publish(reply)
        self._fetched -= len(batch)
        self._lag.observe(time.time(), batch)

    async def send_alarm(self, alarm: ChainAlarm) -> None:
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.publish(subject_of(alarm.topic), json.dumps(alarm.message()).encode())

    async def send_ask(self, ask: Ask) -> None:
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.publish(subject_of(ask.topic), ask.message(self.settings.client_id))

    def answers(self) -> list[tuple[str, bytes]]:
        answers, self._answers = self._answers, []
        return answers
