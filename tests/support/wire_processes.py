"""The processes of a wire soak (tests/support/wire_soak.py): ``tablectl run`` and ``tablectl sim``
as separate processes of the checkout, and the table's public state on MQTT as a client of the
broker reads it. Nothing here sleeps to synchronise: a wait ends on a log line, a state message or
a process's exit, each under a failure guard."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt

from controller.supervisor.rig import ROOT


def progress(snap: dict[str, Any]) -> tuple[object, ...]:
    """What moves when the game does (not a device's health, which may flap while nothing moves;
    nor a restarting table's first state, which lacks the core's fields until it has read its
    journal and devices)."""
    return tuple(str(snap.get(k)) for k in ("round", "in_round", "asking", "batch_in_shoe", "cards_in_shoe"))


class Stuck(Exception):
    """A wait of the soak ran out: the table (or a process) stopped moving; the message says where."""


async def _lines(stream: asyncio.StreamReader | None, into: Callable[[bytes], None]) -> None:
    if stream is None:
        return
    while raw := await stream.readline():
        into(raw)


class Run:
    """``tablectl run`` on one table file and journal; its JSON log lines kept across restarts,
    each tagged with the incarnation (0, 1, ...) that wrote it."""

    def __init__(self, config: Path, journal: Path, broker_url: str) -> None:
        self.config, self.journal, self.broker_url = config, journal, broker_url
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[dict[str, Any]] = []
        self.incarnation = -1
        self.ready = asyncio.Event()
        self.started_at = 0.0  # when this incarnation was spawned (time.time())
        self.ready_at: float | None = None  # when it said it was ready: journal read, devices answered
        self.on_ready: Callable[[], None] = lambda: None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.incarnation += 1
        self.ready.clear()
        self.started_at, self.ready_at = time.time(), None
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "controller.cli", "run", "--config", str(self.config),
            "--journal", str(self.journal), "--broker", self.broker_url, "--log-level", "info",
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        self._reader = asyncio.create_task(_lines(self.proc.stdout, self._line))

    def _line(self, raw: bytes) -> None:
        with contextlib.suppress(ValueError):
            line = json.loads(raw)
            if isinstance(line, dict):
                line["incarnation"] = self.incarnation
                self.lines.append(line)
                if line.get("event") == "ready":
                    self.ready_at = time.time()
                    self.ready.set()
                    self.on_ready()

    async def wait_ready(self, guard_s: float) -> None:
        try:
            async with asyncio.timeout(guard_s):
                await self.ready.wait()
        except TimeoutError:
            raise Stuck(f"tablectl run was not ready within {guard_s:g}s") from None

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()
        if self._reader is not None:
            await self._reader

    async def stop(self, guard_s: float) -> int | None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return None if proc is None else proc.returncode
        proc.terminate()
        try:
            async with asyncio.timeout(guard_s):
                code = await proc.wait()
        except TimeoutError:
            proc.kill()
            code = await proc.wait()
        if self._reader is not None:
            await self._reader
        return code


class Sim:
    """``tablectl sim`` with its control port (and with ``dealer_rounds``, the virtual dealer)."""

    def __init__(self, config: Path, *, seed: int, timing_seed: int, broker_url: str) -> None:
        self.config, self.seed, self.timing_seed, self.broker_url = config, seed, timing_seed, broker_url
        self.proc: asyncio.subprocess.Process | None = None
        self.control = ""
        self.stderr: list[str] = []
        self.dealer_done_at = float("inf")  # when the dealer said its last line (before the devices closed)
        # The dealer's last line: its rounds settled (the process then ends), or why the table
        # stopped it (the devices then keep serving until the process is stopped).
        self.dealer_done = asyncio.Event()
        self.dealer_said = ""
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, dealer_rounds: int | None, guard_s: float) -> None:
        args = [
            "--config",
            str(self.config),
            "--seed",
            str(self.seed),
            "--timing-seed",
            str(self.timing_seed),
        ]
        args += ["--control", "127.0.0.1:0"]
        if dealer_rounds is not None:
            args += ["--dealer", "--rounds", str(dealer_rounds), "--boxes", "2", "--broker", self.broker_url]
        self.stderr, self.control = [], ""
        self.dealer_done.clear()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "controller.cli", "sim", *args, cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self._tasks = [asyncio.create_task(_lines(self.proc.stderr, self._err))]
        try:
            async with asyncio.timeout(guard_s):
                while not self.control:
                    raw = await self.proc.stdout.readline()
                    if not raw:
                        raise Stuck(f"tablectl sim ended: {' '.join(self.stderr[-3:])}")
                    text = raw.decode(errors="replace").strip()
                    if text.startswith("control  at="):
                        self.control = text.removeprefix("control  at=").rstrip("/")
        except TimeoutError:
            raise Stuck(f"tablectl sim did not listen within {guard_s:g}s") from None
        self._tasks.append(asyncio.create_task(_lines(self.proc.stdout, lambda raw: None)))

    def _err(self, raw: bytes) -> None:
        text = raw.decode(errors="replace").rstrip()
        if text.startswith("tablectl sim: dealer:"):
            self.dealer_done_at = min(self.dealer_done_at, time.time())
            self.dealer_said = text
            self.dealer_done.set()
        self.stderr.append(text)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with aiohttp.ClientSession() as s, s.post(f"{self.control}/{path}", json=body) as r:
            answer: dict[str, Any] = await r.json()
        if not answer.get("ok"):
            raise Stuck(f"the control port refused {body}: {answer.get('error')}")
        return answer

    async def devices(self) -> dict[str, Any]:
        async with aiohttp.ClientSession() as s, s.get(f"{self.control}/devices") as r:
            answer: dict[str, Any] = await r.json()
        return dict(answer["devices"])

    async def dealer_ended(self, guard_s: float | None) -> None:
        """The dealer's last line (its rounds settled, or the table stopped it: then the simulated
        devices keep serving, as a table's devices stay on for the floor), or the process gone."""
        assert self.proc is not None
        said, gone = asyncio.ensure_future(self.dealer_done.wait()), asyncio.ensure_future(self.proc.wait())
        try:
            done, _ = await asyncio.wait((said, gone), timeout=guard_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            said.cancel()
            gone.cancel()
        if not done:
            raise Stuck(f"the dealer of tablectl sim said nothing and the process went on for {guard_s:g}s")

    async def wait(self, guard_s: float) -> int:
        assert self.proc is not None
        try:
            async with asyncio.timeout(guard_s):
                code = await self.proc.wait()
        except TimeoutError:
            raise Stuck(f"tablectl sim did not end within {guard_s:g}s") from None
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return code

    async def stop(self, guard_s: float) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return await self.wait(guard_s)
            except Stuck:
                proc.kill()
        return await proc.wait()


class StateWatch:
    """The table's retained public state (``tablectl/<site>/<table>/state``, docs/mqtt.md), as a
    floor console reads it; ``changed`` wakes whoever waits on the next one."""

    def __init__(self, broker_url: str, site: str, table_id: str) -> None:
        host, _, port = broker_url.removeprefix("mqtt://").rpartition(":")
        self.host, self.port = host, int(port)
        self.topic = f"tablectl/{site}/{table_id}/state"
        self.snap: dict[str, Any] = {}
        self.count = 0
        self.changed = asyncio.Event()
        # When the game last moved (time.monotonic()): a state whose game fields differ from the
        # one before, or the first state of another `tablectl run` process. A device's health
        # flapping is no move. The soak's waits are bounded by the table not moving, never by a
        # guess of how long the moves they wait for take on a busy machine.
        self.moved_at = time.monotonic()
        self._last: tuple[object, ...] = ()
        # While this says so (the table's process is starting), time does not count as stillness.
        self.paused: Callable[[], bool] = lambda: False
        self.batches_in_play: list[str] = []  # the batch in the shoe, each time it changed
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        connected = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._read(connected))
        await connected

    async def _read(self, connected: asyncio.Future[None]) -> None:
        async with aiomqtt.Client(self.host, self.port) as client:
            await client.subscribe(self.topic, qos=1)
            connected.set_result(None)
            async for message in client.messages:
                with contextlib.suppress(ValueError, TypeError):
                    body = json.loads(message.payload)
                    snap = body.get("snapshot")
                    if isinstance(snap, dict):
                        self._seen(snap, str(body.get("incarnation")))

    def resumed(self) -> None:
        """The table's process is up again: its stillness counts from now."""
        self.moved_at = time.monotonic()
        self.changed.set()

    def _seen(self, snap: dict[str, Any], incarnation: str = "") -> None:
        self.snap, self.count = snap, self.count + 1
        now = (incarnation, *progress(snap))
        if now != self._last:
            self._last, self.moved_at = now, time.monotonic()
        back = snap.get("batch_in_shoe")
        if back and (not self.batches_in_play or self.batches_in_play[-1] != back):
            self.batches_in_play.append(str(back))
        self.changed.set()

    async def until(self, cond: Callable[[dict[str, Any]], bool], what: str, guard_s: float) -> None:
        """Until a state ``cond`` accepts, however long the table takes while it moves; Stuck
        naming ``what`` and the last state once the table has not moved for ``guard_s``."""
        start = time.monotonic()
        while not cond(self.snap):
            if self.paused():
                start = time.monotonic()
            still_s = time.monotonic() - max(start, self.moved_at)
            if still_s >= guard_s:
                keys = ("round", "in_round", "batch_in_shoe", "halted", "asking", "devices")
                raise Stuck(
                    f"waited for {what}: the table did not move for {guard_s:g}s;"
                    f" state: { ({k: self.snap.get(k) for k in keys}) }"
                )
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(guard_s - still_s):
                    await self.changed.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
