"""An attacker on a table's /metrics, in a process of its own (tests and bench/metrics_flood.py):
``--loops`` clients scraping /metrics back to back, and ``--idle`` connections that send half a
request header and then nothing, from many addresses of 127.0.0.0/8 (reconnecting when closed).
Runs until its stdin closes, then prints one JSON object of counts:

    python -m tests.support.metrics_flood URL [--loops 20] [--idle 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter

PARTIAL = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Waiting: "


async def flood(url: str, loops: int, idle: int) -> Counter[str]:
    import aiohttp

    host, port = url.removeprefix("http://").split("/")[0].split(":")
    counts: Counter[str] = Counter()

    async def scraper(i: int) -> None:
        connector = aiohttp.TCPConnector(limit=1, local_addr=(f"127.0.9.{1 + i % 250}", 0))
        async with aiohttp.ClientSession(connector=connector) as c:
            while True:
                try:
                    async with c.get(url) as r:
                        await r.read()
                        counts[f"scrape_{r.status}"] += 1
                except aiohttp.ClientError:
                    counts["scrape_error"] += 1
                    await asyncio.sleep(0.1)

    async def holder(i: int) -> None:
        src = f"127.0.{10 + i // 250}.{1 + i % 250}"
        while True:
            try:
                r, w = await asyncio.open_connection(host, int(port), local_addr=(src, 0))
            except OSError:
                counts["idle_connect_failed"] += 1
                await asyncio.sleep(0.5)
                continue
            counts["idle_opened"] += 1
            w.write(PARTIAL)
            answer = await r.read()  # until the server closes it
            counts["idle_refused" if answer.startswith(b"HTTP/1.1 503") else "idle_closed"] += 1
            w.close()

    tasks = [asyncio.create_task(scraper(i)) for i in range(loops)]
    tasks += [asyncio.create_task(holder(i)) for i in range(idle)]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        print(json.dumps(counts), flush=True)  # a line in: the counts so far
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return counts


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--loops", type=int, default=20)
    p.add_argument("--idle", type=int, default=200)
    a = p.parse_args()
    counts = asyncio.run(flood(a.url, a.loops, a.idle))
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
