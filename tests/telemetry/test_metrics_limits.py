"""/metrics and /healthz under a flood of connections (issue 38 item 4), over real sockets: the
caps per address and in all answer one 503 line and one log line a minute, a connection that
holds half a header is closed, and a process out of open files says so once a minute (not at
each of the event loop's retries) and serves again once files are free. Client sockets are
bound to addresses of 127.0.0.0/8 to play many sources."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter
from structlog.testing import capture_logs

from controller import logs
from controller.telemetry import metrics_http
from controller.telemetry.metrics_http import MetricsServer

ROOT = Path(__file__).resolve().parents[2]
PARTIAL = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Waiting: "


@pytest.fixture
async def server() -> AsyncIterator[MetricsServer]:
    logs.configure(cache=False)  # capture_logs misses cached loggers
    registry = CollectorRegistry()
    Counter("tablectl_test_scrapes", "a counter", registry=registry).inc()
    s = MetricsServer(registry, lambda: (True, "ok"))
    await s.start("127.0.0.1", 0)
    yield s
    await s.stop()


async def _raw(s: MetricsServer, src: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    assert s.address is not None
    return await asyncio.open_connection(*s.address, local_addr=(src, 0))


async def _get(s: MetricsServer, path: str, src: str = "127.0.20.1") -> tuple[int, str]:
    assert s.address is not None
    host, port = s.address
    connector = aiohttp.TCPConnector(local_addr=(src, 0))
    async with aiohttp.ClientSession(connector=connector) as c, c.get(f"http://{host}:{port}{path}") as r:
        return r.status, await r.text()


async def test_connections_past_the_caps_get_one_line_and_one_log_line(server: MetricsServer) -> None:
    server.caps.per_source, server.caps.total = 3, 5
    held = [await _raw(server, "127.0.21.1") for _ in range(3)]
    with capture_logs() as lines:
        for _ in range(20):
            r, w = await _raw(server, "127.0.21.1")
            answer = await r.read()  # the refusal, then the end of the connection
            assert answer.startswith(b"HTTP/1.1 503") and b"too many connections from your address" in answer
            w.close()
        held += [await _raw(server, "127.0.21.2") for _ in range(2)]
        # At the total cap a new connection is let in by closing the oldest idle one (the caps are
        # the console's): a flood of idle connections cannot keep a scraper out.
        fresh = await _raw(server, "127.0.21.3")
        assert await held[0][0].read() == b"" and server.caps.evicted == 1
        held.append(fresh)
    said = [x for x in lines if x["event"] == "metrics_connection_refused"]
    assert len(said) == 1 and server.caps.refused == 20, said  # 20 refusals, one line
    server.caps.per_source, server.caps.total = metrics_http.MAX_PER_SOURCE, metrics_http.MAX_CONNECTIONS
    status, text = await _get(server, "/metrics")
    assert status == 200 and "tablectl_test_scrapes_total 1.0" in text
    for _, w in held:
        w.close()


async def test_a_half_sent_header_is_closed_and_scrapes_go_on(
    server: MetricsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await server.stop()
    monkeypatch.setattr(metrics_http, "IDLE_S", 0.5)  # read when the server starts
    await server.start("127.0.0.1", 0)
    waiting = [await _raw(server, f"127.0.22.{i}") for i in range(1, 11)]
    for _, w in waiting:
        w.write(PARTIAL)
    status, text = await _get(server, "/metrics")  # served meanwhile
    assert status == 200 and "tablectl_test_scrapes_total 1.0" in text
    for r, w in waiting:
        assert await r.read() == b""  # closed by the server, with nothing said
        w.close()
    assert await _get(server, "/healthz") == (200, "ok\n")


async def test_a_process_out_of_files_says_so_once_and_serves_again() -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.telemetry.child_metrics_files",
        cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    held: list[asyncio.StreamWriter] = []
    try:
        async with asyncio.timeout(60):
            port = json.loads(await child.stdout.readline())["listening"]
            # Far more connections than the process has files: accept() fails with EMFILE (the
            # kernel completes the handshakes into the listen backlog meanwhile).
            for i in range(100):
                _, w = await asyncio.open_connection("127.0.0.1", port, local_addr=(f"127.0.23.{1 + i}", 0))
                w.write(PARTIAL)
                held.append(w)
            lines = []
            while [x["event"] for x in lines].count("_told") < 3:  # the loop's retries, one a second
                lines.append(json.loads(await child.stdout.readline()))
            said = [x for x in lines if x["event"] == "metrics_out_of_files"]
            assert len(said) == 1 and "Too many open files" in said[0]["error"], lines
            for w in held:
                w.close()
            held.clear()
            # Files free again: the next retry accepts, and a scrape is served.
            async with aiohttp.ClientSession() as c, c.get(f"http://127.0.0.1:{port}/healthz") as r:
                assert (r.status, await r.text()) == (200, "ok\n")
    finally:
        for w in held:
            w.close()
        child.stdin.close()
        await child.wait()
