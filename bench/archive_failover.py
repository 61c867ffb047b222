"""The clustered events pipeline losing a broker node and then a worker, measured.

    .venv/bin/python bench/archive_failover.py [--tables 200] [--rate 10] [--seconds 60]

Starts a three-node NATS cluster of its own (nats-server with JetStream and its MQTT listener, on
free loopback ports), a PostgreSQL cluster of its own, two ``tablectl archive --nats`` worker
processes, and a fleet of simulated tables, each an MQTT 3.1.1 connection to one node (spread
over the three) publishing ``--rate`` QoS 1 chained events a second. At 30% of the window one
broker node is killed (SIGKILL); its tables reconnect to another node and send again every event
the broker had not acknowledged (as the table's outbox does). At 60% one worker is killed
(SIGKILL); what it had taken and not acknowledged goes to the other after the ack wait. The
fleet answers the archive's republish requests (docs/journal.md) through a NATS client on its
tables' behalf. After the window, it waits for the archive to hold every event and no open gap.

Prints JSON: node_killed, events_published (distinct events the tables made), events_archived
(rows), lost (events published and not archived), duplicated (rows beyond one per event: the
primary key makes it 0; redeliveries show in the workers' logs), max_lag_s (an event's ``at``
to the transaction that archived it), the archive's rate (rows a second by ``received_at``)
before the node's loss, after it, after the worker's, and the gap requests it made.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import nats
import psycopg

from bench.fleet_load import card_dealt, connect_frame, publish_frame, utf8_field
from controller.gaming_day import PENNSYLVANIA
from controller.journal import GENESIS_HASH, Classification, Record, canonical_json, record_hash
from controller.telemetry.payloads import death, encode, event_message
from controller.telemetry.topics import TableTopics
from tests import postgres_fixtures
from tests.nats_fixtures import NatsCluster

SITE = "bench"
ROOT = pathlib.Path(__file__).resolve().parents[1]


class _Link(asyncio.Protocol):
    """One table's connection: a CONNACK, then 4-byte PUBACKs (nothing is subscribed)."""

    def __init__(self, table: FleetTable) -> None:
        self.table = table
        self.connected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        data = self.buffer + data
        if not self.connected.done():
            if len(data) < 4:
                self.buffer = data
                return
            if data[:2] != b"\x20\x02" or data[3] != 0:
                self.connected.set_exception(ConnectionError(f"CONNACK refused: {data[:4].hex()}"))
                return
            self.connected.set_result(None)
            data = data[4:]
        whole = len(data) - len(data) % 4
        for i in range(0, whole, 4):
            if data[i] == 0x40:
                self.table.acked(struct.unpack("!H", data[i + 2 : i + 4])[0])
        self.buffer = data[whole:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.connected.done():
            self.connected.set_exception(exc or ConnectionError("closed before CONNACK"))
        self.table.lost(self)


@dataclass
class FleetTable:
    """A table with an outbox: every event kept, each resent until the broker acknowledges it."""

    topics: TableTopics
    ports: list[int]
    node: int  # which node's MQTT listener it uses now
    seq: int = 0
    prev_hash: str = GENESIS_HASH
    bodies: dict[int, bytes] = field(default_factory=dict)
    outstanding: set[int] = field(default_factory=set)  # seqs no node has acknowledged yet
    unacked: dict[int, int] = field(default_factory=dict)  # packet id -> seq, on this connection
    packet_id: int = 0
    link: _Link | None = None
    connecting: bool = False
    reconnects: int = 0

    def __post_init__(self) -> None:
        self.events_topic = utf8_field(self.topics.events)

    def _next_id(self) -> int:
        self.packet_id = self.packet_id % 0xFFFF + 1
        return self.packet_id

    def make_event(self, now: float) -> None:
        self.seq += 1
        dealt = card_dealt(self.seq)
        public = Classification.PUBLIC
        digest = record_hash(self.seq, now, "card_dealt", public.value, canonical_json(dealt), self.prev_hash)
        record = Record(self.seq, now, "card_dealt", public, dealt, self.prev_hash, digest)
        self.prev_hash = digest
        self.bodies[self.seq] = encode(event_message(record, PENNSYLVANIA, prev_public=True))
        self.outstanding.add(self.seq)
        self.send(self.seq)

    def send(self, seq: int) -> None:
        link = self.link
        if link is None or link.transport is None or link.transport.is_closing():
            return  # sent again on the next connection
        pid = self._next_id()
        self.unacked[pid] = seq
        link.transport.write(publish_frame(self.events_topic, pid, self.bodies[seq]))

    def acked(self, pid: int) -> None:
        seq = self.unacked.pop(pid, None)
        if seq is not None:
            self.outstanding.discard(seq)

    def lost(self, link: _Link) -> None:
        if link is self.link:
            self.link = None

    async def connect(self) -> None:
        self.connecting = True
        loop = asyncio.get_running_loop()
        while True:
            port = self.ports[self.node % len(self.ports)]
            try:
                _, link = await loop.create_connection(lambda: _Link(self), "127.0.0.1", port)
                assert link.transport is not None
                identity = {"site": SITE, "table": self.topics.table, "game": "double-attack"}
                will = encode(death(identity, "bench", "bench", clean=False))
                link.transport.write(connect_frame(f"bench-{self.topics.table}", self.topics.status, will))
                await asyncio.wait_for(link.connected, 5)
            except (OSError, ConnectionError, TimeoutError):
                self.node += 1  # that node is gone: the next one
                await asyncio.sleep(0.2)
                continue
            self.link = link
            self.connecting = False
            # What no node acknowledged goes again, in seq order (the outbox's rule).
            self.unacked.clear()
            for seq in sorted(self.outstanding):
                self.send(seq)
            return


async def fleet(tables: list[FleetTable], rate: float, seconds: float, events: dict[str, Any]) -> None:
    """Every table ``rate`` events a second, spread evenly; a table that lost its node reconnects."""
    period = 1.0 / rate
    slices = 10
    began = time.monotonic()
    step = 0
    reconnecting: set[asyncio.Task[None]] = set()

    def reconnect(t: FleetTable) -> None:
        if t.connecting:
            return
        t.reconnects += 1
        t.node += 1
        t.connecting = True
        task = asyncio.create_task(t.connect())
        reconnecting.add(task)
        task.add_done_callback(reconnecting.discard)

    while time.monotonic() - began < seconds:
        now = time.time()
        for t in tables[step % slices :: slices]:
            if t.link is None:
                reconnect(t)
            t.make_event(now)
        step += 1
        await asyncio.sleep(max(0.0, began + step * period / slices - time.monotonic()))
    events["published_until"] = time.time()
    # Until every event is acknowledged by a node.
    deadline = time.monotonic() + 60
    while any(t.outstanding for t in tables):
        for t in tables:
            if t.link is None:
                reconnect(t)
        if time.monotonic() > deadline:
            left = {
                t.topics.table: (len(t.outstanding), t.link is not None, t.node)
                for t in tables
                if t.outstanding
            }
            raise TimeoutError(f"the fleet's events were not all acknowledged: {left}")
        await asyncio.sleep(0.1)


async def republisher(servers: list[str], tables: dict[str, FleetTable], stop: asyncio.Event) -> int:
    """Answers cmd/republish for the simulated tables (a real table answers from its journal)."""

    async def quiet(_e: Exception) -> None:
        pass  # a node killed on purpose: the client moves to another by itself

    nc = await nats.connect(
        servers=servers, max_reconnect_attempts=-1, reconnect_time_wait=0.2, error_cb=quiet
    )
    answered = 0

    async def on_request(msg: Any) -> None:
        nonlocal answered
        table = tables.get(msg.subject.split(".")[2])
        doc = json.loads(msg.data)
        if table is None:
            return
        first, last = doc["args"]["from_seq"], doc["args"]["to_seq"]
        for seq in range(first, min(last, table.seq) + 1):
            await nc.publish(f"tablectl.{SITE}.{table.topics.table}.events", table.bodies[seq])
        answered += 1

    await nc.subscribe(f"tablectl.{SITE}.*.cmd.republish", cb=on_request)
    await stop.wait()
    await nc.close()
    return answered


def start_worker(
    servers: list[str], dsn: str, name: str, log_dir: pathlib.Path, ack_wait: float, tables: list[str]
) -> subprocess.Popen[bytes]:
    log = (log_dir / f"{name}.log").open("wb")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "archive",
            "--nats",
            ",".join(servers),
            "--db",
            dsn,
            "--client-id",
            name,
            "--gap-grace",
            "1",
            "--ack-wait",
            str(ack_wait),
            *(arg for t in tables for arg in ("--table", f"{SITE}/{t}")),  # the registered tables
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def wait_stream(servers: list[str], guard_s: float = 60) -> None:
    nc = await nats.connect(servers=servers)
    try:
        js = nc.jetstream(timeout=2)
        deadline = time.monotonic() + guard_s
        while True:
            try:
                info = await js.consumer_info("TABLECTL_EVENTS", "archive")
                if info is not None:
                    return
            except Exception:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)
    finally:
        await nc.close()


