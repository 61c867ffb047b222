"""The archive under a floor's load: tables x rate events a second through mosquitto (or a
three-node NATS JetStream cluster, ``--nats``) into PostgreSQL, with 1 and then 2 archive workers.

    .venv/bin/python bench/archive_load.py [--tables 500] [--rate 10] [--seconds 30] [--workers 1,2]
                                           [--nats [--secure]] [--durable]

With ``--nats`` the simulated tables are bench/archive_failover.py's: each publishes through
JetStream and counts an event sent on the stream's PubAck (the shipped path); the workers are
``tablectl archive --nats`` on an open cluster (no users: the permissions cost nothing per
message). With ``--secure`` the cluster runs the shipped config/nats/node.conf (TLS on clients,
routes and MQTT) with the accounts ``tablectl archive nats-accounts`` makes, deployed as
docs/scale-out.md tells an operator: the admin makes the stream (``tablectl archive --setup``),
each table publishes as its own ``<site>/<table>/events`` user over TLS, each worker is
``--client-id archive-<n>`` with its password in ``TABLECTL_NATS_PASSWORD`` and ``--ca-file``.
With ``--durable`` PostgreSQL runs with ``fsync`` on (and ``synchronous_commit`` on, as
always). After the drain the same rows are copied by one bare ``COPY`` into a table like
``events`` (its keys and indexes) in the same database: ``copy_ceiling_rows_per_s`` is what the
database takes at best, and ``archive_share_of_ceiling`` the archive's sustained rate over it.
``load_cpu_s`` is the load generator's own CPU (its processes'), apart from the archive's.
``resent_unconfirmed`` counts the records the NATS tables sent again because the stream did not
confirm them in time, ``gap_requests`` the gaps the archive asked the tables for (nobody answers
them here: a gap that needed an answer would show as lost), ``resent_share`` the first over
``published``.
With ``--preload`` (``--nats``) the workers start only once the stream holds the whole load, so
the archive's rate is its drain's (``drain_events_per_s``, first commit to last) with no load
generator running beside it.

For each worker count: a fresh mosquitto (plain TCP on a free port, max_queued_messages 0) and a
fresh PostgreSQL cluster (initdb on a free port, fsync off as in the tests; synchronous_commit on),
``--workers`` real ``tablectl archive`` processes, and ``--load-procs`` processes of simulated
tables (bench/fleet_load.py, with real chained hashes) publishing QoS 1 events for ``--seconds``.
Printed as JSON, one object per worker count: offered and sustained rate (rows committed per
second of the publishing window), lag p50/p99 (the table's ``at`` to the inserting transaction's
start, ``received_at``), rows lost (published and acknowledged by the broker but not archived
after the drain), chain alarms (must be 0), CPU seconds per worker (utime+stime from /proc) and
the CPU a row archived of the workers, of the broker (the three NATS nodes, or mosquitto) and of
PostgreSQL (its postmaster and backends), from the workers' start to the drain's end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import psycopg

from tests import postgres_fixtures
from tests.ports import free_port


def start_broker(directory: pathlib.Path, port: int) -> subprocess.Popen[bytes]:
    from tests.mosquitto_fixtures import start

    conf = directory / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n"
        f"log_dest stderr\nlog_type notice\nlog_type information\nuser {os.environ.get('USER', 'root')}\n",
        encoding="utf-8",
    )
    return start(conf, ready_within_s=10)


def load_main(
    port: int, first: int, count: int, rate: float, seconds: float, start_at: float, q: Any
) -> None:
    from bench.fleet_load import open_tables, publish

    async def run() -> int:
        tables = await open_tables(port, first, count, chained=True)
        await publish(tables, rate, seconds, start_at)
        return sum(t.seq for t in tables)

    published = asyncio.run(run())
    q.put((published, sum(os.times()[:2]), 0))


def load_main_nats(
    where: tuple[list[str], dict[str, str], str | None],
    first: int,
    count: int,
    rate: float,
    seconds: float,
    start_at: float,
    q: Any,
) -> None:
    """``where``: the servers, each table's password (empty: an open cluster) and the CA file."""
    from bench.archive_failover import SITE, FleetTable, fleet
    from controller.archive.nats_accounts import events_user
    from controller.telemetry.nats_link import NatsSettings
    from controller.telemetry.topics import TableTopics

    servers, passwords, ca = where

    def table(i: int) -> FleetTable:
        name = f"t{i:04d}"
        password = passwords.get(f"{SITE}/{name}")
        login = (
            None
            if password is None
            else NatsSettings(tuple(servers), events_user(SITE, name), password, pathlib.Path(ca or ""))
        )
        return FleetTable(TableTopics(SITE, name), servers, login=login)

    async def run() -> tuple[int, int]:
        tables = [table(i) for i in range(first, first + count)]
        for t in tables:
            await t.connect()
        await asyncio.sleep(max(0.0, start_at - time.time()))
        await fleet(tables, rate, seconds, {})  # returns once the stream confirmed every event
        return sum(t.seq for t in tables), sum(t.resent for t in tables)

    published, resent = asyncio.run(run())
    q.put((published, sum(os.times()[:2]), resent))


