"""The virtual dealer's link to a table run by `tablectl run` in another process: the table's
public MQTT state in, the floor's commands out, as docs/mqtt.md documents them.

The topics are written here from that document rather than imported from the controller's
telemetry package: the dealer is a client of the published contract, like a floor console, and
sim/ does not import the controller's packages (only the domain's vocabulary).

Only the state of the table's current process is acted on: every retained message carries the
``incarnation`` of the `tablectl run` that published it, and the retained ``status`` says which
one is running. A state left on the broker by an earlier process (a restart on a fresh journal
starts again at round 0) is held back until its process is the current one, which it never is.

The connection is the link's to keep (aiomqtt does not reconnect): lost, it is logged and made
again with backoff, subscribed again; a floor command waits for it. A broker that restarted
without persistence has no retained status or state until the table has connected again too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiomqtt
import structlog

from controller.backoff import Backoff, BackoffPolicy
from controller.errors import short_reason
from devices.profiles import DeviceKind
from devices.transport.links import close_quietly
from devices.transport.mqtt_session import session
from sim.wire_dealer import TableStopped

ROOT = "tablectl"
DEFAULT_PORT = 1883
MAX_STATE_BYTES = 1 << 20  # a state document is a few KiB; anything larger is not the table's
RESEND_S = 5.0  # a floor command with no result this long is sent again (the table was down)
SEND_AGAIN = "send it again"  # the end of a refusal that changed nothing (docs/mqtt.md)
AGAIN_S = 1.0  # ... sent again this much later
# A lost connection to the broker is tried again after 0.2 s, doubling up to 5 s (jittered): a
# broker restart takes seconds, and the table's state is retained again once the table is back.
RECONNECT = BackoffPolicy(initial_s=0.2, max_s=5.0)

_log = structlog.get_logger("sim.dealer")


def parse_mqtt_url(url: str) -> tuple[str, int]:
    """``mqtt://host[:port]`` -> (host, port); the dealer speaks plain MQTT on a test network."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        port, parts = None, urlsplit("")
    if parts.scheme != "mqtt" or not parts.hostname or parts.username or parts.path not in ("", "/"):
        raise ValueError(f"--broker {url!r}: must be mqtt://host[:port]")
    return parts.hostname, port or DEFAULT_PORT


# The floor commands after which the dealer reads the table to decide what comes next (open_table:
# a round voided or a batch ordered reshuffled, then whether a round is under way): it waits for
# the state they made. Not after every command: a command is sent again when its result does not
# come, and a table killed between carrying one out and saying so carries the repeat out again (an
# inspection then opens a batch's decks twice); waiting after each inspection moved the dealer's
# commands into that window at the wire soak's first kill.
READ_AFTER = frozenset({"void_round", "reshuffle_ordered"})


