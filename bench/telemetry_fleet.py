"""Fleet-view throughput with many simulated tables, and the outbox's backlog drain rate.

    .venv/bin/python bench/telemetry_fleet.py [--tables 500] [--rate 10] [--seconds 20] [--procs 4]
                                              [--backlog 20000]

Starts its own mosquitto (plain TCP on a free port, no auth: the figure is the view's, not TLS's),
then:

1. Fleet: ``--procs`` worker processes each hold tables/procs real aiomqtt connections; every
   table publishes a birth, a retained state each second and ``--rate`` QoS 1 events per second
   with contiguous seq and the wall time it was sent. The main process runs the monitor's own
   ``consume`` into a FleetView and redraws the monitor's ``render`` twice a second (into a
   string), as ``tablectl monitor`` does. Printed: offered and received messages per second, gaps
   seen, and the delivery latency (send to fold) at p50/p99 in the first and the last quarter of
   the run: a view that falls behind shows a latency that grows.
2. Drain: a journal holding ``--backlog`` records nobody has published (as after an outage);
   a real Telemetry starts and the time until the broker has acknowledged the last one is taken.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import multiprocessing
import os
import pathlib
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import aiomqtt
from rich.console import Console

from controller.backoff import BackoffPolicy
from controller.game_config import default_options
from controller.journal import Classification, Journal
from controller.table.core import Table
from controller.telemetry import BrokerSettings, TableIdentity, Telemetry
from controller.telemetry.config import versions
from controller.telemetry.fleet import FleetView
from controller.telemetry.monitor import consume, render

BATCH = int(os.environ.get("BENCH_BATCH", "256"))
LOADS = {
    "wire": "one MQTT connection per table, frames written by bench/fleet_load.py in {procs} process(es)",
    "connections": "one aiomqtt connection per table in {procs} processes",
    "light": "all tables through one paho connection",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(directory: pathlib.Path, port: int) -> subprocess.Popen[bytes]:
    conf = directory / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 1000000\n"
        f"max_inflight_messages 0\nlog_dest none\nuser {os.environ.get('USER', 'root')}\n",
        encoding="utf-8",
    )
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # a benchmark may poll for its broker's port
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("mosquitto did not start")


# -- the simulated tables (worker processes) ---------------------------------------------------


# What a bench table publishes, (topic, JSON body), the same for the aiomqtt and the paho workers.
def birth_message(base: str) -> tuple[str, str]:
    birth = {"version": 1, "online": True, "game": "double-attack", "site": "bench", "table": base}
    return f"{base}/status", json.dumps(birth)


def event_message(base: str, seq: int, now: float) -> tuple[str, str]:
    event = {"version": 1, "seq": seq, "at": now, "kind": "card_dealt", "classification": "public"}
    return f"{base}/events", json.dumps({**event, "payload": {"box": 1, "card": "QH", "round": seq}})


def state_message(base: str, seq: int) -> tuple[str, str]:
    state = {"version": 1, "game": "double-attack", "snapshot": {"round": seq, "cards_in_shoe": 300}}
    return f"{base}/state", json.dumps(state)


async def tables_worker(
    port: int, first: int, count: int, rate: float, seconds: float, started: float
) -> int:
    clients = [
        aiomqtt.Client("127.0.0.1", port, identifier=f"bench-t{first + i}", max_inflight_messages=100)
        for i in range(count)
    ]
    for c in clients:
        await c.__aenter__()
        c.pending_calls_threshold = 10_000
    bases = [f"tablectl/bench/t{first + i:04d}" for i in range(count)]
    for c, base in zip(clients, bases, strict=True):
        await c.publish(*birth_message(base), qos=1, retain=True)
    seq = [0] * count
    sent = 0
    pending: set[asyncio.Task[None]] = set()
    period = 1.0 / rate
    await asyncio.sleep(max(0.0, started - time.time()))  # every worker starts at the same wall time
    tick = time.monotonic()
    end = tick + seconds
    ticks = 0
    while time.monotonic() < end:
        now = time.time()
        for i, (c, base) in enumerate(zip(clients, bases, strict=True)):
            seq[i] += 1
            task = asyncio.create_task(c.publish(*event_message(base, seq[i], now), qos=1))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += 1
            if ticks % int(rate) == 0:  # once a second: the retained state
                t2 = asyncio.create_task(c.publish(*state_message(base, seq[i]), qos=1, retain=True))
                pending.add(t2)
                t2.add_done_callback(pending.discard)
                sent += 1
        ticks += 1
        tick += period
        await asyncio.sleep(max(0.0, tick - time.monotonic()))
    await asyncio.gather(*pending, return_exceptions=True)
    for c in clients:
        await c.__aexit__(None, None, None)
    return sent


def worker_main(
    port: int, first: int, count: int, rate: float, seconds: float, started: float, q: Any
) -> None:
    q.put(asyncio.run(tables_worker(port, first, count, rate, seconds, started)))


def wire_worker_main(
    port: int, first: int, count: int, rate: float, seconds: float, started: float, q: Any
) -> None:
    from bench.fleet_load import run_worker

    q.put(asyncio.run(run_worker(port, first, count, rate, seconds, started)))


def light_worker_main(port: int, count: int, rate: float, seconds: float, started: float, q: Any) -> None:
    """The same messages from one paho connection (C-light, threaded): a load generator cheap
    enough that on two cores the figure is the view's own ceiling, not the publishers'."""
    import paho.mqtt.client as mqtt

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-light")
    client.max_inflight_messages_set(1000)
    client.connect("127.0.0.1", port)
    client.loop_start()
    bases = [f"tablectl/bench/t{i:04d}" for i in range(count)]
    for base in bases:
        client.publish(*birth_message(base), qos=1, retain=True)
    seq = [0] * count
    sent = 0
    period = 1.0 / rate
    time.sleep(max(0.0, started - time.time()))
    tick = time.monotonic()
    end = tick + seconds
    ticks = 0
    info = None
    while time.monotonic() < end:
        now = time.time()
        for i, base in enumerate(bases):
            seq[i] += 1
            info = client.publish(*event_message(base, seq[i], now), qos=1)
            sent += 1
            if ticks % int(rate) == 0:
                client.publish(*state_message(base, seq[i]), qos=1, retain=True)
                sent += 1
        ticks += 1
        tick += period
        time.sleep(max(0.0, tick - time.monotonic()))
    if info is not None:
        info.wait_for_publish(timeout=30)
    client.loop_stop()
    client.disconnect()
    q.put(sent)


# -- the fleet view (main process) ----------------------------------------------------------------


class TimedView(FleetView):
    """The monitor's view, sampling each event's delivery latency (send time to fold)."""

    def __init__(self) -> None:
        super().__init__()
        self.samples: list[tuple[float, float]] = []  # (received at, latency)

    def ingest(self, topic: str, payload: bytes) -> None:
        super().ingest(topic, payload)
        if self.messages % 50 == 0 and topic.endswith("/events"):
            now = time.time()
            self.samples.append((now, now - json.loads(payload)["at"]))


async def fleet(port: int, tables: int, rate: float, seconds: float, procs: int, load: str) -> None:
    view = TimedView()
    settings = BrokerSettings("127.0.0.1", port)
    consumer = asyncio.create_task(consume(settings, view))
    await asyncio.sleep(0.5)  # let the view subscribe before the tables start
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    started = time.time() + 2.0  # all workers start publishing together, after connecting
    per = tables // procs
    if load == "light":
        workers = [ctx.Process(target=light_worker_main, args=(port, tables, rate, seconds, started, q))]
    else:
        target = wire_worker_main if load == "wire" else worker_main
        workers = [
            ctx.Process(target=target, args=(port, p * per, per, rate, seconds, started, q))
            for p in range(procs)
        ]
    for w in workers:
        w.start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    sink = Console(file=io.StringIO(), width=160)
    per_second: list[int] = []
    last = view.messages
    draw_ms: list[float] = []
    last_t = time.perf_counter()
    folded_at_end: int | None = None
    while time.time() < started + seconds + 3:
        await asyncio.sleep(0.5)
        t = time.perf_counter()
        sink.print(render(view, 40))  # the monitor's redraw, same cost
        draw_ms.append((time.perf_counter() - t) * 1000)
        now = time.perf_counter()
        per_second.append(round((view.messages - last) / (now - last_t)))
        last, last_t = view.messages, now
        if folded_at_end is None and time.time() >= started + seconds:
            folded_at_end = view.messages - tables  # what the view had folded when the tables stopped
    loop = asyncio.get_running_loop()
    sent = 0
    for _ in workers:  # q.get blocks: off the loop, so the view keeps consuming
        sent += await loop.run_in_executor(None, q.get)
    for w in workers:
        w.join()
    view_cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    load_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Let the tail arrive, then stop.
    deadline = time.time() + 10
    while view.messages < sent + tables and time.time() < deadline:  # noqa: ASYNC110 - a bench may poll
        await asyncio.sleep(0.1)
    consumer.cancel()
    window = [r for r in per_second if r > 0]
    steady = window[4:-6] if len(window) > 12 else window
    run = [s for s in view.samples if started <= s[0] <= started + seconds]
    quarter = max(len(run) // 4, 1)

    def pct(xs: list[float], p: float) -> float:
        return statistics.quantiles(xs, n=100)[int(p) - 1] * 1000 if len(xs) > 2 else float("nan")

    first, last_q = [s[1] for s in run[:quarter]], [s[1] for s in run[-quarter:]]
    gaps = sum(t.gaps for t in view.tables.values())
    print(
        f"fleet: {len(view.tables)} tables x {rate:g} events/s (+1 state/s) for {seconds:g} s, "
        f"{LOADS[load].format(procs=procs)}"
    )
    print(
        f"  offered {sent / seconds:,.0f} msg/s; sent {sent:,}, "
        f"received {view.messages - tables:,} (+{tables} births)"
    )
    print(
        f"  received per second in the steady part: median {statistics.median(steady):,.0f}, "
        f"min {min(steady):,.0f}"
    )
    behind = sent - (folded_at_end or 0)
    behind_ms = behind / (sent / seconds) * 1000
    print(
        f"  behind when the tables stopped: {behind:,} messages = {behind_ms:,.0f} ms "
        f"of load (measured at the first redraw after the end, up to 0.5 s late)"
    )
    print(f"  gaps seen by the view: {gaps}; repeats: {sum(t.repeats for t in view.tables.values())}")
    print(
        f"  latency send->fold p50/p99: first quarter {pct(first, 50):.1f}/{pct(first, 99):.1f} ms, "
        f"last quarter {pct(last_q, 50):.1f}/{pct(last_q, 99):.1f} ms"
    )
    print(f"  redraw of the monitor (40 rows): median {statistics.median(draw_ms):.1f} ms")
    print(
        f"  CPU: the view {view_cpu:.0%} of one core (receive, fold and redraw); the load generator "
        f"{(load_cpu.ru_utime + load_cpu.ru_stime) / seconds:.0%} of one core"
    )


async def drain(port: int, backlog: int, directory: pathlib.Path) -> None:
    path = directory / "backlog.db"
    with Journal.open(path) as journal:
        at = 1_800_000_000.0
        entries: list[tuple[str, dict[str, Any], Classification, float]] = []
        for i in range(backlog):
            if i % 10 == 9:
                entries.append(
                    ("hole_card_dealt", {"seat": 1, "card": "AS"}, Classification.UNTIL_REVEALED, at + i)
                )
            else:
                dealt = {"box": i % 6 + 1, "card": "QH", "hand": 0, "round": i // 12, "back": "red"}
                entries.append(("card_dealt", {**dealt, "purpose": "player"}, Classification.PUBLIC, at + i))
            if len(entries) == 1000:
                journal.append_many(entries)
                entries = []
        journal.append_many(entries)
    identity = TableIdentity("bench", "drain", "double-attack", "sha256:bench", versions())
    telemetry = Telemetry(
        BrokerSettings("127.0.0.1", port), identity, path, backoff=BackoffPolicy(0.05, 0.5), batch=BATCH
    )
    # As on a table: a snapshot to publish, so each batch sends the retained state again too
    # (its journal.published_seq, for monitors that start late).
    telemetry.state_changed(Table(default_options("double-attack")).snapshot())
    t0 = time.perf_counter()
    await telemetry.start()
    while telemetry.acked_seq < backlog:  # noqa: ASYNC110 - a bench may poll
        await asyncio.sleep(0.01)
    took = time.perf_counter() - t0
    await telemetry.stop()
    with Journal.open(path, readonly=True) as journal:
        assert journal.published_seq() == backlog
    print(
        f"drain: {backlog:,} journal records published and acknowledged (QoS 1) in {took:.2f} s "
        f"= {backlog / took:,.0f} records/s (connect and birth included)"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", type=int, default=500)
    p.add_argument("--rate", type=float, default=10.0, help="events per second per table")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--procs", type=int, default=None, help="load processes (default: 1 for wire, else 4)")
    p.add_argument(
        "--load",
        choices=sorted(LOADS),
        default="wire",
        help="wire (default): one MQTT connection per table, written without a client library, so "
        "the load generator leaves the CPU to the view; connections: one aiomqtt connection per "
        "table in --procs processes (the generator needs a core of its own); light: one paho "
        "connection for all tables",
    )
    p.add_argument("--backlog", type=int, default=20_000)
    p.add_argument("--skip-fleet", action="store_true")
    args = p.parse_args()
    if args.procs is None:
        args.procs = 1 if args.load == "wire" else 4
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        broker = start_broker(pathlib.Path(d), port)
        try:
            if not args.skip_fleet:
                asyncio.run(fleet(port, args.tables, args.rate, args.seconds, args.procs, args.load))
            asyncio.run(drain(port, args.backlog, pathlib.Path(d)))
        finally:
            broker.terminate()
            broker.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
