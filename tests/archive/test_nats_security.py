"""The NATS cluster's accounts, permissions and TLS (config/nats/node.conf as shipped, the accounts
`tablectl archive nats-accounts` makes, certificates made here): each attack on the floor's record
is refused by the cluster, and what an admin may still do (delete the stream) is an alarm within
a loop of the workers, with no record lost. Every test here passed as an attack on the open
cluster the archive ran on before."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiomqtt
import nats
import nats.errors
import pytest

from controller.archive.jetstream import JetStreamSettings, JetStreamWorker, setup
from controller.archive.nats_accounts import events_user
from controller.telemetry.jetstream_events import JetStreamEvents
from controller.telemetry.nats_link import NatsSettings, inbox_prefix, subject_of
from controller.telemetry.topics import TableTopics
from tests.archive.conftest import GUARD_S, SITE, fill_journal, journal_messages, rows, until
from tests.mosquitto_fixtures import make_pki
from tests.nats_fixtures import NatsCluster, Secure, nats_binary

PASSWORDS = {
    f"{SITE}/dab-01": "pw-table-1",
    f"{SITE}/dab-02": "pw-table-2",
    "archive-1": "pw-archive",
    "admin": "pw-admin",
    "floor-console": "pw-floor",
}
TABLES = ((SITE, "dab-01"), (SITE, "dab-02"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    nats_binary()
    pki = make_pki(tmp_path_factory)
    c = NatsCluster(tmp_path_factory.mktemp("nats"), secure=Secure(pki, PASSWORDS))
    c.start()
    try:
        c.wait_log(lambda text: "Listening for MQTT clients" in text, c.nodes, GUARD_S)
        yield c
    finally:
        c.stop()


def as_user(cluster: NatsCluster, user: str | None, password: str | None = None) -> NatsSettings:
    assert cluster.secure is not None
    pw = password if password is not None else (PASSWORDS.get(user.removesuffix("/events")) if user else None)
    return NatsSettings(tuple(cluster.servers), user, pw, cluster.secure.pki / "ca.crt")


class Errors:
    """What the server told a client asynchronously (a permissions violation is not a reply)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.new = asyncio.Event()

    async def record(self, e: Exception) -> None:
        self.seen.append(str(e).lower())
        self.new.set()

    async def wait_for(self, text: str) -> None:
        async with asyncio.timeout(GUARD_S):
            while not any(text in s for s in self.seen):
                self.new.clear()
                await self.new.wait()


@contextlib.asynccontextmanager
async def client(settings: NatsSettings, errors: Errors | None = None) -> AsyncIterator[Any]:
    # No reconnecting: a refused login is the answer here, not something to try again for ever.
    nc = await nats.connect(
        servers=list(settings.servers),
        user=settings.username,
        password=settings.password,
        tls=settings.tls_context(),
        inbox_prefix=inbox_prefix(settings.username).encode(),
        allow_reconnect=False,
        max_reconnect_attempts=0,
        connect_timeout=20,
        error_cb=(errors or Errors()).record,
    )
    try:
        yield nc
    finally:
        await nc.close()


async def make_stream(cluster: NatsCluster) -> None:
    await setup(JetStreamSettings(cluster.servers, nats=as_user(cluster, "admin")))


def mqtt_tls(cluster: NatsCluster) -> ssl.SSLContext:
    assert cluster.secure is not None
    return ssl.create_default_context(cafile=str(cluster.secure.pki / "ca.crt"))


async def let_in(settings: NatsSettings) -> bool:
    """Whether the cluster lets this client in: connected, and a round trip answered. (nats-py may
    take the server closing a refused TLS connection for a finished handshake; the round trip
    then fails.)"""
    try:
        async with client(settings) as nc:
            await nc.flush(timeout=GUARD_S)  # a refused one fails at once: the connection is closed
            return True
    except (nats.errors.Error, OSError, TimeoutError):
        return False


async def test_nobody_gets_in_without_a_user_and_tls(cluster: NatsCluster) -> None:
    assert await let_in(as_user(cluster, "archive-1"))
    assert not await let_in(as_user(cluster, None))
    assert not await let_in(as_user(cluster, "archive-1", "wrong"))
    # The server asks for TLS first; a plaintext client cannot answer.
    assert not await let_in(
        NatsSettings(tuple(s.replace("tls://", "nats://") for s in cluster.servers), "admin", "pw-admin")
    )
    node = cluster.nodes[0]
    with pytest.raises(aiomqtt.MqttError):
        async with aiomqtt.Client(
            "127.0.0.1", node.mqtt_port, identifier="anon", tls_context=mqtt_tls(cluster)
        ):
            pass
    # The tables' MQTT users and the floor's are MQTT only: over NATS they would see every MQTT
    # client's deliveries ($MQTT.sub.>).
    for user in (f"{SITE}/dab-01", "floor-console"):
        assert not await let_in(as_user(cluster, user))


