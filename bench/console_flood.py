"""The console under a flood, and what it costs the table (issue 23).

A table dealt by the virtual dealer through the simulators (real sockets and ptys) in this
process, with the table console in front of it in its own process, as ``tablectl run`` starts
it. Two windows of ``--window`` wall seconds each:
quiet, then while a separate attacker process holds ``--streams`` server-sent-event requests (a
signed-in dealer's, refused past the caps and retried each second) and ``--slow`` slowloris
connections (a header byte a second from 40 addresses, reconnecting when the console closes
them; niced, as an attacker's CPU is not the appliance's). In both windows a separate probe
process, signed in as the floor, asks for
/api/display every 100 ms. Prints one JSON object: rounds settled per window, the pace under
the flood as a share of the quiet one, and the probe's /api/display p50/p99/max in each window.

    .venv/bin/python bench/console_flood.py [--window 45] [--streams 1000] [--slow 1000]
        [--pace 0.05] [--boxes 1]

``--pace`` gives the virtual dealer real seconds between actions, so the table deals at a pace it
has the CPU for (about 2.5 rounds a second with one box), as a real table does, and the figure
is what the console takes from it. ``--pace 0`` deals flat out on the virtual clock: that
measures the CPU left over on the whole machine (the attacker's processes included), not the
console.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PASSWORDS = {"flo": "floor-bench-secret", "dan": "dealer-bench-secret"}


# ------------------------------------------------------------------ the attacker and the probe
async def _sign_in(url: str, user: str, source: str) -> Any:
    import aiohttp

    c = aiohttp.ClientSession(
        url,
        connector=aiohttp.TCPConnector(limit=0, local_addr=(source, 0)),
        cookie_jar=aiohttp.CookieJar(unsafe=True),
    )
    async with c.post("/api/login", json={"user": user, "password": PASSWORDS[user]}) as r:
        assert r.status == 200, await r.text()
    return c


async def attack(url: str, streams: int, slow: int) -> None:
    host, port = url.removeprefix("http://").split(":")

    async def loris(i: int) -> None:
        src = f"127.0.2.{1 + i % 40}"
        while True:
            try:
                _, w = await asyncio.open_connection(host, int(port), local_addr=(src, 0))
                w.write(b"GET /api/display HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                while True:
                    await asyncio.sleep(1.0)
                    w.write(b"X")
                    await w.drain()
            except (ConnectionError, OSError):
                await asyncio.sleep(0.5)

    async def stream(c: Any) -> None:
        while True:
            try:
                async with c.get("/api/events") as r:
                    if r.status == 200:
                        async for _ in r.content:
                            pass
                await asyncio.sleep(1.0)
            except Exception:
                await asyncio.sleep(1.0)

    client = await _sign_in(url, "dan", "127.0.3.1")
    tasks = [asyncio.create_task(loris(i)) for i in range(slow)]
    tasks += [asyncio.create_task(stream(client)) for _ in range(streams)]
    await asyncio.gather(*tasks)


async def probe(url: str) -> None:
    """/api/display every 100 ms; one line of latencies (ms) per 'mark' on stdin."""
    client = await _sign_in(url, "flo", "127.0.4.1")
    times: list[float] = []
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def marks() -> None:
        while await reader.readline():
            print(json.dumps(times), flush=True)
            times.clear()

    task = asyncio.create_task(marks())
    while not task.done():
        t0 = time.perf_counter()
        async with client.get("/api/display") as r:
            await r.read()
            if r.status == 200:
                times.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------ the table
def _cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stats(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {"n": 0}
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "n": len(ms),
        "p50": round(statistics.median(ms), 1),
        "p99": round(p99, 1),
        "max": round(ordered[-1], 1),
    }


async def bench(
    window: float, streams: int, slow: int, game: str, pace: float, boxes: int, in_thread: bool
) -> dict[str, Any]:
    from controller.console.process import ConsoleProcess
    from controller.console.server import Console
    from controller.console.users import User, hash_password, save_users
    from controller.server_settings import ConsoleSettings
    from controller.shipped import table_file
    from controller.supervisor.rig import virtual_table

    with tempfile.TemporaryDirectory() as tmp:
        users = Path(tmp) / "users.toml"
        save_users(
            users,
            {u: User(u, "floor" if u == "flo" else "dealer", hash_password(p)) for u, p in PASSWORDS.items()},
        )
        async with virtual_table(
            table_file(game), Path(tmp) / "j.db", seed=1, boxes=boxes, pace_s=pace
        ) as rig:
            console: Any
            if in_thread:  # the console on a thread of the table's process (for comparison)
                console = Console(rig.supervisor, users)
                host, port = await console.start("127.0.0.1", 0)
                console_pid = os.getpid()
            else:
                console = ConsoleProcess(
                    rig.supervisor, ConsoleSettings("127.0.0.1", 0, users), logging.ERROR
                )
                host, port = await console.start()
                console_pid = console.proc.pid
            url = f"http://{host}:{port}"
            rounds = 0

            async def deal() -> None:
                nonlocal rounds
                await rig.dealer.open_table()
                while True:
                    await rig.dealer.play_round()
                    rounds += 1

            me = [sys.executable, __file__]
            prober = await asyncio.create_subprocess_exec(
                *me, "--probe", url, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
            )
            assert prober.stdin is not None and prober.stdout is not None
            dealer = asyncio.create_task(deal())

            async def measure() -> tuple[int, list[float], dict[str, float]]:
                assert prober.stdin is not None and prober.stdout is not None
                start, cpu0, console0 = rounds, time.process_time(), _cpu(console_pid)
                prober.stdin.write(b"mark\n")  # the latencies so far are dropped
                await prober.stdout.readline()
                await asyncio.sleep(window)
                prober.stdin.write(b"mark\n")
                cpu = {"table": round((time.process_time() - cpu0) / window, 3),
                       "console": round((_cpu(console_pid) - console0) / window, 3)}  # fmt: skip
                return rounds - start, json.loads(await prober.stdout.readline()), cpu

            await asyncio.sleep(3)  # warm up: the table open, the first shoe
            quiet_rounds, quiet_ms, quiet_cpu = await measure()
            attacker = await asyncio.create_subprocess_exec(
                *me, "--attack", url, "--streams", str(streams), "--slow", str(slow)
            )
            await asyncio.sleep(5)  # the flood builds up
            flood_rounds, flood_ms, flood_cpu = await measure()
            for proc in (attacker, prober):
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            dealer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await dealer
            await console.stop()
    return {
        "game": game,
        "pace_s": pace,
        "boxes": boxes,
        "console": "thread" if in_thread else "process",
        "window_s": window,
        "streams_requested": streams,
        "slowloris": slow,
        "rounds_quiet": quiet_rounds,
        "rounds_flood": flood_rounds,
        "pace_share": round(flood_rounds / quiet_rounds, 3) if quiet_rounds else None,
        "display_ms_quiet": _stats(quiet_ms),
        "display_ms_flood": _stats(flood_ms),
        "cpu_share_quiet": quiet_cpu,  # CPU seconds per wall second, of the table's and the console's process
        "cpu_share_flood": flood_cpu,
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--window", type=float, default=45.0)
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--slow", type=int, default=1000)
    p.add_argument("--game", default="double-back-jack")
    p.add_argument("--pace", type=float, default=0.05, help="real seconds per dealer action (0: flat out)")
    p.add_argument("--boxes", type=int, default=1)
    p.add_argument("--in-thread", action="store_true", help="the console on a thread, not a process")
    p.add_argument("--attack", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    args = p.parse_args()
    from controller import logs

    logs.configure(logging.ERROR)
    if args.attack:
        os.nice(19)  # an attacker's CPU is not the appliance's: here it is only what is left over
        asyncio.run(attack(args.attack, args.streams, args.slow))
    elif args.probe:
        asyncio.run(probe(args.probe))
    else:
        print(
            json.dumps(
                asyncio.run(
                    bench(
                        args.window, args.streams, args.slow, args.game, args.pace, args.boxes, args.in_thread
                    )
                )
            )
        )


if __name__ == "__main__":
    main()
