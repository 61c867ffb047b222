"""A real table's events through JetStream (controller/telemetry/jetstream_events.py): the outbox
counts a record sent only when the replicated stream confirmed it, so the loss of the node that
leads the stream costs time, never a record, and nobody has to ask for one again."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from typing import Any

import nats
import nats.errors
import pytest
from nats.js.errors import BadRequestError

from controller.archive.jetstream import JetStreamSettings, ensure_stream, make_stream_once
from controller.journal import Journal
from controller.telemetry.broker import BrokerSettings
from controller.telemetry.jetstream_events import JetStreamEvents, msg_id
from controller.telemetry.nats_link import NatsSettings, subject_of
from controller.telemetry.publisher import TableIdentity, Telemetry
from controller.telemetry.topics import TableTopics
from tests.archive.conftest import GUARD_S, SITE, fill_journal, journal_messages
from tests.nats_fixtures import NatsCluster, nats_binary

N = 600


async def stream_messages(js: Any, sub: Any, distinct: int) -> list[bytes]:
    """The stream's messages through ``sub`` (a pull consumer, as the archive's; a work-queue
    stream allows no other kind) until ``distinct`` different ones came, and then every one the
    stream holds. An answer lost to the election is asked again."""
    out: list[bytes] = []
    async with asyncio.timeout(GUARD_S):
        while True:
            with contextlib.suppress(TimeoutError, nats.errors.Error):  # the killed node's answer
                out += [m.data for m in await sub.fetch(100, timeout=1)]
            if len(set(out)) >= distinct:
                with contextlib.suppress(TimeoutError, nats.errors.Error):
                    if len(out) >= (await js.stream_info("TABLECTL_EVENTS")).state.messages:
                        return out


async def test_the_stream_leader_killed_mid_publish_every_record_is_stored_once(
    tmp_path: pathlib.Path,
) -> None:
    nats_binary()
    cluster = NatsCluster(tmp_path / "nats")
    cluster.start()
    try:
        cluster.wait_log(lambda text: "Listening for MQTT clients" in text, cluster.nodes, GUARD_S)
        admin = await nats.connect(servers=cluster.servers)
        js = admin.jetstream(timeout=10)
        await ensure_stream(js, JetStreamSettings(cluster.servers))
        leader = (await js.stream_info("TABLECTL_EVENTS")).cluster.leader  # type: ignore[union-attr]
        victim = next(n for n in cluster.nodes if n.name == leader)
        mqtt_node = next(n for n in cluster.nodes if n is not victim)
        path = tmp_path / "j.db"
        fill_journal(path, "dab-01", N)
        seen = 0
        halfway = asyncio.Event()

        async def on_publish(_msg: Any) -> None:  # core NATS sees each publish as it goes by
            nonlocal seen
            seen += 1
            if seen >= N // 4:
                halfway.set()

        await admin.subscribe(subject_of(TableTopics(SITE, "dab-01").events), cb=on_publish)
        check = await js.pull_subscribe(subject_of(TableTopics(SITE, "dab-01").events), durable="check")
        identity = TableIdentity(SITE, "dab-01", "double-back-jack", "c0ffee", {"tablectl": "test"})
        topics = TableTopics(SITE, "dab-01")
        events = JetStreamEvents(NatsSettings(tuple(cluster.servers)), topics, "table-dab-01")
        table = Telemetry(
            BrokerSettings("127.0.0.1", mqtt_node.mqtt_port, keepalive=5),
            identity,
            path,
            batch=20,
            drain_on_stop_s=GUARD_S,  # stop() returns once the outbox has every PubAck
            events_stream=events,
        )
        await table.start()
        try:
            async with asyncio.timeout(GUARD_S * 2):
                await halfway.wait()
                cluster.kill(victim)  # the stream's leader, in the middle of the table's publishing
                stored = await stream_messages(js, check, N)
        finally:
            await table.stop(timeout_s=GUARD_S)
        await admin.close()
        with Journal.open(path, create=False) as journal:
            assert journal.published_seq() == N  # moved only by PubAcks
    finally:
        cluster.stop()
    expected = await journal_messages(path)
    assert sorted(stored) == sorted(expected), "every record once, nothing else"
    assert len({msg_id(topics, i + 1, b) for i, b in enumerate(expected)}) == N


async def test_the_stream_is_made_once_a_new_clusters_peers_have_joined(tmp_path: pathlib.Path) -> None:
    """Two of the three nodes up: the metadata leader is elected, but a stream of three replicas
    has no peers to be placed on ("no suitable peers for placement") until the third joins. The
    setup and the workers wait for it (a fresh cluster on a loaded machine failed its first
    stream this way) rather than fail."""
    nats_binary()
    cluster = NatsCluster(tmp_path / "nats")
    cluster.dir.mkdir(parents=True)
    first, second, third = cluster.nodes
    try:
        for node in (first, second):
            cluster.start_node(node)
        cluster.wait_log(lambda text: "metadata leader" in text, [first, second], GUARD_S, any_node=True)
        admin = await nats.connect(servers=[first.url, second.url])
        try:
            js = admin.jetstream(timeout=10)
            # What a worker met: the creation refused while the third node is away ...
            with pytest.raises(BadRequestError, match="no suitable peers"):
                await make_stream_once(js, JetStreamSettings(cluster.servers))
            made = asyncio.create_task(ensure_stream(js, JetStreamSettings(cluster.servers)))
            cluster.start_node(third)
            await asyncio.wait_for(made, GUARD_S)  # ... and made once it has joined
            info = await js.stream_info("TABLECTL_EVENTS")
            assert info.config.num_replicas == 3
        finally:
            await admin.close()
    finally:
        cluster.stop()