async def test_a_table_publishes_only_its_own_events(cluster: NatsCluster) -> None:
    await make_stream(cluster)
    forged_subject = subject_of(TableTopics(SITE, "dab-02").events)
    errors = Errors()
    async with client(as_user(cluster, events_user(SITE, "dab-01")), errors) as nc:
        js = nc.jetstream(timeout=2)
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await js.publish(forged_subject, b'{"seq": 1}', headers={"Nats-Msg-Id": "forged"})
        await errors.wait_for("permissions violation for publish")
        ack = await js.publish(
            subject_of(TableTopics(SITE, "dab-01").events), b"{}", headers={"Nats-Msg-Id": "own-1"}
        )
        assert ack.stream == "TABLECTL_EVENTS"
    # Over MQTT too: the forged publish is dropped, the table's own goes in (in that order, on one
    # connection), so once the own one is in the stream the forged one is known not to be.
    async with aiomqtt.Client(
        "127.0.0.1",
        cluster.nodes[1].mqtt_port,
        identifier="dab-01",
        username=f"{SITE}/dab-01",
        password=PASSWORDS[f"{SITE}/dab-01"],
        tls_context=mqtt_tls(cluster),
    ) as m:
        await m.publish(TableTopics(SITE, "dab-02").events, b"forged", qos=1)
        await m.publish(TableTopics(SITE, "dab-01").events, b"own-2", qos=1)
    async with client(as_user(cluster, "admin")) as nc:
        js = nc.jetstream(timeout=5)
        sub = await js.pull_subscribe_bind("archive", "TABLECTL_EVENTS")  # the admin may read too
        got: list[bytes] = []
        async with asyncio.timeout(GUARD_S):
            while len(got) < 2:
                with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
                    got += [m.data for m in await sub.fetch(2, timeout=1)]
        assert sorted(got) == [b"own-2", b"{}"]
        info = await js.stream_info("TABLECTL_EVENTS", subjects_filter=">")
        assert info.state.subjects == {subject_of(TableTopics(SITE, "dab-01").events): 2}
        await js.purge_stream("TABLECTL_EVENTS")


async def test_only_the_archive_reads_the_stream_and_only_an_admin_changes_it(cluster: NatsCluster) -> None:
    await make_stream(cluster)
    errors = Errors()
    async with client(as_user(cluster, events_user(SITE, "dab-01")), errors) as nc:
        await nc.subscribe("tablectl.*.*.events")
        await nc.subscribe(inbox_prefix("archive-1") + ".>")  # the replies the archive asked for
        await nc.flush()
        await errors.wait_for('permissions violation for subscription to "tablectl.*.*.events"')
        await errors.wait_for(
            f'permissions violation for subscription to "{inbox_prefix("archive-1").lower()}.>"'
        )
        js = nc.jetstream(timeout=2)
        for attempt in (
            js.consumer_info("TABLECTL_EVENTS", "archive"),
            js.delete_stream("TABLECTL_EVENTS"),
            js.delete_consumer("TABLECTL_EVENTS", "archive"),
        ):
            with pytest.raises(nats.errors.TimeoutError):
                await attempt
    async with client(as_user(cluster, "archive-1"), errors) as nc:
        js = nc.jetstream(timeout=2)
        for attempt in (js.delete_stream("TABLECTL_EVENTS"), js.purge_stream("TABLECTL_EVENTS")):
            with pytest.raises(nats.errors.TimeoutError):
                await attempt
        await errors.wait_for('permissions violation for publish to "$js.api.stream.delete.tablectl_events"')
        assert (await js.consumer_info("TABLECTL_EVENTS", "archive")).name == "archive"  # its own: allowed


