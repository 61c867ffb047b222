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
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import nats
import nats.errors
import psycopg

from bench.fleet_load import card_dealt
from controller.gaming_day import PENNSYLVANIA
from controller.journal import GENESIS_HASH, Classification, Record, canonical_json, record_hash
from controller.telemetry.jetstream_events import (
    PUBACK_TIMEOUT_S,
    RECONNECT_AFTER_S,
    ConfirmedSender,
    msg_id,
    publish_confirmed,
)
from controller.telemetry.nats_link import NatsSettings, subject_of
from controller.telemetry.payloads import encode, event_message
from controller.telemetry.topics import TableTopics
from tests import postgres_fixtures
from tests.nats_fixtures import NatsCluster

SITE = "bench"
ROOT = pathlib.Path(__file__).resolve().parents[1]


@dataclass
class FleetTable:
    """A table with an outbox: every event kept, each sent again until the stream confirms it
    (a JetStream PubAck: stored on a quorum of the stream's replicas), as the real table's
    JetStream publisher does (controller/telemetry/jetstream_events.py, the same function)."""

    topics: TableTopics
    servers: list[str]
    seq: int = 0
    prev_hash: str = GENESIS_HASH
    bodies: dict[int, bytes] = field(default_factory=dict)
    confirmed: int = 0  # every seq up to this one is in the stream
    reconnects: int = 0
    resent: int = 0  # records sent again after the stream did not confirm them
    fresh_connections: int = 0  # connections closed and made again after 30 s with no PubAck
    # The table's own NATS user, password and CA (a cluster with the shipped accounts and TLS:
    # ``<site>/<table>/events``); None: the servers as they are, no user (an open cluster).
    login: NatsSettings | None = None
    nc: Any = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.subject = subject_of(self.topics.events)

    def make_event(self, now: float) -> None:
        self.seq += 1
        dealt = card_dealt(self.seq)
        public = Classification.PUBLIC
        digest = record_hash(self.seq, now, "card_dealt", public.value, canonical_json(dealt), self.prev_hash)
        record = Record(self.seq, now, "card_dealt", public, dealt, self.prev_hash, digest)
        self.prev_hash = digest
        self.bodies[self.seq] = encode(event_message(record, PENNSYLVANIA, prev_public=True))
        self.wake.set()

    async def connect(self) -> None:
        async def quiet(_e: Exception) -> None:
            pass  # a node killed on purpose: the client moves to another by itself

        async def moved() -> None:
            self.reconnects += 1

        if (
            self.login is not None
        ):  # as the real publisher connects (controller/telemetry/jetstream_events.py)
            self.nc = await self.login.connect(
                f"bench-{self.topics.table}", on_error=quiet, on_reconnected=moved
            )
            return
        self.nc = await nats.connect(
            servers=self.servers,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            error_cb=quiet,
            reconnected_cb=moved,
        )

    def batch(self, first: int, last: int) -> list[tuple[int, str, bytes]]:
        return [(s, msg_id(self.topics, s, self.bodies[s]), self.bodies[s]) for s in range(first, last + 1)]

    async def send(self, stop: asyncio.Event) -> None:
        """The outbox: what is not confirmed, in seq order, 256 at a time, until ``stop`` and all
        confirmed, by the real publisher's sender (backoff and probe after a shortfall)."""
        js = self.nc.jetstream(timeout=PUBACK_TIMEOUT_S)
        sender = ConfirmedSender()
        never = asyncio.Event()
        while not (stop.is_set() and self.confirmed == self.seq):
            if self.confirmed == self.seq:
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):
                        await self.wake.wait()
                continue
            last = min(self.seq, self.confirmed + 256)
            got = await sender.send(js, self.subject, self.batch(self.confirmed + 1, last), never)
            self.confirmed = max(self.confirmed, got)
            self.resent = sender.unconfirmed
            if sender.stuck_s > RECONNECT_AFTER_S:  # as the real publisher: a fresh connection
                self.fresh_connections += 1
                await self.nc.close()
                await self.connect()
                js = self.nc.jetstream(timeout=PUBACK_TIMEOUT_S)
                resent, sender = sender.unconfirmed, ConfirmedSender()
                sender.unconfirmed = resent


async def fleet(tables: list[FleetTable], rate: float, seconds: float, events: dict[str, Any]) -> None:
    """Every table ``rate`` events a second, spread evenly, ``rate * seconds`` each in all (on a
    busy machine the schedule runs late and the run takes longer, never fewer events); each
    table's outbox sends on its own."""
    period = 1.0 / rate
    slices = 10
    began = time.monotonic()
    stop = asyncio.Event()
    senders = [asyncio.create_task(t.send(stop)) for t in tables]
    for step in range(round(rate * seconds) * slices):
        now = time.time()
        for t in tables[step % slices :: slices]:
            t.make_event(now)
        await asyncio.sleep(max(0.0, began + (step + 1) * period / slices - time.monotonic()))
    events["published_until"] = time.time()
    stop.set()
    # Until the stream confirmed every event.
    try:
        async with asyncio.timeout(90):
            await asyncio.gather(*senders)
    except TimeoutError:
        left = {t.topics.table: t.seq - t.confirmed for t in tables if t.confirmed < t.seq}
        raise TimeoutError(f"the fleet's events were not all confirmed: {left}") from None


