"""``/metrics`` (the Prometheus text format) and ``/healthz`` over HTTP, for ``tablectl run
--metrics`` and ``tablectl archive --metrics``: where a casino's existing monitoring scrapes.

A small aiohttp server (the console's framework). GET and HEAD only, no other path; the text
comes from prometheus_client's own encoder (``generate_latest``). ``tablectl archive`` serves it
on its own loop; ``tablectl run`` serves it from a process of its own (metrics_process.py), fed
by the table at most once a second, so that no flood of scrapers can cost the table its pace.

A flood is bounded here too: connections are counted per address and in all
(controller/connection_caps.py: one past a cap is answered one 503 line and closed before
aiohttp sees a byte of it), and the cap in all stays below the process's open-file limit, so
the process refuses connections before it runs out of files; a connection that has not sent a
whole request within ``IDLE_S`` of opening (a partial header held open) is closed (aiohttp's
``keepalive_timeout``, which runs from the connection's opening). Refusals are one log line a
minute with their count, never a line each; so is the event loop's own complaint when
``accept()`` finds no file left (EMFILE), which it otherwise logs each time it retries.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest

from controller.connection_caps import CappedSite, ConnectionCaps
from controller.errors import ConfigError

Health = Callable[[], tuple[bool, str]]  # (healthy, one line saying why)
Scrape = tuple[bytes, bool, str]  # the metrics text, healthy, why
Source = Callable[[], Awaitable[Scrape]]

IDLE_S = 10.0  # a whole request within this of opening or of the last answer, or closed
MAX_PER_SOURCE = 16  # open connections from one address (a Prometheus opens one or two)
MAX_CONNECTIONS = 512  # open connections in all, and never closer than FILES_KEPT to the file limit
FILES_KEPT = 64  # files the process keeps for itself (its log, its link to the table, the loop)
SAY_EVERY_S = 60.0  # refused connections and accept() failures: one line a minute at most


def connection_cap() -> int:
    """Connections in all: MAX_CONNECTIONS, or fewer when the files left under the open-file
    limit are fewer (FILES_KEPT of them kept for the process itself)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: the limit alone
        open_now = 0
    return max(1, min(MAX_CONNECTIONS, soft - open_now - FILES_KEPT))


def local_source(registry: CollectorRegistry, health: Health) -> Source:
    """The registry and health of this very process, read at scrape time."""

    async def scrape() -> Scrape:
        ok, why = health()
        return generate_latest(registry), ok, why

    return scrape


class EveryMinute:
    """One log line a minute at most for an event that may come by the thousand, with the count
    of those not said."""

    def __init__(self, event: str, every_s: float = SAY_EVERY_S) -> None:
        self.event, self.every_s = event, every_s
        self.log = structlog.get_logger("tablectl.metrics")
        self._last: float | None = None
        self.unsaid = 0

    def __call__(self, **fields: Any) -> None:
        now = time.monotonic()
        if self._last is not None and now - self._last < self.every_s:
            self.unsaid += 1
            return
        self.log.warning(self.event, **fields, since_last_line=self.unsaid)
        self._last, self.unsaid = now, 0


class MetricsServer:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        health: Health | None = None,
        *,
        source: Source | None = None,
    ) -> None:
        if source is None:
            assert registry is not None and health is not None, "a registry and a health, or a source"
            source = local_source(registry, health)
        self.source = source
        self._runner: web.ServerRunner | None = None
        self.address: tuple[str, int] | None = None
        self._refused = EveryMinute("metrics_connection_refused")
        self._no_files = EveryMinute("metrics_out_of_files")
        self.caps = ConnectionCaps(MAX_PER_SOURCE, connection_cap(), self._on_refused)

    def _on_refused(self, source: str, why: str) -> None:
        self._refused(remote=source, reason=why, refused=self.caps.refused)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="only GET and HEAD\n", headers={"Allow": "GET, HEAD"})
        if request.path not in ("/metrics", "/healthz"):
            return web.Response(status=404, text="not found: /metrics and /healthz only\n")
        try:
            text, ok, why = await self.source()
        except TimeoutError:
            return web.Response(status=503, text="the table did not answer in time\n")
        if request.path == "/metrics":
            # Labelled 0.0.4: Debian 12's Prometheus (2.42) predates format 1.0.0, and with only
            # classic metric names the two texts are the same bytes.
            return web.Response(body=text, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
        return web.Response(status=200 if ok else 503, text=why + "\n")

    def _loop_said(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler: accept() out of files is one line a minute (asyncio
        says it on every retry, every 0.1 s); anything else as asyncio would."""
        if context.get("message") == "socket.accept() out of system resource":
            self._no_files(error=str(context.get("exception")), open_connections=self.caps.count())
            return
        loop.default_exception_handler(context)

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on host:port (0: a free one); the address actually bound."""
        asyncio.get_running_loop().set_exception_handler(self._loop_said)
        server = web.Server(self._handle, access_log=None, keepalive_timeout=IDLE_S)
        runner = web.ServerRunner(server, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await CappedSite(runner, host, port, self.caps).start()
        except OSError as e:
            await runner.cleanup()
            raise ConfigError(f"metrics: cannot listen on {host}:{port}: {e.strerror or e}") from None
        self._runner = runner
        name = runner.addresses[0]
        self.address = (str(name[0]), int(name[1]))
        return self.address

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
