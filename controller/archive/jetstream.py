"""``tablectl archive --nats``: one worker of a JetStream cluster's durable consumer.

The clustered events pipeline (docs/scale-out.md): the tables publish over MQTT to the NATS
servers' MQTT listener as they do to mosquitto; a stream replicated on three nodes captures every
table's events subject (MQTT ``tablectl/<site>/<table>/events`` is NATS
``tablectl.<site>.<table>.events``), and the archive's workers pull from one durable consumer,
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
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError, NoServersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from controller.archive.alarms import ChainAlarm
from controller.archive.gaps import ANNOUNCEMENTS, RESULTS, Ask
from controller.archive.ingest import Ingest, IngestSettings
from controller.backoff import Backoff, BackoffPolicy
from controller.telemetry.topics import ROOT

log = structlog.get_logger("tablectl.archive")

EVENTS_SUBJECT = f"{ROOT}.*.*.events"


def subject_of(topic: str) -> str:
    """NATS's MQTT listener maps topic levels to subject tokens ('/' to '.')."""
    return topic.replace("/", ".")


def topic_of(subject: str) -> str:
    return subject.replace(".", "/")


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
    start_attempts: int = 5

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
            )
        )


@dataclass(frozen=True, slots=True)
class Pulled:
    """One message fetched from the consumer."""

    msg: Msg
    topic: str
    body: bytes
    received: datetime


class JetStreamWorker(Ingest[Pulled]):
    def __init__(self, settings: JetStreamSettings) -> None:
        super().__init__(settings.ingest)
        self.settings = settings
        self._answers: list[tuple[str, bytes]] = []
        self._nc: NATS | None = None
        self._sub: JetStreamContext.PullSubscription | None = None
        self._fetched = 0  # fetched and not yet acknowledged

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
            self._sub = await js.pull_subscribe(
                EVENTS_SUBJECT, durable=s.durable, stream=s.stream, config=config
            )
            for topic in (RESULTS, *ANNOUNCEMENTS):
                await nc.subscribe(subject_of(topic).replace("+", "*"), cb=self._on_answer)
            self.ready.set()
            self._log.info("archive.started", stream=s.stream, durable=s.durable)
            yield
        finally:
            self.ready.clear()
            with contextlib.suppress(Exception):
                await nc.close()

    async def _until(self, attempt: Any, stop: asyncio.Event) -> None:
        backoff = Backoff(BackoffPolicy(initial_s=0.2, max_s=self.settings.retry_max_s))
        while not stop.is_set():
            try:
                await attempt()
                return
            except (TimeoutError, NatsTimeout, NoServersError, ConnectionClosedError, nats.errors.Error) as e:
                self._log.warning("archive.cluster_unavailable", error=type(e).__name__)
                await self._pause(backoff.failed(), stop)

    async def take(self, wait_s: float) -> list[Pulled]:
        sub = self._sub
        assert sub is not None
        try:
            msgs = await sub.fetch(self.settings.batch, timeout=wait_s)
        except (NatsTimeout, TimeoutError):
            return []
        except (ConnectionClosedError, NoServersError, nats.errors.Error) as e:
            # A node went away under the fetch: the client reconnects to another on its own.
            self._log.warning("archive.cluster_unavailable", error=type(e).__name__)
            await asyncio.sleep(0.2)  # not a synchronisation: a pause before fetching again
            return []
        received = datetime.now(UTC)
        self._fetched += len(msgs)
        return [Pulled(m, topic_of(m.subject), m.data, received) for m in msgs]

    async def acknowledge(self, batch: list[Pulled]) -> None:
        for item in batch:
            # After the commit: a lost ack only means the message comes again.
            with contextlib.suppress(Exception):
                await item.msg.ack()
        self._fetched -= len(batch)

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
