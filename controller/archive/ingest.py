"""The archive's one ingest pipeline, whatever carries the events to it.

``tablectl archive`` takes events from mosquitto's shared subscription (controller/archive/worker.py)
or from a JetStream cluster's durable consumer (controller/archive/jetstream.py). Those two modules
are transports only: how a batch of messages is taken, acknowledged, and how alarms and republish
requests go out. Everything else is here, once, so both paths refuse the same records, raise the
same alarms, stamp ``received_by`` alike and report the same /metrics and /healthz:

- parse: each message is an archived event, or a refusal (``refused`` or ``bad_hash``, one alarm per
  record however often it comes) or, for a message on a table's topic that is not a record at all,
  a ``refused`` alarm naming the table; a table nobody registered gets its ``unknown_table`` alarm
  instead (controller/archive/store.py);
- commit: the batch in one transaction, retried while PostgreSQL is away; only then is the batch
  acknowledged, in the order it came;
- upkeep: the chain sweep, the gaps and the tables' answers (controller/archive/upkeep.py), on a
  connection and a task of their own, so a sweep never holds a commit back.

Parsing runs one batch ahead of the commit (a queue of one parsed batch), so the next batch is
parsed while PostgreSQL commits this one.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import psycopg
import structlog

from controller.archive import alarms
from controller.archive.alarms import ChainAlarm
from controller.archive.connection import ArchiveConnection
from controller.archive.gaps import Ask
from controller.archive.messages import ArchivedEvent, Refused, Unreadable, parse_event
from controller.archive.upkeep import upkeep
from controller.backoff import Backoff, BackoffPolicy
from controller.errors import TablectlError

log = structlog.get_logger("tablectl.archive")

_REFUSALS_REMEMBERED = 10_000


@dataclass(frozen=True)
class IngestSettings:
    """What the pipeline needs of a worker's settings, the same for both transports."""

    dsn: str
    worker: str  # the worker's client id: received_by of every row it inserts
    sweep_s: float = 1.0
    gap_grace_s: float = 10.0  # a missing record this long after the next one is a gap: ask for it
    gap_alarm_s: float = 120.0  # a gap still open this long (the table does not answer) is raised
    gap_ask_initial_s: float = 1.0  # the first wait before asking for a gap again; doubles
    gap_ask_max_s: float = 60.0
    retry_max_s: float = 10.0
    # Tables whose events are archived, (site, table_id), added to known_tables on start.
    tables: tuple[tuple[str, str], ...] = ()
    tables_source: str = "tablectl archive --table"
    # At start, how often PostgreSQL may refuse before the worker gives up with one line (a wrong
    # URL or database never comes right by waiting); once running, it waits for as long as it takes.
    start_attempts: int = 5


class Delivery(Protocol):
    """One message as a transport took it."""

    @property
    def topic(self) -> str: ...

    @property
    def body(self) -> bytes: ...

    @property
    def received(self) -> datetime: ...


D = TypeVar("D", bound=Delivery)

# A batch as received, the events parsed from it, and the alarms for the records refused.
Parsed = tuple[list[D], list[ArchivedEvent], list[ChainAlarm]]