class MqttLink:
    def __init__(
        self,
        url: str,
        site: str,
        table_id: str,
        *,
        idle_timeout_s: float = 120.0,
        resend_s: float = RESEND_S,
        again_s: float = AGAIN_S,
        pace_s: float = 0.0,
        pace_seed: int | None = None,
    ) -> None:
        self.host, self.port = parse_mqtt_url(url)
        self.base = f"{ROOT}/{site}/{table_id}"
        self.idle_timeout_s = idle_timeout_s
        self.resend_s, self.again_s = resend_s, again_s
        # --pace: the dealer takes about this long over each action (half to one and a half
        # times it, as a person's hands vary), so that someone can follow the table on a console.
        self.pace_s = pace_s
        self._pace_rng = random.Random(pace_seed)
        self._conn: tuple[aiomqtt.Client, contextlib.AsyncExitStack] | None = None
        self._connected = asyncio.Event()  # set while a connection is up
        self._lost = asyncio.Event()  # set when a connection has been given up
        self._backoff = Backoff(RECONNECT, rng=random.Random(pace_seed))
        self._reader: asyncio.Task[None] | None = None
        self._latest: dict[str, Any] | None = None
        self._latest_body: dict[str, Any] = {}  # the state message ``_latest`` came in
        self._seen = 0  # states received
        self._read = 0  # the count of the state last handed out
        self._new = asyncio.Event()
        self._results: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._incarnation: str | None = None  # the running process's, from the retained status
        self._held: dict[str, dict[str, Any]] = {}  # incarnation -> its newest state message, not yet current

    async def __aenter__(self) -> MqttLink:
        # The first connection is made here: a broker that is not there at all is said at once.
        self._conn = await self._connect()
        self._connected.set()
        self._reader = asyncio.create_task(self._run(), name="sim-dealer-mqtt")
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        conn, self._conn = self._conn, None
        if conn is not None:
            await close_quietly(conn[1])

    async def _connect(self) -> tuple[aiomqtt.Client, contextlib.AsyncExitStack]:
        """One login, subscribed to the table's status, state and command results (a broker that
        restarted without persistence has none of them retained until the table sends them again)."""
        stack = contextlib.AsyncExitStack()
        client = aiomqtt.Client(
            self.host, self.port, identifier=f"sim-dealer-{uuid.uuid4().hex[:8]}", timeout=5, keepalive=10
        )
        try:
            await stack.enter_async_context(session(client))
            await client.subscribe(f"{self.base}/status", qos=1)
            await client.subscribe(f"{self.base}/state", qos=1)
            await client.subscribe(f"{self.base}/cmd/+/result", qos=1)
        except BaseException:
            await close_quietly(stack)
            raise
        return client, stack

    async def _run(self) -> None:
        """Read while connected; after a loss (a broker restart, a network cut), log it and connect
        again with backoff until the dealer is done (PITFALLS: reconnection is the client's)."""
        while True:
            conn = self._conn
            if conn is not None:
                with contextlib.suppress(aiomqtt.MqttError):
                    await self._read_messages(conn[0])
                self._connected.clear()
                self._conn = None
                self._lost.set()
                await close_quietly(conn[1])
                _log.warning("dealer_mqtt_lost", broker=f"{self.host}:{self.port}")
            delay = self._backoff.failed()
            await asyncio.sleep(delay)
            try:
                conn = await self._connect()
            except (aiomqtt.MqttError, OSError) as exc:
                _log.warning(
                    "dealer_mqtt_reconnect_failed",
                    broker=f"{self.host}:{self.port}",
                    reason=short_reason(exc),
                    attempt=self._backoff.failures,
                )
                continue
            self._conn = conn
            self._backoff.succeeded()
            self._connected.set()
            _log.warning("dealer_mqtt_reconnected", broker=f"{self.host}:{self.port}")

    async def _read_messages(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            raw = message.payload
            if not isinstance(raw, bytes | bytearray) or len(raw) > MAX_STATE_BYTES:
                continue
            try:
                body = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(body, dict):
                continue
            topic = str(message.topic)
            if topic.endswith("/result"):
                waiter = self._results.pop(str(body.get("id")), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(body)
                continue
            if topic.endswith("/status"):
                self._status(body)
                continue
            snap = body.get("snapshot")
            incarnation = body.get("incarnation")
            if isinstance(snap, dict) and isinstance(incarnation, str):
                if incarnation == self._incarnation:
                    self._take(body)
                else:  # an earlier process's, or this one's before its status came in
                    self._held = {incarnation: body}

    def _status(self, body: dict[str, Any]) -> None:
        """The retained status: which process runs the table now (none while it is offline)."""
        incarnation = body.get("incarnation")
        if body.get("online") is not True or not isinstance(incarnation, str):
            incarnation = None
        if incarnation != self._incarnation:
            if self._latest is not None and self._incarnation is not None:
                # Kept for a stale Last Will of this same process, which its next birth follows.
                self._held = {self._incarnation: self._latest_body}
            self._latest = None  # what the table said before is not what it says now: wait for it
        self._incarnation = incarnation
        if incarnation is None:
            return
        held = self._held.pop(incarnation, None)
        self._held.clear()
        if held is not None:
            self._take(held)

    def _take(self, body: dict[str, Any]) -> None:
        self._latest, self._latest_body, self._seen = body["snapshot"], body, self._seen + 1
        self._new.set()

    def _published(self) -> int:
        """The journal's seq published when the current state was sent (0 while there is none)."""
        journal = self._latest_body.get("journal") if self._latest is not None else None
        seq = journal.get("published_seq") if isinstance(journal, dict) else None
        return seq if isinstance(seq, int) else 0

    async def _until(self, ready: Callable[[], bool]) -> None:
        """Until a state comes in that makes ``ready`` hold (TimeoutError when the table says
        nothing for too long)."""
        async with asyncio.timeout(self.idle_timeout_s):
            while not ready():
                self._new.clear()
                await self._new.wait()

    async def _state_after(self, seq: int) -> None:
        """Until a state comes that the table sent once its journal's records up to ``seq`` were
        published (docs/mqtt.md: ``journal.published_seq``). A command's result comes on a topic
        of its own, and the state it changed can come after it: a dealer that read the newest
        state at once took the table of before its own void for the table after it (a round
        still under way) and stopped."""
        await self._until(lambda: self._latest is not None and self._published() >= seq)

    async def _next(self, after: int) -> dict[str, Any]:
        await self._until(lambda: self._seen > after and self._latest is not None)
        assert self._latest is not None  # as _until found it: nothing ran since
        self._read = self._seen
        return self._latest

    async def state(self) -> dict[str, Any]:
        """The newest state received (the first one published, if none came yet)."""
        if self._latest is not None:
            self._read = self._seen
            return self._latest
        return await self._next(0)

    async def wait(self) -> dict[str, Any]:
        """The next state the table publishes (TimeoutError when it says nothing for too long)."""
        return await self._next(self._read)

    async def touched(self, kind: DeviceKind) -> None:
        """`tablectl run` polls its devices on its own; a paced dealer takes its time."""
        await self._pace()

    async def _pace(self) -> None:
        if self.pace_s > 0:
            await asyncio.sleep(self.pace_s * self._pace_rng.uniform(0.5, 1.5))

    async def _command(self, command: str, args: dict[str, Any]) -> dict[str, Any]:
        """One floor command's result. docs/mqtt.md: a command sent while the table is
        disconnected (restarting) is not queued for it; a console that sees no result sends it
        again, with the same id. While the dealer's own link is down it is sent once the link is
        back."""
        request_id = uuid.uuid4().hex[:12]
        body = {"version": 1, "id": request_id, "who": "floor-sim", "role": "floor", "args": args}
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._results[request_id] = waiter
        while True:
            await self._connected.wait()
            conn = self._conn
            assert conn is not None
            try:
                await conn[0].publish(f"{self.base}/cmd/{command}", json.dumps(body), qos=1)
            except aiomqtt.MqttError:
                # The connection went; the reader notices and connects again. Not sent: wait for it.
                while self._conn is conn:
                    self._lost.clear()
                    await self._lost.wait()
                continue
            try:
                async with asyncio.timeout(self.resend_s):
                    return await asyncio.shield(waiter)
            except TimeoutError:
                continue

    async def floor(self, command: str, args: dict[str, Any]) -> None:
        await self._pace()
        async with asyncio.timeout(self.idle_timeout_s):
            result = await self._command(command, args)
            # A table still reading its devices after a restart refuses every command with "send
            # it again" and changes nothing (docs/mqtt.md); a console does, a moment later.
            while not result.get("ok") and str(result.get("error", "")).endswith(SEND_AGAIN):
                await asyncio.sleep(self.again_s)
                result = await self._command(command, args)
        if not result.get("ok"):
            raise TableStopped(f"{command}: {result.get('error')}")
        if command in READ_AFTER and isinstance(result.get("seq"), int):
            await self._state_after(result["seq"])