def query(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return list(conn.execute(sql))


async def run(
    tables_n: int, rate: float, seconds: float, ack_wait: float, work: pathlib.Path
) -> dict[str, Any]:
    cluster = NatsCluster(work / "nats")
    pg = postgres_fixtures.make_cluster()
    workers: list[subprocess.Popen[bytes]] = []
    try:
        cluster.start()
        servers = cluster.servers
        cluster.wait_log(lambda text: "Listening for MQTT clients" in text, cluster.nodes, 60)
        names = [f"t{i:04d}" for i in range(tables_n)]
        workers = [start_worker(servers, pg.dsn, f"worker-{i}", work, ack_wait, names) for i in (1, 2)]
        await wait_stream(servers)
        ports = [n.mqtt_port for n in cluster.nodes]
        tables = [FleetTable(TableTopics(SITE, name), ports, node=i % 3) for i, name in enumerate(names)]
        for t in tables:
            await t.connect()
        stop = asyncio.Event()
        answers = asyncio.create_task(republisher(servers, {t.topics.table: t for t in tables}, stop))
        marks: dict[str, Any] = {"start": time.time()}
        load = asyncio.create_task(fleet(tables, rate, seconds, marks))
        # Kill the node most tables do not use first? No: the first node, whatever it leads.
        await asyncio.sleep(seconds * 0.3)
        victim = cluster.nodes[0]
        marks["node_killed"] = time.time()
        cluster.kill(victim)
        await asyncio.sleep(seconds * 0.3)
        marks["worker_killed"] = time.time()
        workers[0].kill()
        workers[0].wait()
        await load
        published = sum(t.seq for t in tables)
        # The drain: every event archived and no gap still asked for.
        deadline = time.monotonic() + float(os.environ.get("DRAIN_S", "180"))
        while True:
            archived = query(pg.dsn, "SELECT count(*) FROM events")[0][0]
            open_gaps = query(
                pg.dsn, "SELECT count(*) FROM gap_requests WHERE status IN ('asking', 'not_in_journal')"
            )[0][0]
            if (archived >= published and open_gaps == 0) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        marks["drained"] = time.time()
        nc = await nats.connect(servers=[n.url for n in cluster.nodes if n.proc is not None])
        try:
            js = nc.jetstream(timeout=5)
            info = await js.consumer_info("TABLECTL_EVENTS", "archive")
            stream_state = {
                "pending": info.num_pending,
                "ack_pending": info.num_ack_pending,
                "redelivered": info.num_redelivered,
            }
        finally:
            await nc.close()
        stop.set()
        answered = await answers
        distinct = query(pg.dsn, "SELECT count(DISTINCT (table_id, seq)) FROM events")[0][0]
        max_lag = query(pg.dsn, "SELECT max(extract(epoch FROM received_at) - at) FROM events")[0][0]

        def lag(a: float, b: float) -> dict[str, float]:
            """p50, p99 and max of the lag of events the tables made between a and b."""
            row = query(
                pg.dsn,
                "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l), "
                "percentile_cont(0.99) WITHIN GROUP (ORDER BY l), max(l) FROM ("
                "SELECT extract(epoch FROM received_at) - at AS l FROM events "
                f"WHERE at >= {a} AND at < {b}) x",
            )[0]
            return {k: round(float(v or 0.0), 2) for k, v in zip(("p50", "p99", "max"), row, strict=True)}

        def rate_between(a: float, b: float) -> float:
            n = query(
                pg.dsn,
                f"SELECT count(*) FROM events WHERE received_at >= to_timestamp({a}) "
                f"AND received_at < to_timestamp({b})",
            )[0][0]
            return round(n / max(b - a, 1e-9), 1)

        return {
            "tables": tables_n,
            "rate_per_table": rate,
            "seconds": seconds,
            "node_killed": victim.name,
            "worker_killed": "worker-1",
            "events_published": published,
            "events_archived": archived,
            "lost": published - distinct,
            "duplicated": archived - distinct,
            "max_lag_s": round(float(max_lag or 0.0), 2),
            "offered_rate": round(tables_n * rate, 1),
            "rate_before": rate_between(marks["start"], marks["node_killed"]),
            "rate_after_node_loss": rate_between(marks["node_killed"], marks["worker_killed"]),
            "rate_after_worker_loss": rate_between(marks["worker_killed"], marks["published_until"]),
            "lag_s_before": lag(marks["start"], marks["node_killed"]),
            "lag_s_after_node_loss": lag(marks["node_killed"], marks["worker_killed"]),
            "lag_s_after_worker_loss": lag(marks["worker_killed"], marks["published_until"]),
            "drain_s": round(marks["drained"] - marks["published_until"], 1),
            "table_reconnects": sum(t.reconnects for t in tables),
            "gap_requests": query(pg.dsn, "SELECT count(*) FROM gap_requests")[0][0],
            "republish_answered": answered,
            "chain_alarms": query(pg.dsn, "SELECT count(*) FROM chain_alarms")[0][0],
            "consumer_at_end": stream_state,
        }
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
                try:
                    w.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    w.kill()
        cluster.stop()
        postgres_fixtures.remove(pg)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=int, default=200)
    p.add_argument("--rate", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--ack-wait", type=float, default=5.0)
    p.add_argument("--keep", help="a directory for the logs, kept afterwards")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="archive-failover-") as d:
        work = pathlib.Path(args.keep or d)
        work.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(run(args.tables, args.rate, args.seconds, args.ack_wait, work))
    print(json.dumps(result))
    return 0 if result["lost"] == 0 and result["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