class Ingest(abc.ABC, Generic[D]):
    """One archive worker: the pipeline, over the transport a subclass provides."""

    def __init__(self, ingest: IngestSettings) -> None:
        self.ingest = ingest
        self.stored = 0  # rows this worker inserted
        self.duplicates = 0
        self.unreadable = 0  # messages on a table's topic that are not a record (each alarmed)
        self.refused = 0  # records parsed and refused (kind, classification, shape or hash)
        self.dropped = 0  # events of unknown tables, and records quarantined at arrival
        self.timings = {"parse_s": 0.0, "commit_s": 0.0, "ack_s": 0.0}  # where a batch's time goes
        self.db_failures = 0  # attempts PostgreSQL refused (it was away); the batch was kept
        self.batches = 0  # batches committed (with timings["commit_s"]: /metrics' commit summary)
        self.lag_s: float | None = None  # the newest record of the last committed batch: its age then
        self.last_commit: float | None = None  # when (epoch seconds)
        self.alarms: list[ChainAlarm] = []
        self.gap_requests = 0  # cmd/republish sent by this worker
        self.ready = asyncio.Event()  # the transport delivers: subscribed, or the consumer bound
        # Refusals already raised: one alarm each, however often the same record comes (bounded).
        self._refusals_said: set[tuple[str, str, int, str]] = set()
        self._pg = ArchiveConnection(ingest.dsn, ingest.worker, ingest.tables, ingest.tables_source)
        # The sweep's own connection: a sweep in progress never holds a commit back.
        self._upkeep_pg = ArchiveConnection(ingest.dsn, ingest.worker, (), ingest.tables_source)
        self._log = log.bind(client_id=ingest.worker)
        self._progress = asyncio.Event()

    # -- the transport's part ---------------------------------------------------------------------

    @abc.abstractmethod
    def connected(self, stop: asyncio.Event) -> contextlib.AbstractAsyncContextManager[None]:
        """Connected to the broker or cluster for the block; ``ready`` set once messages flow."""

    @abc.abstractmethod
    async def take(self, wait_s: float) -> list[D]:
        """The next batch, in the order it came; [] when none came within ``wait_s``."""

    @abc.abstractmethod
    async def acknowledge(self, batch: list[D]) -> None:
        """Acknowledge a committed batch (a lost acknowledgement only means it comes again)."""

    @abc.abstractmethod
    async def send_alarm(self, alarm: ChainAlarm) -> None:
        """Publish one chain alarm on ``alarm.topic`` (best effort: chain_alarms keeps it)."""

    @abc.abstractmethod
    async def send_ask(self, ask: Ask) -> None:
        """Publish one republish request on ``ask.topic``."""

    @abc.abstractmethod
    def answers(self) -> list[tuple[str, bytes]]:
        """The tables' republish results, births and heartbeats (MQTT topic, body) received since
        the last call."""

    @property
    @abc.abstractmethod
    def inbox_depth(self) -> int:
        """Messages received and not yet committed."""

    def behind_s(self) -> float:
        """How long records now wait in the transport before their commit (0: not measured): the
        sweep's gap grace grows by twice this, so records still queued are not asked for again."""
        return 0.0

    # -- what both transports share ---------------------------------------------------------------

    @property
    def db_connected(self) -> bool:
        return self._pg.store is not None

    @property
    def chain_alarms(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for alarm in self.alarms:
            counts[alarm.kind] = counts.get(alarm.kind, 0) + 1
        return counts

    def health(self) -> tuple[bool, str]:
        """/healthz: both ends connected."""
        if not self.db_connected:
            return False, "no PostgreSQL connection"
        if not self.ready.is_set():
            return False, "not receiving from the broker"
        return True, "ok"

    async def progressed(self) -> None:
        """Returns after the next commit, sweep or failed attempt: for whoever waits on this worker."""
        await self._progress.wait()

    def _notify(self) -> None:
        self._progress.set()
        self._progress = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Archive until ``stop`` is set; what was received but not committed is left unacknowledged."""
        await self._db_ready(stop)
        if stop.is_set():
            return
        parsed: asyncio.Queue[Parsed[D]] = asyncio.Queue(maxsize=1)
        try:
            async with (
                self.connected(stop),
                self._tasks(self._parse_loop(parsed, stop), self._upkeep_loop(stop)),
            ):
                await self._commit_loop(parsed, stop)
        finally:
            await self._pg.drop()
            await self._upkeep_pg.drop()
            spent = {k: round(v, 2) for k, v in self.timings.items()}
            self._log.info("archive.stopped", stored=self.stored, duplicates=self.duplicates, **spent)

    @contextlib.asynccontextmanager
    async def _tasks(self, *coros: Any) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(c) for c in coros]
        try:
            yield
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t

    async def _db_ready(self, stop: asyncio.Event) -> None:
        # The schema is brought up to date before anything is received: a worker that cannot reach
        # PostgreSQL does not take messages off the broker for nothing. A few attempts with the
        # one backoff (a database restarting with the worker), then one line and out.
        backoff = Backoff(BackoffPolicy(initial_s=0.25, max_s=self.ingest.retry_max_s))
        for attempt in range(1, self.ingest.start_attempts + 1):
            if stop.is_set():
                return
            try:
                await self._pg.open()
                return
            except psycopg.OperationalError as e:
                reason = str(e).splitlines()[0][:200]
                self._log.warning("archive.db_unavailable", error=reason, attempt=attempt)
                if attempt == self.ingest.start_attempts:
                    raise TablectlError(
                        f"archive: PostgreSQL unreachable after {attempt} attempts: {reason}"
                    ) from None
                await self._pause(backoff.failed(), stop)

    @staticmethod
    async def _pause(seconds: float, stop: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await stop.wait()

    # -- parse ------------------------------------------------------------------------------------

    def parse(self, batch: Sequence[Delivery]) -> tuple[list[ArchivedEvent], list[ChainAlarm]]:
        """The events of ``batch`` and the alarms for what was refused (each raised once)."""
        events: list[ArchivedEvent] = []
        refused: list[ChainAlarm] = []
        for item in batch:
            try:
                events.append(parse_event(item.topic, item.body, item.received))
            except Refused as e:
                self.refused += 1
                alarm = (
                    alarms.bad_hash(e.site, e.table_id, e.seq)
                    if e.alarm == "bad_hash"
                    else alarms.refused(e.site, e.table_id, e.seq, e.reason)
                )
                self._refusal(alarm, e.reason, refused)
            except Unreadable as e:
                self.unreadable += 1
                self._log.warning("archive.unreadable", error=str(e))
                if e.site is not None and e.table_id is not None:
                    alarm = alarms.unreadable(e.site, e.table_id, e.seq, str(e))
                    self._refusal(alarm, str(e), refused)
        return events, refused

    def _refusal(self, alarm: ChainAlarm, reason: str, out: list[ChainAlarm]) -> None:
        said = (alarm.site, alarm.table_id, alarm.seq, reason)
        if said in self._refusals_said:
            return  # the same refusal again (a redelivery, or a flood): counted only
        if len(self._refusals_said) >= _REFUSALS_REMEMBERED:
            self._refusals_said.clear()
        self._refusals_said.add(said)
        out.append(alarm)

    async def _parse_loop(self, parsed: asyncio.Queue[Parsed[D]], stop: asyncio.Event) -> None:
        while not stop.is_set():
            batch = await self.take(0.5)
            if not batch:
                continue
            t0 = time.perf_counter()
            events, refused = self.parse(batch)
            self.timings["parse_s"] += time.perf_counter() - t0
            await parsed.put((batch, events, refused))

    # -- commit -----------------------------------------------------------------------------------

    async def _commit_loop(self, parsed: asyncio.Queue[Parsed[D]], stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with asyncio.timeout(0.5):
                    batch, events, refused = await parsed.get()
            except TimeoutError:
                continue
            t1 = time.perf_counter()
            if not await self._until_committed(events, refused, stop):
                return  # asked to stop while PostgreSQL was away: nothing acknowledged
            t2 = time.perf_counter()
            await self.acknowledge(batch)
            self.timings["commit_s"] += t2 - t1
            self.timings["ack_s"] += time.perf_counter() - t2
            self._notify()

    async def _until_committed(
        self, events: list[ArchivedEvent], refused: list[ChainAlarm], stop: asyncio.Event
    ) -> bool:
        """Store the batch, retrying while PostgreSQL is away; False when asked to stop first."""
        backoff = Backoff(BackoffPolicy(initial_s=0.2, max_s=self.ingest.retry_max_s))
        while True:
            try:
                store = await self._pg.open()
                result = await store.store(events, refused)
            except psycopg.OperationalError as e:
                self._log.warning("archive.db_unavailable", error=str(e).splitlines()[0][:200])
                self.db_failures += 1
                self._notify()
                await self._pg.drop()
                await self._pause(backoff.failed(), stop)
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
            await self._raise(result.alarms)
            return True

    async def _raise(self, found: list[ChainAlarm]) -> None:
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
            await self.send_alarm(alarm)

    # -- upkeep -----------------------------------------------------------------------------------

    async def _upkeep_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._pause(self.ingest.sweep_s, stop)
            if stop.is_set():
                return
            await self.sweep()
            self._notify()

    async def sweep(self) -> None:
        """Apply the tables' answers, sweep the chains and send the requests due (one worker at a
        time does the sweep: the others return at once)."""
        s = self.ingest
        try:
            conn = (await self._upkeep_pg.open()).conn
            # A gap is asked for only once its records, had they been sent, would have come: the
            # grace and the first re-ask follow how far behind the transport says records wait.
            behind = self.behind_s()
            found, asks = await upkeep(
                conn,
                self.answers(),
                gap_grace_s=s.gap_grace_s + 2 * behind,
                gap_alarm_s=s.gap_alarm_s,
                ask_initial_s=max(s.gap_ask_initial_s, behind),
                ask_max_s=s.gap_ask_max_s,
            )
        except psycopg.OperationalError as e:
            self._log.warning("archive.db_unavailable", error=str(e).splitlines()[0][:200])
            await self._upkeep_pg.drop()
            return
        await self._raise(found)
        for ask in asks:
            await self.send_ask(ask)
            self.gap_requests += 1