async def republisher(
    servers: list[str], tables: dict[str, FleetTable], stop: asyncio.Event, answer: bool
) -> dict[str, int]:
    """Answers cmd/republish for the simulated tables (a real table answers from its journal),
    through JetStream with the same message ids; with ``answer`` False only counts the asks."""

    async def quiet(_e: Exception) -> None:
        pass

    nc = await nats.connect(
        servers=servers, max_reconnect_attempts=-1, reconnect_time_wait=0.2, error_cb=quiet
    )
    js = nc.jetstream(timeout=PUBACK_TIMEOUT_S)
    counts = {"asks": 0, "records_resent": 0}

    async def on_request(msg: Any) -> None:
        table = tables.get(msg.subject.split(".")[2])
        if table is None:
            return
        counts["asks"] += 1
        if not answer:
            return
        doc = json.loads(msg.data)
        first, last = doc["args"]["from_seq"], min(doc["args"]["to_seq"], table.seq)
        counts["records_resent"] += max(0, last - first + 1)
        await publish_confirmed(js, table.subject, table.batch(first, last))

    await nc.subscribe(f"tablectl.{SITE}.*.cmd.republish", cb=on_request)
    await stop.wait()
    await nc.close()
    return counts


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


async def stream_leader(servers: list[str]) -> str:
    """The name of the node that leads TABLECTL_EVENTS now."""
    nc = await nats.connect(servers=servers)
    try:
        for _ in range(10):  # a loaded machine may take a while to answer
            with contextlib.suppress(nats.errors.TimeoutError):
                info = await nc.jetstream(timeout=5).stream_info("TABLECTL_EVENTS")
                assert info.cluster is not None and info.cluster.leader is not None
                return info.cluster.leader
        raise TimeoutError("no answer to STREAM.INFO TABLECTL_EVENTS")
    finally:
        await nc.close()


async def run(
    tables_n: int,
    rate: float,
    seconds: float,
    ack_wait: float,
    work: pathlib.Path,
    *,
    kill_leader: bool = False,
    republish: bool = True,
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
        tables = [FleetTable(TableTopics(SITE, name), servers) for name in names]
        for t in tables:
            await t.connect()
        stop = asyncio.Event()
        by_name = {t.topics.table: t for t in tables}
        answers = asyncio.create_task(republisher(servers, by_name, stop, republish))
        marks: dict[str, Any] = {"start": time.time()}
        load = asyncio.create_task(fleet(tables, rate, seconds, marks))
        await asyncio.sleep(seconds * 0.3)
        # The first node, whatever it leads; or (kill_leader) the one that leads the stream, whose
        # loss costs an election during which no publish is confirmed.
        leader = await stream_leader(servers)
        victim = next(n for n in cluster.nodes if n.name == leader) if kill_leader else cluster.nodes[0]
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
        asked = await answers
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
            "node_killed_led_stream": victim.name == leader,
            "republish_answered": republish,
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
            "table_fresh_connections": sum(t.fresh_connections for t in tables),
            "gap_requests": query(pg.dsn, "SELECT count(*) FROM gap_requests")[0][0],
            "open_gaps": open_gaps,
            "republish_asks": asked["asks"],
            # Records sent again: asked for by the archive, and unconfirmed by the stream.
            "records_resent_on_request": asked["records_resent"],
            "records_resent_unconfirmed": sum(t.resent for t in tables),
            "resent_share": round(
                (asked["records_resent"] + sum(t.resent for t in tables)) / max(published, 1), 4
            ),
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
    p.add_argument(
        "--kill-leader",
        action="store_true",
        default=os.environ.get("KILL_LEADER") == "1",
        help="kill the node that leads the stream (or KILL_LEADER=1)",
    )
    p.add_argument(
        "--no-republish",
        action="store_true",
        default=os.environ.get("NO_REPUBLISH") == "1",
        help="the tables do not answer republish requests (or NO_REPUBLISH=1): every record must "
        "arrive by the outbox alone",
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="archive-failover-") as d:
        work = pathlib.Path(args.keep or d)
        work.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(
            run(
                args.tables,
                args.rate,
                args.seconds,
                args.ack_wait,
                work,
                kill_leader=args.kill_leader,
                republish=not args.no_republish,
            )
        )
    print(json.dumps(result))
    return 0 if result["lost"] == 0 and result["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
