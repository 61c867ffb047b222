"""A table's events into the floor's JetStream stream, each confirmed only once it is stored.

On a NATS cluster (docs/scale-out.md) a table publishes its journal's records with JetStream
instead of MQTT QoS 1: the stream's leader answers a publish (a PubAck) only after a quorum of
its replicas has the record on disk, so the outbox moves its cursor over a record only when the
record is in the replicated stream. Through a leader election, a node's loss or a deleted stream
there is no PubAck and the record stays in the outbox, sent again until one comes.

Each message carries ``Nats-Msg-Id`` = ``<site>.<table>.<seq>.<digest>``: the stream keeps one
copy of each id within its duplicate window, so a record sent again (a PubAck lost on the way,
a republish) is stored once. The digest of the message makes a record of another journal with
the same seq (a table set up again) a different id, never a "duplicate" dropped in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Sequence

import nats.errors
import structlog
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from controller.backoff import Backoff, BackoffPolicy
from controller.telemetry.nats_link import NatsSettings, subject_of
from controller.telemetry.topics import TableTopics

log = structlog.get_logger("tablectl.telemetry")

MSG_ID = "Nats-Msg-Id"
PUBACK_TIMEOUT_S = 5.0  # longer than a stream leader's election (about 4.5 s measured, docs/scale-out.md)
# Waiting again after a publish the stream did not confirm: no storm of re-sends at an electing
# cluster, and back within 5 s of its return.
UNCONFIRMED_BACKOFF = BackoffPolicy(initial_s=0.2, max_s=5.0, jitter=0.2)
RECONNECT_AFTER_S = 30.0  # nothing confirmed this long: a fresh connection (an election is ~5 s)


def msg_id(topics: TableTopics, seq: int, body: bytes) -> str:
    return f"{topics.site}.{topics.table}.{seq}.{hashlib.sha256(body).hexdigest()[:16]}"


async def publish_confirmed(
    js: JetStreamContext,
    subject: str,
    messages: Sequence[tuple[int, str, bytes]],
    *,
    puback_s: float = PUBACK_TIMEOUT_S,
) -> int:
    """Publish (seq, msg id, body) all at once, in order; return the highest seq of the unbroken
    run from the first that the stream confirmed (0: not even the first). A later one confirmed
    past a refused one is stored all the same: sent again, it is a duplicate the stream drops."""
    tasks = [
        asyncio.create_task(js.publish(subject, body, timeout=puback_s, headers={MSG_ID: mid}))
        for _, mid, body in messages
    ]
    confirmed = 0
    try:
        for (seq, _, _), task in zip(messages, tasks, strict=True):
            try:
                await task
            except (TimeoutError, nats.errors.Error):  # no leader, no stream, no connection: not stored
                break
            confirmed = seq
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return confirmed


class ConfirmedSender:
    """Sending an outbox's next records to the stream and waiting for its confirmations. After a
    shortfall it waits out a backoff and then probes with the first unconfirmed record alone, so an
    electing cluster gets one record a table per try, not a whole batch again each time."""

    def __init__(self) -> None:
        self._backoff = Backoff(UNCONFIRMED_BACKOFF)
        self._probing = False
        self._failing_since: float | None = None
        self.unconfirmed = 0  # records the stream did not confirm (each sent again)

    @property
    def stuck_s(self) -> float:
        """How long nothing has been confirmed (0 while publishes are)."""
        return 0.0 if self._failing_since is None else time.monotonic() - self._failing_since

    async def send(
        self,
        js: JetStreamContext,
        subject: str,
        messages: Sequence[tuple[int, str, bytes]],
        stopping: asyncio.Event,
    ) -> int:
        """The highest seq of ``messages`` confirmed without a break (0: none); after a shortfall
        it returns once the backoff (or ``stopping``) is over, so the caller may simply go on."""
        if self._probing:
            messages = messages[:1]
        confirmed = await publish_confirmed(js, subject, messages)
        if confirmed == messages[-1][0]:
            self._probing = False
            self._failing_since = None
            self._backoff.succeeded()
            return confirmed
        if confirmed == 0 and self._failing_since is None:
            self._failing_since = time.monotonic()
        elif confirmed:
            self._failing_since = None
        self.unconfirmed += sum(1 for seq, _, _ in messages if seq > confirmed)
        self._probing = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._backoff.failed()):
                await stopping.wait()
        return confirmed


class JetStreamEvents:
    """One table's JetStream publisher: a NATS connection of its own, kept across the table's
    MQTT reconnects (status, state and commands stay on MQTT)."""

    def __init__(self, settings: NatsSettings, topics: TableTopics, client_name: str) -> None:
        self.settings = settings
        self.topics = topics
        self.subject = subject_of(topics.events)
        self._name = client_name
        self._nc: NATS | None = None
        self._sender = ConfirmedSender()
        self._log = log.bind(site=topics.site, table=topics.table)

    @property
    def unconfirmed(self) -> int:
        return self._sender.unconfirmed

    async def _on_error(self, e: Exception) -> None:
        self._log.warning("telemetry.nats_error", error=type(e).__name__)

    async def publish(self, messages: Sequence[tuple[int, bytes]], stopping: asyncio.Event) -> int:
        """The highest seq of ``messages`` the stream confirmed without a break (0: none)."""
        if not messages:
            return 0
        batch = [(seq, msg_id(self.topics, seq, body), body) for seq, body in messages]
        try:
            if self._nc is None or self._nc.is_closed:
                self._nc = await self.settings.connect(self._name, on_error=self._on_error)
        except (OSError, TimeoutError, nats.errors.Error) as e:  # no node answers yet
            self._log.warning("telemetry.nats_unavailable", error=type(e).__name__)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(UNCONFIRMED_BACKOFF.max_s):
                    await stopping.wait()
            return 0
        js = self._nc.jetstream(timeout=PUBACK_TIMEOUT_S)
        confirmed = await self._sender.send(js, self.subject, batch, stopping)
        if confirmed < messages[-1][0]:
            self._log.warning("telemetry.events_unconfirmed", after_seq=confirmed or messages[0][0] - 1)
        if self._sender.stuck_s > RECONNECT_AFTER_S:
            # Longer than any election: the connection itself may be what fails; a new one.
            self._log.warning("telemetry.nats_reconnect", unconfirmed_s=round(self._sender.stuck_s))
            await self.close()
        return confirmed

    async def close(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None and not nc.is_closed:
            with contextlib.suppress(Exception):
                await nc.drain()
