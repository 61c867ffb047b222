"""The least CPU an appliance at rest can cost on this machine: its two processes' irreducible parts.

appliance_start_game.py measures the appliance at rest (the table's process polling its devices,
the key watch's process looking at the keypad every 2 ms). This script measures, on the same
machine, what those two processes cannot do with less, each against devices that answer at once
(a plain server in a process of its own, so the device's own cost is not counted):

- ``look_loop_python``: a Python loop that does nothing but a look's system calls every
  ``--watch-ms``: sleep to the look's time, send the prepared 12-byte read, receive the 99-byte
  answer on a blocking socket. Two wakeups a look (the timer's and the answer's): a look that acts
  on what it read at once cannot have fewer (answers read one look late would add the interval to
  the past-posting window).
- ``look_loop_c``: the same loop in C (compiled here with ``cc``; null when there is none), to
  show what the wakeups alone cost on this machine, whatever the language.
- ``pymodbus_polls``: pymodbus clients polling blocks of the table's other devices' sizes at
  their shipped rates (the shoe's 16 words at 20 Hz, the shuffler's 10 and the reader's 4 at
  10 Hz; all on Modbus TCP here), nothing decoded: the wire library's own cost.
- ``asyncio_polls``: the same polls on plain asyncio streams: the event loop's floor.

``floor_with_pymodbus`` adds ``pymodbus_polls`` to ``look_loop_python``: the least the appliance
as built (Python, pymodbus) can cost at rest with a watch at that interval. Each figure is the
median of ``--repeat`` runs of ``--seconds`` each (the shares move by a third between runs on a
shared VM).

    .venv/bin/python bench/cpu_at_rest_floor.py [--seconds 5] [--repeat 5] [--watch-ms 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pymodbus.client import AsyncModbusTcpClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout

from background_load import load_average  # bench/, beside this script

# The table's devices other than the keypad as shipped (config/tables/double-back-jack.toml and
# the reference profiles): words per poll and polls a second.
POLLED = ({"words": 16, "hz": 20.0}, {"words": 10, "hz": 10.0}, {"words": 4, "hz": 10.0})
LOOK_WORDS = 45  # the keypad's poll block, as the watch reads it
TARGET = 0.04  # issue 27: the appliance's CPU share at rest with the watch running

C_LOOP = r"""
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
int main(int argc, char **argv) {
  int port = atoi(argv[1]); long period_ns = atol(argv[2]); double seconds = atof(argv[3]);
  int looks = (int)(seconds * 1e9 / period_ns), one = 1, words = atoi(argv[4]), size = 9 + 2 * words;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(s, (void *)&a, sizeof a)) return 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  unsigned char req[12] = {0, 1, 0, 0, 0, 6, 3, 3, 0, 0, 0, (unsigned char)words}, rep[256];
  struct timespec t, w0, w1; struct rusage r0, r1;
  clock_gettime(CLOCK_MONOTONIC, &t); w0 = t; getrusage(RUSAGE_SELF, &r0);
  for (int i = 0; i < looks; i++) {
    t.tv_nsec += period_ns;
    if (t.tv_nsec >= 1000000000) { t.tv_nsec -= 1000000000; t.tv_sec++; }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
    send(s, req, 12, 0);
    for (int got = 0, k; got < size; got += k)
      if ((k = recv(s, rep + got, size - got, 0)) <= 0) return 2;
  }
  getrusage(RUSAGE_SELF, &r1); clock_gettime(CLOCK_MONOTONIC, &w1);
  double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec)
             + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6
             + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
  printf("%.6f\n", cpu / ((w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9));
  return 0;
}
"""


def _serve(port: multiprocessing.SimpleQueue[int]) -> None:
    """A device that answers every read at once (zeros) and every write with its echo."""
    listener = socket.create_server(("127.0.0.1", 0))
    port.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while request := conn.recv(260):
        tid, _, _, unit, function = struct.unpack_from(">HHHBB", request)
        if function == 3:
            (count,) = struct.unpack_from(">H", request, 10)
            conn.sendall(struct.pack(">HHHBBB", tid, 0, 3 + 2 * count, unit, 3, 2 * count) + bytes(2 * count))
        else:
            conn.sendall(request[:12])


@contextmanager
def devices(n: int) -> Iterator[list[int]]:
    """``n`` devices, each a process of its own: their ports."""
    ctx = multiprocessing.get_context("spawn")
    procs, ports = [], []
    for _ in range(n):
        queue = ctx.SimpleQueue()
        proc = ctx.Process(target=_serve, args=(queue,), daemon=True)
        proc.start()
        procs.append(proc)
        ports.append(queue.get())
    try:
        yield ports
    finally:
        for proc in procs:
            proc.kill()
            proc.join()


@contextmanager
def _share() -> Iterator[list[float]]:
    """This process's CPU over the wall time of the block, put in the list it yields."""
    share: list[float] = []
    cpu0, t0 = _cpu_s(), time.perf_counter()
    yield share
    share.append((_cpu_s() - cpu0) / (time.perf_counter() - t0))


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def look_loop_python(seconds: float, period_s: float) -> float:
    with devices(1) as [port]:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request = struct.pack(">HHHBBHH", 1, 0, 6, 3, 3, 0, LOOK_WORDS)
        reply = bytearray(9 + 2 * LOOK_WORDS)

        try:
            with _share() as share:
                due = time.monotonic()
                for _ in range(round(seconds / period_s)):
                    due += period_s
                    time.sleep(max(0.0, due - time.monotonic()))
                    sock.sendall(request)
                    got = 0
                    while got < len(reply):
                        got += sock.recv_into(memoryview(reply)[got:])
            return share[0]
        finally:
            sock.close()


