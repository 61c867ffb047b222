"""Telemetry: the table's journal, state, alarms and devices to ops MQTT, and floor commands back.

One task owns the broker connection and runs three loops on it: the journal outbox (events by
sequence number), the retained topics (status, state, alarms, devices) and the listener
(commands, and our own status to catch a stale Last Will). The supervisor only calls the cheap,
synchronous ``state_changed`` / ``journal_appended`` / ``device_health``, which record what is to
be published and wake a loop: the table never waits on the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiomqtt
import structlog

from controller.actions import MAX_REPUBLISH
from controller.backoff import Backoff, BackoffPolicy
from controller.bounded import MAX_MESSAGE_BYTES, InputRefused, load_json
from controller.errors import TablectlError, short_reason
from controller.gaming_day import PENNSYLVANIA, GamingDay
from controller.journal import JournalError
from controller.telemetry import payloads
from controller.telemetry.broker import BrokerSettings
from controller.telemetry.commands import Refused, parse_command
from controller.telemetry.inbox import QUIET_S, Overflow
from controller.telemetry.outbox import JournalOutbox
from controller.telemetry.topics import TableTopics, check_level
from devices.drivers.base import stop_if_cancelling
from devices.transport.mqtt_session import session

if TYPE_CHECKING:
    from controller.telemetry.jetstream_events import JetStreamEvents

# (name, args, who, role) -> {"ok": bool, ...}; the supervisor's, called only for a valid command.
CommandHandler = Callable[[str, dict[str, Any], str, str], Awaitable[dict[str, Any]]]

log = structlog.get_logger("tablectl.telemetry")


# Reconnecting to the ops broker: a restarted broker has 500 tables coming back at once, so the
# delays spread by +-20% and grow to half a minute.
BROKER_BACKOFF = BackoffPolicy(initial_s=0.5, max_s=30.0, jitter=0.2)


@dataclass(frozen=True)
class TableIdentity:
    """What the birth says about the table: who, which game, which software and which config."""

    site: str
    table: str
    game: str
    config_hash: str
    versions: Mapping[str, str | int]
    # Which gaming day each published record belongs to (every events message says, for the archive).
    gaming_day: GamingDay = PENNSYLVANIA

    def as_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "table": self.table,
            "game": self.game,
            "config_hash": self.config_hash,
            "versions": dict(self.versions),
        }


class Telemetry:
    """Publishes one table to ops MQTT; see docs/mqtt.md for the topics and the delivery guarantee."""

    def __init__(
        self,
        broker: BrokerSettings,
        identity: TableIdentity,
        journal_path: str | Path,
        *,
        command: CommandHandler | None = None,
        backoff: BackoffPolicy = BROKER_BACKOFF,
        client_id: str | None = None,
        incarnation: str | None = None,
        batch: int = 256,
        poll_s: float = 1.0,
        drain_on_stop_s: float = 2.0,
        events_stream: JetStreamEvents | None = None,
        heartbeat_s: float = 5.0,
    ) -> None:
        self.broker = broker
        self.identity = identity
        self.topics = TableTopics(identity.site, identity.table)
        self.client_id = client_id or f"tablectl-{identity.site}-{identity.table}"
        self._command = command
        self._backoff = Backoff(backoff)
        self._batch = batch
        self._poll_s = poll_s  # journal_appended is the signal; this is the safety net for a missed one
        self._drain_on_stop_s = drain_on_stop_s
        self._heartbeat_s = heartbeat_s
        self._outbox = JournalOutbox(journal_path, identity.gaming_day)
        # On a NATS cluster the events go through JetStream, confirmed once stored in the stream
        # (controller/telemetry/jetstream_events.py); status, state and commands stay on MQTT.
        self._jetstream = events_stream
        # This process, on every retained message (docs/mqtt.md, "Incarnation"): a client tells
        # the state this process publishes from what an earlier one left retained on the broker.
        self.incarnation = incarnation or secrets.token_hex(8)
        self._births = 0
        self._snapshot: dict[str, Any] | None = None
        self._devices: dict[str, str] = {}
        self._state_dirty = False
        self._dirty_devices: set[str] = set()
        self._published_alarms: dict[str, Any] | None = None
        self._retained_wake = asyncio.Event()
        self._journal_wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._log = log.bind(site=identity.site, table=identity.table)
        # Commands past the queue's cap: refused with a result, counted, one line a burst.
        self.overflow = Overflow(self.topics.base + "/cmd/", self._log)
        self.acked_seq = 0  # the highest seq the broker has acknowledged (this process's view)
        self._marked_seq = 0
        self.connected = False

    # -- the supervisor's side: cheap, synchronous, never raise ------------------------------------

    async def start(self) -> None:
        """Start publishing; connecting (and reconnecting with backoff) happens in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"telemetry {self.topics.base}")

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Publish what is left (briefly), the clean offline status, and disconnect."""
        self._stopping.set()
        self._journal_wake.set()
        self._retained_wake.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                async with asyncio.timeout(timeout_s):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._jetstream is not None:
            await self._jetstream.close()
        await self._outbox.close()

    def state_changed(self, snapshot: dict[str, Any]) -> None:
        self._snapshot = snapshot
        self._state_dirty = True
        self._retained_wake.set()

    def journal_appended(self) -> None:
        self._journal_wake.set()

    def device_health(self, name: str, health: str) -> None:
        try:
            check_level("device name", name)
        except TablectlError:
            self._log.warning("telemetry.device_name_refused")  # the name is not a topic level
            return
        self._devices[name] = str(health)
        self._dirty_devices.add(name)
        self._state_dirty = True  # the state payload carries device health too
        self._retained_wake.set()

    # -- the connection loop ---------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping.is_set():
            self.connected = False
            try:
                await self._connection()
            except (aiomqtt.MqttError, OSError) as e:
                self._log.warning("telemetry.broker_unavailable", error=short_reason(e))
            except (JournalError, TablectlError) as e:
                self._log.error("telemetry.journal_unavailable", error=str(e))
            except Exception as e:  # a bug: logged, and the connection starts again after the backoff
                self._log.error("telemetry.failed", error=type(e).__name__, reason=short_reason(e))
            if self.connected:  # the last attempt got in: start the backoff again from the bottom
                self._backoff.succeeded()
            self.connected = False
            if self._stopping.is_set():
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._backoff.failed()):
                    await self._stopping.wait()

    async def _connection(self) -> None:
        self._births += 1
        birth_id = f"{self.incarnation}-{self._births}"
        identity = self.identity.as_dict()
        will = aiomqtt.Will(
            self.topics.status,
            payloads.encode(payloads.death(identity, birth_id, self.incarnation, clean=False)),
            1,
            True,
        )
        client = self.broker.client(self.client_id, will=will, queue_type=self.overflow.queue_type())
        # aiomqtt warns past 10 outstanding calls; a batch in flight is that by design.
        client.pending_calls_threshold = self._batch + 50
        async with session(client):
            self.connected = True
            published, last = await self._outbox.cursor()
            self.acked_seq = self._marked_seq = max(self.acked_seq, published)
            await client.subscribe(self.topics.status, qos=1)
            await client.subscribe(self.topics.commands, qos=1)
            journal_id = await self._outbox.journal_id()
            birth = payloads.encode(
                payloads.birth(identity, birth_id, last, self.acked_seq, self.incarnation, journal_id)
            )
            await client.publish(self.topics.status, birth, qos=1, retain=True)
            self._log.info("telemetry.online", birth=birth_id, resume_after_seq=self.acked_seq, last_seq=last)
            # A broker that restarted without persistence has lost every retained topic: send all again.
            self._state_dirty = True
            self._published_alarms = None
            self._dirty_devices.update(self._devices)
            loops = [
                asyncio.create_task(self._listen(client, birth_id, birth)),
                asyncio.create_task(self._pump_events(client)),
                asyncio.create_task(self._pump_retained(client)),
                asyncio.create_task(self._refuse_overflow(client)),
                asyncio.create_task(self._heartbeat(client, identity)),
            ]
            events = loops[1]
            stopping = asyncio.create_task(self._stopping.wait())
            try:
                done, _ = await asyncio.wait([*loops, stopping], return_when=asyncio.FIRST_COMPLETED)
                if stopping in done:
                    # The event loop sees the stop between batches and returns once the journal has
                    # nothing more; cutting it off mid-batch would only mean publishing that batch again.
                    await asyncio.wait([events], timeout=self._drain_on_stop_s)
            finally:
                for task in [*loops, stopping]:
                    task.cancel()
                # wait, not await: a loop's own exception is dealt with below, not raised from here.
                await asyncio.wait([*loops, stopping])
                await self._mark_acked()
            for task in loops:
                failure = None if task.cancelled() else task.exception()
                if failure is not None:
                    if not isinstance(failure, aiomqtt.MqttError | OSError):
                        # Leaving the `async with` disconnects cleanly, so the broker would not send
                        # our Last Will: say we are offline ourselves while the connection is up.
                        await self._unclean_death(client, identity, birth_id)
                    raise failure
            await self._farewell(client, identity, birth_id)

    async def _farewell(self, client: aiomqtt.Client, identity: dict[str, Any], birth_id: str) -> None:
        """On stop, after the events: the newest state, then a clean offline status."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._drain_on_stop_s):
                await self._publish_retained(client)
        death = payloads.encode(payloads.death(identity, birth_id, self.incarnation, clean=True))
        await client.publish(self.topics.status, death, qos=1, retain=True)
        self._log.info("telemetry.offline", acked_seq=self.acked_seq)

    async def _unclean_death(self, client: aiomqtt.Client, identity: dict[str, Any], birth_id: str) -> None:
        death = payloads.encode(payloads.death(identity, birth_id, self.incarnation, clean=False))
        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
            async with asyncio.timeout(self._drain_on_stop_s):
                await client.publish(self.topics.status, death, qos=1, retain=True)

    # -- events: the journal outbox ----------------------------------------------------------------

    async def _pump_events(self, client: aiomqtt.Client) -> None:
        while True:
            # Cleared before reading, so an append during the read wakes the next round.
            self._journal_wake.clear()
            if await self._publish_batch(client):
                continue
            stop_if_cancelling()
            if self._stopping.is_set():
                return  # the journal is drained and we are asked to stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll_s):
                    await self._journal_wake.wait()

    async def _publish_batch(self, client: aiomqtt.Client) -> int:
        """Publish the next records after the acknowledged seq; return how many went out."""
        messages = await self._outbox.encoded_after(self.acked_seq, self._batch)
        if not messages:
            return 0
        if self._jetstream is not None:
            confirmed = await self._jetstream.publish(messages, self._stopping)
            self.acked_seq = max(self.acked_seq, confirmed)
            await self._mark_acked()
            return sum(1 for seq, _ in messages if seq <= confirmed)
        # Every message is handed to paho at once, in seq order (aiomqtt's publish enqueues before
        # its first await and tasks start in creation order), so many are in flight; PUBACKs are
        # then taken in order and the cursor only ever moves over an unbroken run of them.
        tasks = [
            asyncio.create_task(client.publish(self.topics.events, body, qos=1, timeout=60))
            for _, body in messages
        ]
        try:
            for (seq, _), task in zip(messages, tasks, strict=True):
                await task
                self.acked_seq = seq
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # Cut off part-way (a lost connection, a cancel): keep the unbroken run that was acknowledged.
            for (seq, _), task in zip(messages, tasks, strict=True):
                if seq <= self.acked_seq:
                    continue
                if task.cancelled() or task.exception() is not None:
                    break
                self.acked_seq = seq
        await self._mark_acked()
        # The retained state says how far the stream has gone (its journal.published_seq): sent
        # again after each batch, so a monitor that starts later shows the table's seq at once.
        self._state_dirty = True
        self._retained_wake.set()
        return len(messages)

    async def _heartbeat(self, client: aiomqtt.Client, identity: dict[str, Any]) -> None:
        """Where the journal stands, every ``heartbeat_s`` while connected (QoS 0, not retained):
        an archive that lost the table's last records sees it without waiting for a next one."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._heartbeat_s):
                    await self._stopping.wait()
            if self._stopping.is_set():
                return
            _, last = await self._outbox.cursor()
            journal_id = await self._outbox.journal_id()
            beat = payloads.heartbeat(identity, last, self.acked_seq, self.incarnation, journal_id)
            await client.publish(self.topics.heartbeat, payloads.encode(beat), qos=0)

    async def _mark_acked(self) -> None:
        if self.acked_seq > self._marked_seq:
            seq = self.acked_seq
            await self._outbox.mark_published(seq)
            self._marked_seq = seq

    # -- retained: state, alarms, devices ----------------------------------------------------------

    async def _pump_retained(self, client: aiomqtt.Client) -> None:
        while True:
            self._retained_wake.clear()
            await self._publish_retained(client)
            stop_if_cancelling()  # else a swallowed cancel leaves this loop waiting for ever on stop
            await self._retained_wake.wait()

    async def _publish_retained(self, client: aiomqtt.Client) -> None:
        # Only the newest snapshot is sent: a burst of changes while a publish is out costs one message.
        snapshot = self._snapshot
        if snapshot is not None and self._state_dirty:
            self._state_dirty = False
            try:
                body = payloads.state(
                    snapshot, self._devices, self.identity.game, self.incarnation, self.acked_seq
                )
                await client.publish(self.topics.state, payloads.encode(body), qos=1, retain=True)
                alarms = payloads.alarms(snapshot, self.incarnation)
                if alarms != self._published_alarms:
                    await client.publish(self.topics.alarms, payloads.encode(alarms), qos=1, retain=True)
                    self._published_alarms = alarms
            except BaseException:
                self._state_dirty = True
                raise
        while self._dirty_devices:
            name = self._dirty_devices.pop()
            try:
                body = payloads.device(name, self._devices[name], self.incarnation)
                await client.publish(self.topics.device(name), payloads.encode(body), qos=1, retain=True)
            except BaseException:
                self._dirty_devices.add(name)
                raise

    # -- incoming: commands, and our own status --------------------------------------------------

    async def _listen(self, client: aiomqtt.Client, birth_id: str, birth: bytes) -> None:
        seen_own_birth = False
        async for message in client.messages:
            topic = message.topic.value
            body = _bytes(message.payload)
            if topic == self.topics.status:
                doc = _json_object(body)
                if doc.get("birth") == birth_id and doc.get("online") is True:
                    seen_own_birth = True
                elif seen_own_birth and doc.get("online") is False:
                    # A previous connection's Last Will, delivered late (its keepalive ran out after we
                    # were back): we are online, so say so again.
                    self._log.warning("telemetry.stale_will_rebirth", birth=birth_id)
                    await client.publish(self.topics.status, birth, qos=1, retain=True)
                continue
            prefix = self.topics.base + "/cmd/"
            if topic.startswith(prefix) and "/" not in topic[len(prefix) :]:
                try:
                    await self._handle_command(client, topic[len(prefix) :], body)
                except aiomqtt.MqttError:
                    raise
                except Exception as e:  # one message must not end the listener; log without its body
                    self._log.error("telemetry.command_crashed", error=type(e).__name__)

    async def _refuse_overflow(self, client: aiomqtt.Client) -> None:
        """Each command refused past the queue's cap gets its result (inbox.py); the burst's one
        log line once no refusal came for ``QUIET_S``."""
        o = self.overflow
        while True:
            await o.wake.wait()
            o.wake.clear()
            while o.waiting:
                r = o.waiting[0]
                out = payloads.command_result(r.name, r.request_id, r.who, o.reason())
                await client.publish(self.topics.command_result(r.name), payloads.encode(out), qos=1)
                o.waiting.popleft()  # published: a lost connection sends it again on the next
            try:
                async with asyncio.timeout(QUIET_S):
                    await o.wake.wait()
            except TimeoutError:
                o.said()

    async def _handle_command(self, client: aiomqtt.Client, name: str, body: bytes) -> None:
        request_id: str | None = None
        who: str | None = None
        try:
            command = parse_command(name, body)
            request_id, who = command.request_id, command.who
        except Refused as refused:
            result: Mapping[str, Any] = {"ok": False, "error": str(refused)}
            request_id, who = refused.request_id, refused.who
        else:
            if command.name == "republish":  # from the journal, by the telemetry: the game is not involved
                args = command.args
                result = await self._republish(client, args["from_seq"], args["to_seq"], args.get("journal"))
            else:
                result = await self._call_supervisor(command.name, command.args, command.who, command.role)
        self._log.info("telemetry.command", command=name, id=request_id, who=who, ok=bool(result.get("ok")))
        out = payloads.command_result(name, request_id, who, result)
        await client.publish(self.topics.command_result(name), payloads.encode(out), qos=1)

    async def _republish(
        self, client: aiomqtt.Client, first: int, last: int, journal: str | None = None
    ) -> dict[str, Any]:
        """Publish records ``first``..``last`` again from the journal, exactly as the first time.

        For the archive's gaps (a broker that acknowledged a record and lost it). The result names
        what the journal does not hold, so the archive can stop asking and raise its alarm; and
        the journal it answers for, since a table holds only the current gaming day's: records
        of another ``journal`` are all "not in this journal".
        """
        if last < first:
            return {"ok": False, "error": "republish: to_seq is before from_seq"}
        if last - first + 1 > MAX_REPUBLISH:
            return {"ok": False, "error": f"republish: at most {MAX_REPUBLISH} records at a time"}
        current = await self._outbox.journal_id()
        if journal is not None and journal != current:
            return {
                "ok": False,
                "error": f"republish: records {first}-{last} are of another journal than this table's",
                "republished": 0,
                "missing_from": first,
                "missing_to": last,
                "journal": journal,
            }
        messages = await self._outbox.encoded_range(first, last)
        if self._jetstream is not None:
            confirmed = await self._jetstream.publish(messages, self._stopping) if messages else 0
            if messages and confirmed < messages[-1][0]:
                # The archive asks again after its backoff; what was stored is then a duplicate.
                return {
                    "ok": False,
                    "error": f"republish: the stream did not confirm records after {confirmed}",
                }
        else:
            for start in range(0, len(messages), self._batch):
                chunk = messages[start : start + self._batch]
                # Handed to paho at once, in seq order, like the outbox's own batches.
                await asyncio.gather(
                    *(client.publish(self.topics.events, body, qos=1, timeout=60) for _, body in chunk)
                )
        held = {seq for seq, _ in messages}
        missing = [seq for seq in range(first, last + 1) if seq not in held]
        self._log.info("telemetry.republished", from_seq=first, to_seq=last, count=len(messages))
        if missing:
            span = f"{missing[0]}" if len(missing) == 1 else f"{missing[0]}-{missing[-1]}"
            return {
                "ok": False,
                "error": f"republish: records {span} are not in this table's journal",
                "republished": len(messages),
                "missing_from": missing[0],
                "missing_to": missing[-1],
                **({"journal": current} if current is not None else {}),
            }
        return {"ok": True, "republished": len(messages)}

    async def _call_supervisor(
        self, name: str, args: dict[str, Any], who: str, role: str
    ) -> Mapping[str, Any]:
        if self._command is None:
            return {"ok": False, "error": "commands are not enabled on this table"}
        try:
            result: object = await self._command(name, args, who, role)
        except TablectlError as e:
            return {"ok": False, "error": str(e).splitlines()[0][:200]}
        except Exception as e:  # a bug in the handler must not take the telemetry connection down
            self._log.error("telemetry.command_failed", command=name, error=type(e).__name__)
            return {"ok": False, "error": "internal error"}
        if not isinstance(result, Mapping):
            return {"ok": False, "error": "internal error"}
        return result


def _bytes(payload: object) -> bytes:
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    return b"" if payload is None else str(payload).encode("utf-8")


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        doc = load_json(body, max_bytes=MAX_MESSAGE_BYTES)
    except InputRefused:
        return {}
    return doc if isinstance(doc, dict) else {}
