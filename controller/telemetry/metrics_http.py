"""``/metrics`` (the Prometheus text format) and ``/healthz`` over HTTP, for ``tablectl run
--metrics`` and ``tablectl archive --metrics``: where a casino's existing monitoring scrapes.

A small aiohttp server on the process's own event loop (the console's framework), so a scrape
reads the state between two steps, never in the middle of one. GET and HEAD only, no other path;
the text comes from prometheus_client's own encoder (``generate_latest``).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest

from controller.addresses import parse_host_port
from controller.errors import ConfigError

Health = Callable[[], tuple[bool, str]]  # (healthy, one line saying why)


def parse_address(text: str, where: str) -> tuple[str, int]:
    """``HOST:PORT`` for /metrics; ConfigError naming ``where``."""
    return parse_host_port(text, where, 9470)


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, health: Health) -> None:
        self.registry, self.health = registry, health
        self._runner: web.ServerRunner | None = None
        self.address: tuple[str, int] | None = None

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="only GET and HEAD\n", headers={"Allow": "GET, HEAD"})
        if request.path == "/metrics":
            # Labelled 0.0.4: Debian 12's Prometheus (2.42) predates format 1.0.0, and with only
            # classic metric names the two texts are the same bytes.
            text = generate_latest(self.registry)
            return web.Response(body=text, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
        if request.path == "/healthz":
            ok, why = self.health()
            return web.Response(status=200 if ok else 503, text=why + "\n")
        return web.Response(status=404, text="not found: /metrics and /healthz only\n")

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on host:port (0: a free one); the address actually bound."""
        runner = web.ServerRunner(web.Server(self._handle), shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
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
