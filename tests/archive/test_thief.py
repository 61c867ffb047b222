"""Another account in the archive's shared subscription. mosquitto 2.0's acl_file never checks a
SUBSCRIBE: under it alone a read-only monitor joined ``$share/archive/tablectl/+/+/events``, took
its share of every table's events and acknowledged them, so the archive never had them. The
shipped broker config (config/mosquitto/: the dynamic-security plugin with the accounts
dynsec-accounts.sh writes, and the shipped ACL) refuses that SUBSCRIBE, and the archive gets every
record of the table. The broker is tests/telemetry/conftest.py's: TLS, the shipped ACL and the
accounts add-user.sh makes."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import threading
from collections.abc import AsyncIterator, Iterator

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.archive.worker import ArchiveSettings, ArchiveWorker
from controller.telemetry.publisher import TableIdentity, Telemetry
from tests import mosquitto_fixtures
from tests.archive.conftest import GUARD_S, fill_journal, rows, running, until
from tests.archive.test_gaps import OPEN
from tests.telemetry.conftest import PASSWORD, Broker

NOT_AUTHORIZED = 135  # MQTT 5 SUBACK reason code


@pytest.fixture
def shipped(tmp_path: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    pki = mosquitto_fixtures.make_pki(tmp_path_factory)
    yield from mosquitto_fixtures.serving(Broker(tmp_path / "broker", pki))


class Thief:
    """A monitor account's persistent session asking to join the archive's group."""

    def __init__(self, broker: Broker) -> None:
        self.got = 0
        self.suback: list[int] = []
        self.subscribed = threading.Event()
        s = broker.settings("monitor-ops")
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id="monitor-thief", protocol=mqtt.MQTTv5
        )
        self.client.username_pw_set(s.username, PASSWORD["monitor-ops"])
        self.client.tls_set_context(s.tls_context())
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
        self.client.connect(s.host, s.port, clean_start=False, properties=props)
        self.client.subscribe("$share/archive/tablectl/+/+/events", qos=1)
        self.client.loop_start()

    def _on_subscribe(
        self, _c: mqtt.Client, _u: object, _mid: int, codes: list[ReasonCode], _p: object
    ) -> None:
        self.suback = [int(code.value) for code in codes]
        self.subscribed.set()

    def _on_message(self, _c: mqtt.Client, _u: object, _m: mqtt.MQTTMessage) -> None:
        self.got += 1

    def leave(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@contextlib.asynccontextmanager
async def table(broker: Broker, journal: pathlib.Path) -> AsyncIterator[Telemetry]:
    """Table t1 of site-a, publishing its journal with its own account."""
    identity = TableIdentity("site-a", "t1", "double-back-jack", "c0ffee", {"tablectl": "test"})
    telemetry = Telemetry(broker.settings("site-a/t1"), identity, journal, poll_s=0.1, heartbeat_s=0.2)
    await telemetry.start()
    try:
        yield telemetry
    finally:
        await telemetry.stop()


async def test_a_monitor_is_refused_the_archive_s_group_and_the_archive_gets_every_record(
    shipped: Broker, db: str, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "j.db"
    fill_journal(path, "t1", 30)
    thief = Thief(shipped)
    try:
        assert await asyncio.to_thread(thief.subscribed.wait, GUARD_S)
        assert thief.suback == [NOT_AUTHORIZED]
        worker = ArchiveWorker(
            ArchiveSettings(
                shipped.settings("archive-main"),
                db,
                "archive",
                "archive-main-1",
                sweep_s=0.1,
                tables=(("site-a", "t1"),),
                gap_grace_s=0.2,
                gap_ask_initial_s=0.2,
            )
        )
        async with running(worker), table(shipped, path):
            done = "SELECT count(DISTINCT seq) FROM events"
            await until(lambda: rows(db, done) == [(30,)], worker)
            await until(lambda: rows(db, "SELECT checked_seq FROM chain_state") == [(30,)], worker)
        assert rows(db, OPEN) == [(0,)]
        assert rows(db, "SELECT count(*) FROM chain_alarms") == [(0,)]
        assert thief.got == 0
    finally:
        thief.leave()
