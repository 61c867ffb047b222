"""``/metrics`` and ``/healthz`` of ``tablectl run`` in a process of their own.

Served on the table's own event loop, twenty clients scraping in a loop cut a table's rounds from
54 to 24 in 45 s, and 21,000 idle connections holding a partial header took every open file of
the table's process (its console could not even be restarted). Here the table's process holds
no scraper's connection and no scraper's work: the child (``python -m
controller.telemetry.metrics_process SPEC``) listens, with the connection caps and header
timeout of metrics_http.py, and asks the table over a socket pair for the text and the health
when a scrape finds its copy older than ``FRESH_S``. Scrapes meanwhile share one question, so the
table renders at most once per ``FRESH_S`` however many clients there are (and never when
nobody scrapes); a table that does not answer within ``ANSWER_S`` is a 503.

The parent (``MetricsProcess``) starts the child, answers it, and starts it again with a backoff
when it dies (one line with its exit status); when the parent goes away the child sees the
socket close and exits. The child inherits stdout, so its log lines go where the table's go.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, generate_latest

from controller import logs
from controller.backoff import Backoff, BackoffPolicy
from controller.errors import ConfigError
from controller.telemetry.metrics_http import Health, MetricsServer, Scrape

FRESH_S = 1.0  # a scrape within this of the last answer is served that answer
ANSWER_S = 5.0  # the table answers within this, or the scrape is a 503
START_S = 30.0  # the child is listening within this, or `run` stops with its reason
STOP_S = 5.0
MAX_LINE = 64 * 1024 * 1024  # one answer: the whole metrics text, JSON-encoded
NICE = 10  # below the table in the scheduler's eyes
RESTART = BackoffPolicy(initial_s=0.5, max_s=30.0)


class MetricsProcess:
    """The parent's side: the child started, answered and kept."""

    def __init__(self, registry: CollectorRegistry, health: Health, log_level: int) -> None:
        self.registry, self.health, self.log_level = registry, health, log_level
        self.proc: asyncio.subprocess.Process | None = None
        self.address: tuple[str, int] | None = None
        self.answered = 0  # renders the table did for the child (a flood does not move it much)
        self.restarts = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._keeper: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("tablectl.metrics")

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """The child listening on host:port (ConfigError with its reason if it cannot), then kept."""
        self.address = await self._spawn(host, port)
        self._keeper = asyncio.get_running_loop().create_task(self._keep(), name="metrics-keeper")
        return self.address

    async def _spawn(self, host: str, port: int) -> tuple[str, int]:
        ours, theirs = socket.socketpair()
        spec = {"host": host, "port": port, "fd": theirs.fileno(), "log_level": self.log_level}
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "controller.telemetry.metrics_process", json.dumps(spec),
                pass_fds=(theirs.fileno(),),
            )  # fmt: skip
        finally:
            theirs.close()
        reader, writer = await asyncio.open_connection(sock=ours, limit=MAX_LINE)
        try:
            first = await asyncio.wait_for(reader.readline(), START_S)
        except TimeoutError:
            first = b""
        msg: dict[str, Any] = json.loads(first) if first else {"error": "metrics: its process did not start"}
        if "listening" not in msg:
            writer.close()
            await self._end()
            raise ConfigError(str(msg.get("error", "metrics: its process did not start")))
        self._tasks.append(asyncio.get_running_loop().create_task(self._answer(reader, writer)))
        self.log.info("metrics_started", pid=self.proc.pid, restarts=self.restarts)
        bound = msg["listening"]
        return str(bound[0]), int(bound[1])

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Each line the child sends is a scrape: the text and the health, read now (between two
        steps of the table: this runs on its loop)."""
        try:
            while await reader.readline():
                try:
                    ok, why = self.health()
                    text = generate_latest(self.registry).decode()
                except Exception as e:  # a bug in a reading: said in the answer, the link kept
                    self.log.error("metrics_render_failed", error=f"{type(e).__name__}: {e}")
                    ok, why, text = False, f"metrics could not be read: {type(e).__name__}", ""
                writer.write(json.dumps({"metrics": text, "ok": ok, "why": why}).encode() + b"\n")
                self.answered += 1
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _keep(self) -> None:
        backoff = Backoff(RESTART)
        assert self.address is not None
        while True:
            status = None if self.proc is None else await self.proc.wait()
            delay = backoff.failed()
            self.log.error("metrics_process_died", returncode=status, restart_in_s=round(delay, 2))
            self.proc = None
            await asyncio.sleep(delay)
            self.restarts += 1
            try:
                await self._spawn(*self.address)
                backoff.succeeded()
            except Exception as e:  # the keeper outlives any failure: said, tried again later
                self.log.error("metrics_restart_failed", error=f"{type(e).__name__}: {e}")

    async def stop(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
            self._keeper = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task  # the writer closed: the child sees the socket close and exits
        self._tasks.clear()
        await self._end()

    async def _end(self) -> None:
        if self.proc is None:
            return
        try:
            await asyncio.wait_for(self.proc.wait(), STOP_S)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None


class TableLink:
    """The child's side: the table's answer, asked for at most once per FRESH_S."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._last: tuple[float, Scrape] | None = None
        self._waiting: asyncio.Future[Scrape] | None = None  # the one question out, if any
        self.asked = 0

    async def scrape(self) -> Scrape:
        loop = asyncio.get_running_loop()
        if self._last is not None and loop.time() - self._last[0] < FRESH_S:
            return self._last[1]
        if self._waiting is None or self._waiting.done():
            self._waiting = loop.create_future()
            self.asked += 1
            self.writer.write(b"scrape\n")
        # Shielded: a scrape that gives up leaves the question to the next one.
        async with asyncio.timeout(ANSWER_S):
            return await asyncio.shield(self._waiting)

    async def run(self) -> None:
        """The table's answers, in the order asked, until its end of the socket pair closes."""
        while line := await self.reader.readline():
            doc = json.loads(line)
            answer: Scrape = (str(doc["metrics"]).encode(), bool(doc["ok"]), str(doc["why"]))
            self._last = (asyncio.get_running_loop().time(), answer)
            if self._waiting is not None and not self._waiting.done():
                self._waiting.set_result(answer)
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_exception(TimeoutError())


async def _child(spec: dict[str, Any]) -> int:
    sock = socket.socket(fileno=int(spec["fd"]))
    reader, writer = await asyncio.open_connection(sock=sock, limit=MAX_LINE)
    link = TableLink(reader, writer)
    server = MetricsServer(source=link.scrape)
    try:
        host, port = await server.start(str(spec["host"]), int(spec["port"]))
    except ConfigError as e:
        writer.write(json.dumps({"error": str(e)}).encode() + b"\n")
        await writer.drain()
        return 2
    writer.write(json.dumps({"listening": [host, port]}).encode() + b"\n")
    await writer.drain()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)  # the table stops it; a signal to the group too
    reading = loop.create_task(link.run())  # ends when the table's process closes its end
    stopping = loop.create_task(stop.wait())
    await asyncio.wait([reading, stopping], return_when=asyncio.FIRST_COMPLETED)
    for task in (reading, stopping):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await server.stop()
    writer.close()
    return 0


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    logs.configure(int(spec["log_level"]))
    with contextlib.suppress(OSError):
        os.nice(NICE)
    return asyncio.run(_child(spec))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
