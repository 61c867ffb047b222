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
``overload`` is the offered rate over the sustained one (live runs). ``resent_unconfirmed``
counts the records the NATS tables sent again because the stream did not confirm them in time,
``gap_requests`` the gaps the archive asked the tables for (nobody answers them here: a gap that
needed an answer would show as lost), ``resent_share`` both over ``published``.
With ``--preload`` (``--nats``) the workers start only once the stream holds the whole load, so
the archive's rate is its drain's (``drain_events_per_s``, first commit to last) with no load
generator running beside it.

With ``--secure`` and no ``--nats``, mosquitto runs config/mosquitto/mosquitto.conf as shipped (TLS,
the dynamic-security accounts, the ACL, persistence, ``max_queued_messages 0``), each table
logging in as its own ``<site>/<table>`` account and each worker as ``archive-w<n>``.

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
import shutil
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


def start_shipped_broker(d: pathlib.Path, port: int, secure: Any) -> subprocess.Popen[bytes]:
    """mosquitto with config/mosquitto/mosquitto.conf as shipped (TLS, the dynamic-security
    accounts, the ACL, persistence), its accounts made as docs/mqtt.md tells an operator: a
    password file of every table, and add-user.sh for each archive worker (its ACL block)."""
    from tests.mosquitto_fixtures import SHIPPED, shipped_conf, start

    acl, passwd, dynsec = d / "acl", d / "tables.passwd", d / "dynsec.json"
    shutil.copy(SHIPPED / "acl", acl)
    tables = {n: pw for n, pw in secure.passwords.items() if "/" in n}
    passwd.write_text("".join(f"{n}:{pw}\n" for n, pw in tables.items()), encoding="utf-8")
    passwd.chmod(0o600)
    # What add-user.sh does for a table (no ACL block: the pattern lines), for all of them at once.
    subprocess.run(["mosquitto_passwd", "-U", str(passwd)], check=True)
    for name, pw in secure.passwords.items():
        if name.startswith("archive-"):
            subprocess.run(
                [str(SHIPPED / "add-user.sh"), str(passwd), str(acl), str(dynsec), "archive", name],
                check=True,
                capture_output=True,
                env={**os.environ, "TABLECTL_NEW_PASSWORD": pw},
            )
    conf = d / "mosquitto.conf"
    conf.write_text(
        shipped_conf(port=port, pki=secure.pki, dynsec_file=dynsec, acl_file=acl, data=d), encoding="utf-8"
    )
    return start(conf, ready_within_s=30)


def load_main(
    where: tuple[int, dict[str, str], str | None],
    first: int,
    count: int,
    rate: float,
    seconds: float,
    start_at: float,
    q: Any,
) -> None:
    """``where``: the broker's port, each table's password (empty: anonymous, plain TCP) and
    the CA file (TLS)."""
    import ssl

    from bench.fleet_load import open_tables, publish

    port, passwords, ca = where
    tls = None if ca is None else ssl.create_default_context(cafile=ca)

    async def run() -> tuple[int, float]:
        tables = await open_tables(port, first, count, chained=True, tls=tls, passwords=passwords or None)
        began = max(start_at, time.time())  # late when the connections took longer than planned
        await publish(tables, rate, seconds, start_at)
        return sum(t.seq for t in tables), began

    published, began = asyncio.run(run())
    # The fleet sends for ``seconds`` of wall time, whatever it managed in them.
    q.put((published, sum(os.times()[:2]), 0, began, began + seconds))


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

    async def run() -> tuple[int, int, float, float]:
        tables = [table(i) for i in range(first, first + count)]
        for t in tables:
            await t.connect()
        began = max(start_at, time.time())  # late when the connections took longer than planned
        await asyncio.sleep(max(0.0, start_at - time.time()))
        marks: dict[str, float] = {}
        await fleet(tables, rate, seconds, marks)  # returns once the stream confirmed every event
        return sum(t.seq for t in tables), sum(t.resent for t in tables), began, marks["published_until"]

    published, resent, began, made_until = asyncio.run(run())
    # The fleet makes every event, late if the machine is busy: its window ends with its last.
    q.put((published, sum(os.times()[:2]), resent, began, made_until))


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
    passwords |= {f"archive-w{i}": secrets.token_hex(12) for i in range(workers)}
    passwords["admin"] = secrets.token_hex(12)
    return Secure(pki, passwords)


