"""Another account in the archive's shared subscription (mosquitto 2.0.11's ACL file does not check
subscriptions: docs/security.md). It takes every record a table publishes while it is the group's
only member and acknowledges them; the table then goes quiet. The archive, started after, holds
nothing of that table: it learns from the table's heartbeat what the broker confirmed, asks for
it, and archives all of it with no alarm."""

from __future__ import annotations

import asyncio
import pathlib
import threading

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.archive.worker import ArchiveWorker
from tests.archive.conftest import GUARD_S, Broker, fill_journal, rows, running, settings, until
from tests.archive.test_gaps import OPEN, table


class Thief:
    """A persistent session in the archive's group that takes its share and leaves."""

    def __init__(self, broker: Broker) -> None:
        self.got = 0
        self.took_all = threading.Event()
        self.subscribed = threading.Event()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id="monitor-thief", protocol=mqtt.MQTTv5
        )
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
        self.client.connect("127.0.0.1", broker.port, clean_start=False, properties=props)
        self.client.subscribe("$share/archive/tablectl/+/+/events", qos=1)
        self.client.loop_start()

    def _on_message(self, _c: mqtt.Client, _u: object, _m: mqtt.MQTTMessage) -> None:
        self.got += 1
        if self.got >= 30:
            self.took_all.set()

    def leave(self) -> None:
        """Gone, its session with it (as an archive worker's ends at its session expiry): its
        share of what comes next goes to the others. A session kept for ever would keep drawing
        its share; the archive then raises what never comes as a gap (docs/security.md)."""
        props = Properties(PacketTypes.DISCONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 0
        self.client.disconnect(properties=props)
        self.client.loop_stop()


async def test_records_a_thief_took_are_noticed_and_asked_for(
    broker: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "j.db"
    fill_journal(path, "dab-05", 30)
    thief = Thief(broker)
    assert await asyncio.to_thread(thief.subscribed.wait, GUARD_S)
    worker = ArchiveWorker(settings(broker, db, gap_grace_s=0.2, gap_ask_initial_s=0.2))
    async with table(broker, path, "dab-05", heartbeat_s=0.2):
        assert await asyncio.to_thread(thief.took_all.wait, GUARD_S), f"the thief took {thief.got}"
        thief.leave()
        async with running(worker):
            done = "SELECT count(DISTINCT seq) FROM events"
            await until(lambda: rows(db, done) == [(30,)] and rows(db, OPEN) == [(0,)], worker)
            await until(lambda: rows(db, "SELECT checked_seq FROM chain_state") == [(30,)], worker)
    assert worker.gap_requests >= 1
    assert rows(db, "SELECT count(*) FROM chain_alarms") == [(0,)]
