"""A /metrics server whose process has few open files left (for tests/telemetry/test_metrics_limits.py).

Its open-file limit is set to ``LIMIT`` and its connection cap raised past it, so that accept()
itself fails with EMFILE (as when something else in the process took the files). Logs JSON lines
on stdout; each time the loop's handler is told of an accept() out of files it also prints a
``{"event": "_told"}`` marker, so the test knows how often it was told, not only what was said.
Listens on 127.0.0.1 (a free port), prints ``{"listening": PORT}`` first, runs until stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import sys
from typing import Any

from controller import logs
from controller.telemetry.metrics_http import MetricsServer

LIMIT = 60


async def main() -> None:
    logs.configure(logging.INFO)

    async def scrape() -> tuple[bytes, bool, str]:
        return b"# nothing\n", True, "ok"

    server = MetricsServer(source=scrape)
    server.caps.total = server.caps.per_source = 10_000  # accept() is what fails, not the cap
    said = server._no_files

    def told(**fields: Any) -> None:
        said(**fields)
        print(json.dumps({"event": "_told"}), flush=True)

    server._no_files = told  # type: ignore[assignment]
    _, port = await server.start("127.0.0.1", 0)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    print(json.dumps({"listening": port}), flush=True)
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    await reader.read()
    await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