def copy_ceiling(dsn: str) -> tuple[int, float]:
    """The archived rows again, by one bare COPY into a table like events (keys, indexes) in the
    same database, committed: (rows, seconds). What the database takes at best."""
    with psycopg.connect(dsn) as conn:
        buf = bytearray()
        with conn.cursor().copy("COPY (SELECT * FROM events) TO STDOUT (FORMAT binary)") as out:
            for chunk in out:
                buf += chunk
        conn.execute("CREATE TABLE events_ceiling (LIKE events INCLUDING ALL)")
        conn.commit()
        began = time.perf_counter()
        with conn.cursor().copy("COPY events_ceiling FROM STDIN (FORMAT binary)") as into:
            into.write(bytes(buf))
        conn.commit()
        took = time.perf_counter() - began
        row = conn.execute("SELECT count(*) FROM events_ceiling").fetchone()
        return (int(row[0]) if row else 0), took


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and of its live descendants (PostgreSQL's backends, say)."""
    total = 0.0
    try:
        total = cpu_seconds(pid)
        for child in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            total += tree_cpu(int(child))
    except (OSError, ValueError):
        pass  # gone meanwhile
    return total


def postmaster_pid(cluster: postgres_fixtures.Cluster) -> int:
    return int((cluster.data / "postmaster.pid").read_text().split()[0])


def count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM events").fetchone()
        return int(row[0]) if row else 0


def shipped_accounts(d: pathlib.Path, tables: int, workers: int) -> Any:
    """The floor's CA and the nodes' certificate (made as the tests make theirs) and a password
    for every table, worker (``archive-<n>``) and the admin: what ``tablectl archive
    nats-accounts`` turns into the cluster's accounts."""
    from tests.mosquitto_fixtures import make_ca, make_server_cert
    from tests.nats_fixtures import Secure

    pki = d / "pki"
    pki.mkdir()
    make_ca(pki, "ca", "/CN=tablectl bench ca")
    make_server_cert(pki)
    passwords = {f"bench/t{i:04d}": secrets.token_hex(12) for i in range(tables)}
    passwords |= {f"archive-{i}": secrets.token_hex(12) for i in range(workers)}
    passwords["admin"] = secrets.token_hex(12)
    return Secure(pki, passwords)


def run_once(args: argparse.Namespace, workers: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    d = pathlib.Path(tempfile.mkdtemp(prefix="archive-bench-"))
    port = free_port()
    nats_cluster = None
    secure = None
    worker_env = {k: v for k, v in os.environ.items() if not k.startswith("TABLECTL_NATS_")}
    if args.nats:
        from tests.nats_fixtures import NatsCluster

        secure = shipped_accounts(d, args.tables, workers) if args.secure else None
        nats_cluster = NatsCluster(d / "nats", secure=secure)
        nats_cluster.start()
        broker_args = ["--nats", ",".join(nats_cluster.servers)]
        if secure is not None:
            broker_args += ["--ca-file", str(secure.pki / "ca.crt")]
    else:
        broker = start_broker(d, port)
        broker_args = ["--broker", f"mqtt://127.0.0.1:{port}"]
    cluster = postgres_fixtures.make_cluster(durable=args.durable)
    procs: list[subprocess.Popen[bytes]] = []
    # The simulated tables, registered as the broker's password file would list them (the archive
    # keeps no rows of a table nobody registered).
    known = d / "tables.passwd"
    known.write_text("".join(f"bench/t{i:04d}:-\n" for i in range(args.tables)), encoding="utf-8")
    try:
        if secure is not None:
            # The stream and the workers' consumer, made once by the admin (the workers may not).
            admin = {"TABLECTL_NATS_USERNAME": "admin", "TABLECTL_NATS_PASSWORD": secure.passwords["admin"]}
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "controller.cli",
                    "archive",
                    *broker_args,
                    "--db",
                    cluster.dsn,
                    "--setup",
                ],
                check=True,
                env={**worker_env, **admin},
            )
        # The servers' CPU beside the workers': the NATS nodes' (or mosquitto's) and PostgreSQL's
        # (its postmaster and backends), each from the workers' start to the drain's end.
        servers: list[int] = (
            [n.proc.pid for n in nats_cluster.nodes if n.proc is not None]
            if nats_cluster is not None
            else [broker.pid]
        )

        def servers_cpu() -> list[float]:
            return [sum(tree_cpu(p) for p in servers), tree_cpu(postmaster_pid(cluster))]

        cpu_at_start: list[float] = []
        servers_at_start: list[float] = []

        def start_workers() -> None:
            for i in range(workers):
                with open(d / f"worker{i}.log", "wb") as log:
                    procs.append(
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "controller.cli",
                                "archive",
                                *broker_args,
                                "--db",
                                cluster.dsn,
                                "--client-id",
                                f"archive-{i}" if secure is not None else f"bench-archive-{i}",
                                "--tables-from",
                                str(known),
                            ],
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            env=worker_env
                            if secure is None
                            else {**worker_env, "TABLECTL_NATS_PASSWORD": secure.passwords[f"archive-{i}"]},
                        )
                    )
            # A worker is receiving once it says archive.started; its CPU is counted from then (its
            # imports and migrations apart, and none of a preloaded drain left out).
            deadline = time.monotonic() + 30
            started: list[float | None] = [None] * len(procs)
            while time.monotonic() < deadline and None in started:
                for i, p in enumerate(procs):
                    if started[i] is None and "archive.started" in (d / f"worker{i}.log").read_text(
                        errors="replace"
                    ):
                        started[i] = cpu_seconds(p.pid)
                time.sleep(0.02)
            cpu_at_start[:] = [
                cpu_seconds(p.pid) if c is None else c for c, p in zip(started, procs, strict=True)
            ]
            servers_at_start[:] = servers_cpu()
            time.sleep(2.0)  # a benchmark may wait: the subscriptions are in place well before this
            for i, p in enumerate(procs):
                if p.poll() is not None:
                    raise SystemExit(f"archive worker {i} exited: see {d}/worker{i}.log")

        if args.preload and nats_cluster is not None:
            # The stream first (made by the admin above when secure), then the whole load into it
            # with no worker running: the workers then drain a backlog, the archive's own best rate.
            from controller.archive.jetstream import JetStreamSettings, setup

            if secure is None:
                asyncio.run(setup(JetStreamSettings(nats_cluster.servers)))
        else:
            start_workers()
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        start_at = time.time() + 3.0
        per = args.tables // args.load_procs
        target: Any = load_main if nats_cluster is None else load_main_nats
        where: Any = (
            port
            if nats_cluster is None
            else (
                nats_cluster.servers,
                {} if secure is None else secure.passwords,
                None if secure is None else str(secure.pki / "ca.crt"),
            )
        )
        loads = [
            ctx.Process(target=target, args=(where, p * per, per, args.rate, args.seconds, start_at, q))
            for p in range(args.load_procs)
        ]
        for p in loads:
            p.start()
        results = [q.get(timeout=args.seconds + 180) for _ in loads]
        published = sum(n for n, _, _ in results)
        load_cpu = round(sum(c for _, c, _ in results), 1)
        resent = sum(r for _, _, r in results)
        for p in loads:
            p.join()
        if args.preload and nats_cluster is not None:
            start_workers()
        # Drain: wait until every published event is archived, or nothing has moved for 15 s.
        last, still_since = -1, time.monotonic()
        while True:
            n = count(cluster.dsn)
            if n >= published:
                break
            if n != last:
                last, still_since = n, time.monotonic()
            elif time.monotonic() - still_since > 15:
                break
            time.sleep(0.5)
        cpu = [round(cpu_seconds(p.pid) - c, 2) for p, c in zip(procs, cpu_at_start, strict=True)]
        server1 = servers_cpu()
        broker_cpu, postgres_cpu = server1[0] - servers_at_start[0], server1[1] - servers_at_start[1]
        with psycopg.connect(cluster.dsn) as conn:
            lag = conn.execute(
                "SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP"
                " (ORDER BY extract(epoch FROM received_at) - at),"
                " count(*) FILTER (WHERE extract(epoch FROM received_at) <= %s)"
                " FROM events",
                (start_at + args.seconds,),
            ).fetchone()
            alarms = conn.execute("SELECT count(*) FROM chain_alarms").fetchone()
            # received_at is the inserting transaction's start: one value per commit.
            commits = conn.execute(
                "SELECT count(DISTINCT received_at),"
                " extract(epoch FROM max(received_at) - min(received_at)) FROM events"
            ).fetchone()
            archived = count(cluster.dsn)
            distinct = conn.execute("SELECT count(DISTINCT (site, table_id, seq)) FROM events").fetchone()
            gaps = conn.execute(
                "SELECT count(*), coalesce(sum(last_seq - first_seq + 1), 0) FROM gap_requests"
            ).fetchone()
        ceiling_rows, ceiling_s = copy_ceiling(cluster.dsn)
        assert lag is not None and alarms is not None and commits is not None
        assert distinct is not None and gaps is not None
        busy_s = max(float(commits[1]), 1.0)
        in_window = int(lag[1])
        ceiling = ceiling_rows / max(ceiling_s, 1e-9)
        # Preloaded: the archive's rate is the drain's (first commit to last), not the window's.
        sustained = archived / busy_s if args.preload else in_window / args.seconds
        return {
            "transport": "nats" if nats_cluster is not None else "mqtt",
            "shipped_accounts_tls": secure is not None,
            "durable_postgres": args.durable,
            "workers": workers,
            "tables": args.tables,
            "offered_events_per_s": round(published / args.seconds),
            "published": published,
            "archived": archived,
            "rows_lost": published - int(distinct[0]),
            "rows_doubled": archived - int(distinct[0]),
            "resent_unconfirmed": resent,
            "gap_requests": int(gaps[0]),
            "records_asked_again": int(gaps[1]),
            "resent_share": round((resent + int(gaps[1])) / max(published, 1), 4),
            "sustained_events_per_s": round(sustained),
            "drain_events_per_s": round(archived / busy_s),
            "copy_ceiling_rows_per_s": round(ceiling),
            "archive_share_of_ceiling": round(sustained / ceiling, 2),
            "load_cpu_s": load_cpu,
            "lag_p50_ms": round(lag[0][0] * 1000, 1),
            "lag_p99_ms": round(lag[0][1] * 1000, 1),
            "chain_alarms": int(alarms[0]),
            "cpu_s_per_worker": cpu,
            "archiving_s": round(busy_s, 1),
            "cpu_share_per_worker": [round(c / busy_s, 2) for c in cpu],
            # CPU a row archived, by whom (the broker's and PostgreSQL's include the publishing
            # window's work in a live run, not in a preloaded one).
            "worker_cpu_us_per_row": round(sum(cpu) / max(archived, 1) * 1e6, 1),
            "broker_cpu_s": round(broker_cpu, 1),
            "broker_cpu_us_per_row": round(broker_cpu / max(archived, 1) * 1e6, 1),
            "postgres_cpu_s": round(postgres_cpu, 1),
            "postgres_cpu_us_per_row": round(postgres_cpu / max(archived, 1) * 1e6, 1),
            "commits": int(commits[0]),
            "rows_per_commit": round(archived / max(int(commits[0]), 1)),
            "seconds": args.seconds,
            "load_average_1m_before": round(load_before, 2),
        }
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        postgres_fixtures.remove(cluster)
        if nats_cluster is not None:
            nats_cluster.stop()
        else:
            broker.kill()
            broker.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--load-procs", type=int, default=2)
    parser.add_argument("--nats", action="store_true", help="a three-node JetStream cluster, not mosquitto")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="--nats: the shipped node.conf, accounts and TLS (the tables and workers as their own users)",
    )
    parser.add_argument("--durable", action="store_true", help="PostgreSQL with fsync on")
    parser.add_argument(
        "--preload",
        action="store_true",
        help="--nats: the whole load into the stream first, then the workers drain it",
    )
    args = parser.parse_args()
    for n in (int(x) for x in args.workers.split(",")):
        print(json.dumps(run_once(args, n)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