def run_once(args: argparse.Namespace, workers: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    d = pathlib.Path(tempfile.mkdtemp(prefix="archive-bench-"))
    port = free_port()
    nats_cluster = None
    secure = None
    worker_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TABLECTL_NATS_", "TABLECTL_MQTT_"))
    }
    if args.nats:
        from tests.nats_fixtures import NatsCluster

        secure = shipped_accounts(d, args.tables, workers) if args.secure else None
        nats_cluster = NatsCluster(d / "nats", secure=secure)
        nats_cluster.start()
        broker_args = ["--nats", ",".join(nats_cluster.servers)]
        if secure is not None:
            broker_args += ["--ca-file", str(secure.pki / "ca.crt")]
    else:
        if args.secure:
            secure = shipped_accounts(d, args.tables, workers)
            broker = start_shipped_broker(d, port, secure)
            broker_args = ["--broker", f"mqtts://127.0.0.1:{port}", "--ca-file", str(secure.pki / "ca.crt")]
        else:
            broker = start_broker(d, port)
            broker_args = ["--broker", f"mqtt://127.0.0.1:{port}"]
    cluster = postgres_fixtures.make_cluster(durable=args.durable)
    procs: list[subprocess.Popen[bytes]] = []
    finished = False
    # The simulated tables, registered as the broker's password file would list them (the archive
    # keeps no rows of a table nobody registered).
    known = d / "tables.passwd"  # the shipped mosquitto's own password file, when it runs
    if not known.exists():
        known.write_text("".join(f"bench/t{i:04d}:-\n" for i in range(args.tables)), encoding="utf-8")
    try:
        if secure is not None and nats_cluster is not None:
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

        def login(user: str) -> dict[str, str]:
            """A worker's user and password, as its systemd unit's environment has them (NATS:
            the user is its --client-id)."""
            assert secure is not None
            if nats_cluster is not None:
                return {"TABLECTL_NATS_PASSWORD": secure.passwords[user]}
            return {"TABLECTL_MQTT_USERNAME": user, "TABLECTL_MQTT_PASSWORD": secure.passwords[user]}

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
                                f"archive-w{i}" if secure is not None else f"bench-archive-{i}",
                                "--tables-from",
                                str(known),
                            ],
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            preexec_fn=(lambda: os.nice(args.worker_nice)) if args.worker_nice else None,
                            env=worker_env if secure is None else {**worker_env, **login(f"archive-w{i}")},
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
        start_at = time.time() + 3.0 + args.tables / 100  # the tables' connections first (TLS)
        per = args.tables // args.load_procs
        target: Any = load_main if nats_cluster is None else load_main_nats
        logins = ({}, None) if secure is None else (secure.passwords, str(secure.pki / "ca.crt"))
        where: Any = (port if nats_cluster is None else nats_cluster.servers, *logins)
        loads = [
            ctx.Process(target=target, args=(where, p * per, per, args.rate, args.seconds, start_at, q))
            for p in range(args.load_procs)
        ]
        for p in loads:
            p.start()
        results = [q.get(timeout=args.seconds + 180) for _ in loads]
        published = sum(r[0] for r in results)
        load_cpu = round(sum(r[1] for r in results), 1)
        resent = sum(r[2] for r in results)
        # The publishing window as it happened (a busy machine stretches the NATS fleet's).
        window_from, window_to = min(r[3] for r in results), max(r[4] for r in results)
        window_s = window_to - window_from
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
                (window_to,),
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
        sustained = archived / busy_s if args.preload else in_window / window_s
        result = {
            "transport": "nats" if nats_cluster is not None else "mqtt",
            "shipped_accounts_tls": secure is not None,
            "durable_postgres": args.durable,
            "workers": workers,
            "tables": args.tables,
            "offered_events_per_s": round(published / window_s),
            "publishing_window_s": round(window_s, 1),
            "overload": None if args.preload else round(published / window_s / max(sustained, 1e-9), 2),
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
            "worker_nice": args.worker_nice,
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
        finished = True
        return result
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
        if finished:  # the logs, the stream's files and the keys kept only when a run failed
            shutil.rmtree(d, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--load-procs", type=int, default=2)
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=0,
        help="run the workers at this niceness: the floor's tables have CPUs of their own; here they "
        "share two cores with the archive and need the scheduler's help to outrun it",
    )
    parser.add_argument("--nats", action="store_true", help="a three-node JetStream cluster, not mosquitto")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="the shipped broker config, accounts and TLS (config/nats/node.conf with --nats, else "
        "config/mosquitto/mosquitto.conf): the tables and the workers as their own users",
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