def look_loop_c(seconds: float, period_s: float) -> float | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp) / "looks.c", Path(tmp) / "looks"
        source.write_text(C_LOOP)
        subprocess.run([cc, "-O2", "-o", str(binary), str(source)], check=True)
        with devices(1) as [port]:
            out = subprocess.run(
                [str(binary), str(port), str(round(period_s * 1e9)), str(seconds), str(LOOK_WORDS)],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
    return float(out.stdout)


async def _polls_share(seconds: float, reads: list[Callable[[], Awaitable[Any]]]) -> float:
    """Each device (``reads``, in POLLED's order) polled at its rate for ``seconds``: this
    process's CPU share meanwhile."""
    with _share() as share:
        await asyncio.gather(
            *(_poll_at(d["hz"], seconds, read) for read, d in zip(reads, POLLED, strict=True))
        )
    return share[0]


async def _poll_at(hz: float, seconds: float, read: Callable[[], Awaitable[Any]]) -> None:
    loop = asyncio.get_running_loop()
    due = loop.time()
    for _ in range(round(seconds * hz)):
        due += 1 / hz
        await asyncio.sleep(max(0.0, due - loop.time()))
        await read()


def pymodbus_polls(seconds: float) -> float:
    async def polls(ports: list[int]) -> float:
        clients = [AsyncModbusTcpClient("127.0.0.1", port=p) for p in ports]
        for c in clients:
            await c.connect()

        def reader(client: AsyncModbusTcpClient, words: int) -> Callable[[], Awaitable[Any]]:
            return lambda: client.read_holding_registers(0, count=words, device_id=1)

        try:
            reads = [reader(c, int(d["words"])) for c, d in zip(clients, POLLED, strict=True)]
            return await _polls_share(seconds, reads)
        finally:
            for c in clients:
                c.close()

    with devices(len(POLLED)) as ports:
        return asyncio.run(polls(ports))


def asyncio_polls(seconds: float) -> float:
    async def polls(ports: list[int]) -> float:
        streams = [await asyncio.open_connection("127.0.0.1", p) for p in ports]

        def reader(
            stream: tuple[asyncio.StreamReader, asyncio.StreamWriter], words: int
        ) -> Callable[[], Awaitable[Any]]:
            request = struct.pack(">HHHBBHH", 1, 0, 6, 1, 3, 0, words)

            async def read() -> None:
                stream[1].write(request)
                await stream[0].readexactly(9 + 2 * words)

            return read

        try:
            reads = [reader(s, int(d["words"])) for s, d in zip(streams, POLLED, strict=True)]
            return await _polls_share(seconds, reads)
        finally:
            for _, writer in streams:
                writer.close()

    with devices(len(POLLED)) as ports:
        return asyncio.run(polls(ports))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0, help="each run's length")
    p.add_argument("--repeat", type=int, default=5, help="runs of each figure (the median is printed)")
    p.add_argument("--watch-ms", type=float, default=2.0, help="the look's interval")
    args = p.parse_args()
    period_s, runs = args.watch_ms / 1000, range(args.repeat)
    figures: dict[str, list[float]] = {"look_loop_python": [], "look_loop_c": [], "pymodbus_polls": [],
                                       "asyncio_polls": []}  # fmt: skip
    for _ in runs:  # interleaved, so a noisy minute weighs on every figure alike
        figures["look_loop_python"].append(look_loop_python(args.seconds, period_s))
        if (c := look_loop_c(args.seconds, period_s)) is not None:
            figures["look_loop_c"].append(c)
        figures["pymodbus_polls"].append(pymodbus_polls(args.seconds))
        figures["asyncio_polls"].append(asyncio_polls(args.seconds))
    median = {k: round(statistics.median(v), 4) if v else None for k, v in figures.items()}
    floor = median["look_loop_python"] + median["pymodbus_polls"]  # type: ignore[operator]
    print(json.dumps({
        "watch_ms": args.watch_ms, "seconds": args.seconds, "repeat": args.repeat,
        "polled_devices": POLLED, "cpus": os.cpu_count(), "load_average_1m": load_average(),
        **median,
        "runs": {k: [round(x, 4) for x in v] for k, v in figures.items()},
        "floor_with_pymodbus": round(floor, 4),
        "target": TARGET,
        "floor_over_target": round(floor / TARGET, 2),
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