async def test_a_republish_result_from_anyone_but_the_table_is_refused(
    cluster: NatsCluster, db: str, tmp_path: pathlib.Path
) -> None:
    """Records 11-14 of dab-02 are missing; dab-01 says in dab-02's name that they are not in its
    journal. The cluster drops that, the gap stays asked for, and dab-02's own records fill it."""
    await make_stream(cluster)
    path = tmp_path / "j.db"
    fill_journal(path, "dab-02", 20)
    bodies = await journal_messages(path)
    settings = JetStreamSettings(
        cluster.servers,
        db,
        "archive-1",
        sweep_s=0.1,
        gap_grace_s=0.2,
        gap_ask_initial_s=0.2,
        tables=TABLES,
        nats=as_user(cluster, "archive-1"),
    )
    worker = JetStreamWorker(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    dab02 = JetStreamEvents(
        as_user(cluster, events_user(SITE, "dab-02")), TableTopics(SITE, "dab-02"), "dab-02"
    )
    never = asyncio.Event()
    try:
        async with asyncio.timeout(GUARD_S):
            await worker.ready.wait()
        numbered = list(enumerate(bodies, start=1))
        assert await dab02.publish(numbered[:10], never) == 10
        assert await dab02.publish(numbered[14:], never) == 20
        asking = "SELECT count(*) FROM gap_requests WHERE status = 'asking' AND asks > 0"
        await until(lambda: rows(db, asking) == [(1,)], worker)  # type: ignore[arg-type]
        forged = {"ok": False, "error": "not in journal", "missing_from": 11, "missing_to": 14}
        async with aiomqtt.Client(
            "127.0.0.1",
            cluster.nodes[0].mqtt_port,
            identifier="dab-01",
            username=f"{SITE}/dab-01",
            password=PASSWORDS[f"{SITE}/dab-01"],
            tls_context=mqtt_tls(cluster),
        ) as m:
            await m.publish(
                TableTopics(SITE, "dab-02").command_result("republish"), json.dumps(forged), qos=1
            )
        node = cluster.nodes[0]
        cluster.wait_log(
            lambda text: f'Subject "tablectl.{SITE}.dab-02.cmd.republish.result"' in text, [node], GUARD_S
        )
        assert rows(db, "SELECT status FROM gap_requests") == [("asking",)]
        assert await dab02.publish(numbered[10:14], never) == 14  # the table's own answer
        filled = "SELECT count(*) FROM gap_requests WHERE status = 'filled'"
        await until(lambda: rows(db, filled) == [(1,)], worker)  # type: ignore[arg-type]
    finally:
        await dab02.close()
        stop.set()
        await task
    assert rows(db, "SELECT count(*) FROM events") == [(20,)]
    assert rows(db, "SELECT count(*) FROM chain_alarms") == [(0,)]
    async with client(as_user(cluster, "admin")) as nc:
        await nc.jetstream(timeout=5).purge_stream("TABLECTL_EVENTS")


async def test_a_deleted_stream_is_an_alarm_within_a_loop_and_loses_nothing(
    cluster: NatsCluster, db: str, tmp_path: pathlib.Path
) -> None:
    """An admin's mistake (or a stolen admin password): the stream is deleted under running
    workers. The worker raises stream_missing at its next loop; the table's publishes get no
    PubAck and stay in its outbox; once the stream is made again every record is archived."""
    await make_stream(cluster)
    path = tmp_path / "j.db"
    fill_journal(path, "dab-01", 30)
    numbered = list(enumerate(await journal_messages(path), start=1))
    settings = JetStreamSettings(
        cluster.servers, db, "archive-1", sweep_s=0.1, tables=TABLES, nats=as_user(cluster, "archive-1")
    )
    worker = JetStreamWorker(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    table = JetStreamEvents(
        as_user(cluster, events_user(SITE, "dab-01")), TableTopics(SITE, "dab-01"), "dab-01"
    )
    never = asyncio.Event()
    try:
        async with asyncio.timeout(GUARD_S):
            await worker.ready.wait()
        assert await table.publish(numbered[:10], never) == 10
        await until(lambda: rows(db, "SELECT count(*) FROM events") == [(10,)], worker)  # type: ignore[arg-type]
        async with client(as_user(cluster, "admin")) as nc:
            await nc.jetstream(timeout=5).delete_stream("TABLECTL_EVENTS")
        await until(lambda: worker.stream_problem is not None, worker)  # type: ignore[arg-type]
        assert "does not exist" in (worker.stream_problem or "")
        assert worker.health() == (False, worker.stream_problem)  # /healthz says it too
        assert await table.publish(numbered[10:], never) == 0  # not stored: kept by the table
        await make_stream(cluster)
        confirmed = 10
        async with asyncio.timeout(GUARD_S):
            while confirmed < 30:  # the outbox's loop: a probe of one record, then the rest
                confirmed = max(confirmed, await table.publish(numbered[confirmed:], never))
        await until(lambda: rows(db, "SELECT count(*) FROM events") == [(30,)], worker)  # type: ignore[arg-type]
        await until(lambda: worker.stream_problem is None, worker)  # type: ignore[arg-type]
    finally:
        await table.close()
        stop.set()
        await task
    async with client(as_user(cluster, "admin")) as nc:
        await nc.jetstream(timeout=5).purge_stream("TABLECTL_EVENTS")
