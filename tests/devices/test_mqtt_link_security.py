"""An MQTT device behind TLS, a password and the shipped ACL, against a real mosquitto (the
``broker`` fixture of tests/devices/conftest.py).

The broker gets a CA and server certificate made with the openssl CLI, a password file made with
mosquitto_passwd and a copy of config/mosquitto/acl with the device blocks its comments describe.
The device's side is a small aiomqtt client in this file (publishes on ``<topic>/out``, answers
``RQ`` on ``<topic>/in``), so that these tests pin the appliance's link alone;
test_sim_mqtt_security.py puts the simulator's MqttSink on the other end.
Nothing sleeps to synchronise: the broker is ready when its log says so, the link's backoff runs
on a virtual clock, and waits for messages sit under ``asyncio.timeout`` guards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import re
import shutil
import tomllib
from collections.abc import AsyncIterator
from typing import Any

import aiomqtt
import pytest
from structlog.testing import capture_logs

from controller.errors import ConfigError
from devices.commands import RequestStubCount
from devices.config import DeviceConfig
from devices.config_file import load_devices
from devices.drivers.factory import build_driver
from devices.drivers.stub import StubCounterDriver
from devices.errors import LinkDown
from devices.events import DeviceOffline, StubCounted
from devices.framing import Frame, LineDecoder, encode_frame
from devices.profiles import load_profile
from devices.transport.links import ByteLink
from devices.transport.modbus import BusRegistry
from sim.clock import VirtualClock
from tests.devices.conftest import (
    APPLIANCE,
    GUARD_S,
    PASSWORDS,
    ROOT,
    STUB_PROFILE,
    TOPIC,
    WRONG_PASSWORD,
    SecureBroker,
    device_acl_block,
    poll_until,
)

PROFILE = load_profile(STUB_PROFILE)
ENV = "TABLECTL_TEST_DEVICE_PASSWORD"


class FakeDevice:
    """The device's end: publishes frames on ``<topic>/out``; an ``RQ`` on ``<topic>/in`` makes it
    publish whatever the test queued in ``answer``, in order, then a heartbeat as an end marker."""

    def __init__(self, broker: SecureBroker, user: str = "device-site-a-t1-stub", topic: str = TOPIC) -> None:
        self.broker, self.user, self.topic = broker, user, topic
        self.answer: list[bytes] = []
        self.requests = 0
        self._client: aiomqtt.Client | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        client = self.broker.client(self.user)
        await client.__aenter__()
        await client.subscribe(f"{self.topic}/in", qos=1)
        self._client = client
        self._task = asyncio.create_task(self._pump(client))

    async def _pump(self, client: aiomqtt.Client) -> None:
        decoder = LineDecoder(PROFILE)
        with contextlib.suppress(aiomqtt.MqttError):
            async for msg in client.messages:
                assert isinstance(msg.payload, bytes)
                for item in decoder.feed(msg.payload):
                    if isinstance(item, Frame) and item.name == "request":
                        self.requests += 1
                        frames, self.answer = self.answer, []
                        await self.publish(*frames, heartbeat())

    async def publish(self, *frames: bytes) -> None:
        for f in frames:
            await self.publish_to(f"{self.topic}/out", f)

    async def publish_to(self, topic: str, payload: bytes) -> None:
        assert self._client is not None
        await self._client.publish(topic, payload, qos=1)

    async def stop(self) -> None:
        await _disconnect(self._client, self._task)
        self._client = self._task = None


async def _disconnect(client: aiomqtt.Client | None, pump: asyncio.Task[None] | None) -> None:
    """Disconnect first, which ends the pump's message loop, then cancel it as well: on Python 3.11 a
    bare cancel is lost when it lands as one of aiomqtt's wait_for calls completes."""
    if client is not None:
        with contextlib.suppress(aiomqtt.MqttError):
            await client.__aexit__(None, None, None)
    if pump is not None:
        pump.cancel()
        async with asyncio.timeout(GUARD_S):
            with contextlib.suppress(asyncio.CancelledError):
                await pump


@contextlib.asynccontextmanager
async def fake_device(broker: SecureBroker, **kw: Any) -> AsyncIterator[FakeDevice]:
    dev = FakeDevice(broker, **kw)
    await dev.start()
    try:
        yield dev
    finally:
        await dev.stop()


def count(seq: int) -> bytes:
    return encode_frame(PROFILE, "count", {"seq": seq, "count": 53, "verified": 1})


def heartbeat() -> bytes:
    return encode_frame(PROFILE, "heartbeat", {"health": 0})


def mqtt_config(
    base_dir: pathlib.Path, env_password: str | None = PASSWORDS[APPLIANCE], **section: Any
) -> DeviceConfig:
    """A stub counter on MQTT with TLS and the appliance's account; paths relative to ``base_dir``.

    ``env_password`` is what the environment holds (None: not set); a None in ``section`` drops
    that key from the defaults below.
    """
    entry: dict[str, Any] = {
        "kind": "stub_counter",
        "profile": str(STUB_PROFILE),
        "transport": "mqtt",
        "host": "127.0.0.1",
        "topic": TOPIC,
        "tls": True,
        "ca_file": "ca.crt",
        "username": APPLIANCE,
        "password_env": ENV,
        "expected": 53,
        "heartbeat_timeout_s": 2.0,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.05,
    }
    entry.update(section)
    entry = {k: v for k, v in entry.items() if v is not None}
    environ = {} if env_password is None else {ENV: env_password}
    return load_devices({"stub": entry}, base_dir, source="test.toml", environ=environ)[0]


def link_of(driver: object) -> ByteLink:
    assert isinstance(driver, StubCounterDriver)
    return driver.link


async def read_until_heartbeat(link: ByteLink) -> list[bytes]:
    """Every payload up to the device's end marker (the heartbeat it sends after its answer)."""
    got: list[bytes] = []
    async with asyncio.timeout(GUARD_S):
        while (payload := await link.read(GUARD_S)) != heartbeat():
            got.append(payload)
    return got


# -- config -----------------------------------------------------------------------------------------


def test_the_section_gives_tls_ca_account_and_keeps_the_password_out_of_repr(pki: pathlib.Path) -> None:
    cfg = mqtt_config(pki)
    assert cfg.mqtt.tls and cfg.mqtt.ca_file == (pki / "ca.crt").resolve()
    assert (cfg.mqtt.username, cfg.mqtt.password_env, cfg.mqtt.password) == (
        APPLIANCE,
        ENV,
        PASSWORDS[APPLIANCE],
    )
    assert PASSWORDS[APPLIANCE] not in repr(cfg) and PASSWORDS[APPLIANCE] not in str(cfg.mqtt)
    plain = mqtt_config(pki, env_password=None, tls=False, ca_file=None, username=None, password_env=None)
    assert not plain.mqtt.tls and plain.mqtt.password is None


def _refusal(base: pathlib.Path, env_password: str | None = PASSWORDS[APPLIANCE], **section: Any) -> str:
    with pytest.raises(ConfigError) as err:
        mqtt_config(base, env_password, **section)
    text = str(err.value)
    assert "\n" not in text and text.startswith("test.toml: devices.stub.")
    return text


def test_a_literal_password_is_refused_without_echoing_it(pki: pathlib.Path) -> None:
    text = _refusal(pki, password="Literal-pw-55")
    assert "devices.stub.password:" in text and "use password_env" in text
    assert "Literal-pw-55" not in text


def test_a_missing_password_variable_is_refused_naming_it(pki: pathlib.Path) -> None:
    text = _refusal(pki, env_password=None)
    assert text.endswith(f"devices.stub.password_env: environment variable {ENV} is not set")
    empty = _refusal(pki, env_password="")
    assert empty.endswith(f"devices.stub.password_env: environment variable {ENV} is empty")


@pytest.mark.parametrize(
    ("section", "key", "rule"),
    [
        ({"tls": "yes"}, "tls", "must be true or false"),
        ({"tls": False}, "ca_file", "needs tls = true"),
        ({"ca_file": "nope.crt"}, "ca_file", "nope.crt: no such file"),
        ({"ca_file": "not-a-cert.crt"}, "ca_file", "not-a-cert.crt: not a usable CA certificate"),
        ({"ca_file": ""}, "ca_file", "must be the path of a CA certificate"),
        ({"username": ""}, "username", "must be a non-empty string"),
        ({"password_env": "pw-Hunter2"}, "password_env", "must name an environment variable"),
    ],
)
def test_bad_security_keys_are_refused_in_one_line(
    pki: pathlib.Path, section: dict[str, Any], key: str, rule: str
) -> None:
    text = _refusal(pki, **section)
    assert f"devices.stub.{key}: {rule}" in text
    assert "Hunter2" not in text


def test_a_password_needs_a_username(pki: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match=r"devices\.stub\.password_env: needs a username"):
        load_devices(
            {
                "stub": {
                    "kind": "stub_counter",
                    "profile": str(STUB_PROFILE),
                    "transport": "mqtt",
                    "password_env": ENV,
                }
            },
            pki,
            source="test.toml",
            environ={ENV: "x"},
        )


@pytest.mark.parametrize("key", ["tls", "ca_file", "username", "password_env"])
def test_security_keys_belong_to_mqtt_only(pki: pathlib.Path, key: str) -> None:
    with pytest.raises(ConfigError, match=rf'devices\.stub\.{key}: only for transport = "mqtt"'):
        load_devices(
            {
                "stub": {
                    "kind": "stub_counter",
                    "profile": str(STUB_PROFILE),
                    "transport": "serial-line",
                    key: True if key == "tls" else "X",
                }
            },
            pki,
            source="test.toml",
            environ={},
        )


def test_the_documented_production_example_loads(pki: pathlib.Path, tmp_path: pathlib.Path) -> None:
    page = (ROOT / "docs" / "devices" / "README.md").read_text(encoding="utf-8")
    section = page[page.index("## MQTT devices") :]
    example = section[section.index("```toml\n") + 8 : section.index("```\n", section.index("```toml"))]
    (tmp_path / "tables").mkdir()
    (tmp_path / "devices").mkdir()
    (tmp_path / "mosquitto").mkdir()
    shutil.copy(STUB_PROFILE, tmp_path / "devices" / STUB_PROFILE.name)
    shutil.copy(pki / "ca.crt", tmp_path / "mosquitto" / "ca.crt")
    devices = tomllib.loads(example)["devices"]
    [cfg] = load_devices(devices, tmp_path / "tables", environ={"TABLECTL_MQTT_PASSWORD": "from-env"})
    assert cfg.mqtt.tls and cfg.mqtt.ca_file == (tmp_path / "mosquitto" / "ca.crt").resolve()
    assert cfg.mqtt.password == "from-env"
    # The example's topic and account are the ones the ACL's own example block and patterns grant.
    assert f"{cfg.endpoint.topic}/out" in device_acl_block("example-floor/djw-01/stub")
    assert cfg.endpoint.topic == f"tabledev/{cfg.mqtt.username}/{cfg.name}"


def test_a_password_without_tls_is_logged_but_not_shown(pki: pathlib.Path, clock: VirtualClock) -> None:
    cfg = mqtt_config(pki, tls=False, ca_file=None)
    with capture_logs() as logs:
        build_driver(cfg, buses=BusRegistry(clock), clock=clock)
    assert [e["event"] for e in logs] == ["mqtt_password_without_tls"]
    assert PASSWORDS[APPLIANCE] not in repr(logs)


# -- the link against mosquitto ---------------------------------------------------------------------


async def test_tls_and_the_right_password_exchange_frames_with_the_device(
    broker: SecureBroker, pki: pathlib.Path, clock: VirtualClock
) -> None:
    d = build_driver(mqtt_config(pki, port=broker.port), buses=BusRegistry(clock), clock=clock)
    try:
        async with fake_device(broker) as device:
            device.answer = [count(7)]
            await d.send(RequestStubCount())  # connects, subscribes, then asks: no frame can be missed
            got, _ = await poll_until(d, StubCounted)
            assert (got.count, got.ok, got.sequence) == (53, True, 7)
            assert device.requests == 1
    finally:
        await d.close()


async def test_a_wrong_password_is_a_one_line_link_down_that_never_shows_the_password(
    broker: SecureBroker, pki: pathlib.Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="mqtt")  # aiomqtt turns paho's logger down to WARNING
    cfg = mqtt_config(pki, env_password=WRONG_PASSWORD, port=broker.port)
    with capture_logs() as logs:
        d = build_driver(cfg, buses=BusRegistry(clock), clock=clock)
        try:
            with pytest.raises(LinkDown) as down:
                await link_of(d).read(GUARD_S)
            clock.advance(1.0)
            offline, _ = await poll_until(d, DeviceOffline, before_poll=lambda: clock.advance(1.0))
        finally:
            await d.close()
    text = str(down.value)
    assert "\n" not in text and "cannot connect" in text
    assert re.search(r"not authori[sz]ed|bad user name or password", text, re.IGNORECASE), text
    assert logs and any("CONNECT" in r.getMessage() for r in caplog.records), "both captures are live"
    seen = [text, offline.reason, repr(cfg), repr(down.value)]
    seen += [" ".join(f"{k}={v}" for k, v in entry.items()) for entry in logs]
    seen += [r.getMessage() for r in caplog.records]
    assert not [s for s in seen if WRONG_PASSWORD in s or PASSWORDS[APPLIANCE] in s]


async def test_a_broker_the_ca_did_not_sign_is_a_one_line_link_down(
    broker: SecureBroker, pki: pathlib.Path, clock: VirtualClock
) -> None:
    d = build_driver(
        mqtt_config(pki, port=broker.port, ca_file="other-ca.crt"), buses=BusRegistry(clock), clock=clock
    )
    try:
        with pytest.raises(LinkDown) as down:
            await link_of(d).read(GUARD_S)
    finally:
        await d.close()
    assert "\n" not in str(down.value)
    assert "cannot connect" in str(down.value) and "certificate verify failed" in str(down.value).lower()


async def test_a_ca_file_gone_at_connect_time_is_a_one_line_link_down(
    broker: SecureBroker, pki: pathlib.Path, tmp_path: pathlib.Path, clock: VirtualClock
) -> None:
    shutil.copy(pki / "ca.crt", tmp_path / "ca.crt")
    cfg = mqtt_config(tmp_path, port=broker.port)
    (tmp_path / "ca.crt").unlink()  # e.g. a botched certificate rotation after the config was read
    d = build_driver(cfg, buses=BusRegistry(clock), clock=clock)
    try:
        with pytest.raises(LinkDown, match=r"TLS set-up failed: ca_file .*ca\.crt") as down:
            await link_of(d).read(GUARD_S)
    finally:
        await d.close()
    assert "\n" not in str(down.value)


async def test_the_link_rides_out_a_broker_restart_in_order_without_duplicates(
    broker: SecureBroker, pki: pathlib.Path, clock: VirtualClock
) -> None:
    cfg = mqtt_config(pki, port=broker.port, backoff_initial_s=1.0, backoff_max_s=2.0, backoff_jitter=0)
    d = build_driver(cfg, buses=BusRegistry(clock), clock=clock)
    link = link_of(d)
    request = encode_frame(PROFILE, "request", {})
    try:
        async with fake_device(broker) as device:
            device.answer = [count(1), count(2), count(3)]
            await link.write(request)
            assert await read_until_heartbeat(link) == [count(1), count(2), count(3)]

        broker.stop()  # SIGTERM while the link is subscribed and reading
        with pytest.raises(LinkDown, match="broker lost"):
            await link.read(GUARD_S)
        # The backoff holds it off on the virtual clock: no connection attempt, no real wait.
        with pytest.raises(LinkDown, match=r"link down, reconnecting$") as held:
            await link.read(GUARD_S)
        assert held.value.retry_in_s == 1.0  # the wait is told apart, never frozen into words
        clock.advance(1.0)
        with pytest.raises(LinkDown, match="cannot connect"):
            await link.read(GUARD_S)  # the broker is still away
        with pytest.raises(LinkDown, match=r"link down, reconnecting$") as held:
            await link.write(request)
        assert held.value.retry_in_s == 2.0

        broker.start()  # same port, same accounts
        clock.advance(2.0)
        async with fake_device(broker) as device:
            after = [count(n) for n in range(4, 9)]
            device.answer = list(after)
            await link.write(request)  # the same link object reconnects and subscribes again
            assert await read_until_heartbeat(link) == after
            # And it stays up: the next exchange needs no backoff, and nothing is repeated.
            device.answer = [count(9)]
            await link.write(request)
            assert await read_until_heartbeat(link) == [count(9)]
            assert device.requests == 2
    finally:
        await d.close()


# -- the ACL ------------------------------------------------------------------------------------


class Collector:
    """A subscriber that keeps every message it is allowed to receive."""

    def __init__(self, broker: SecureBroker, user: str, *topics: str) -> None:
        self.broker, self.user, self.topics = broker, user, topics
        self.got: list[tuple[str, bytes]] = []
        self._changed = asyncio.Condition()
        self._client: aiomqtt.Client | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Collector:
        client = self.broker.client(self.user)
        await client.__aenter__()
        for t in self.topics:
            await client.subscribe(t, qos=1)
        self._client = client
        self._task = asyncio.create_task(self._pump(client))
        return self

    async def _pump(self, client: aiomqtt.Client) -> None:
        with contextlib.suppress(aiomqtt.MqttError):
            async for m in client.messages:
                assert isinstance(m.payload, bytes)
                async with self._changed:
                    self.got.append((m.topic.value, m.payload))
                    self._changed.notify_all()

    async def wait_for(self, payload: bytes) -> None:
        async with asyncio.timeout(GUARD_S), self._changed:
            await self._changed.wait_for(lambda: any(p == payload for _, p in self.got))

    async def __aexit__(self, *exc: object) -> None:
        await _disconnect(self._client, self._task)


async def test_a_device_account_publishes_on_its_own_out_topic_only(broker: SecureBroker) -> None:
    forged = b"$SC,1,53,1*00\r\n"
    sentinel = count(42)
    async with Collector(broker, "test-observer", "#") as everything, fake_device(broker) as device:
        for topic in [
            "tabledev/site-a/t1/shoe/out",  # another device of its table
            "tabledev/site-a/t2/stub/out",  # the same device name at another table
            f"{TOPIC}/in",  # a command to itself: only the appliance writes those
            "tablectl/site-a/t1/events",  # the table's telemetry
            "tablectl/site-a/t1/status",
            "tablectl/site-a/t1/cmd/reshuffle_ordered",
            TOPIC,
        ]:
            await device.publish_to(topic, forged)
        await device.publish(sentinel)  # allowed, and sent last by the same client
        # The broker keeps one client's messages in order: the sentinel arriving means the rest was dropped.
        await everything.wait_for(sentinel)
    assert everything.got == [(f"{TOPIC}/out", sentinel)]


async def test_only_its_own_appliance_reads_a_device(broker: SecureBroker) -> None:
    frame, marker, status = count(5), count(6), b'{"version":1,"online":true}'
    async with (
        Collector(broker, "test-observer", "#") as everything,
        Collector(broker, APPLIANCE, f"{TOPIC}/out") as own,
        Collector(broker, "site-a/t2", "tabledev/#") as other_table,
        Collector(broker, "floor-console", "tabledev/#", "tablectl/#") as floor,
        fake_device(broker) as device,
        fake_device(broker, user="device-site-a-t2-stub", topic="tabledev/site-a/t2/stub") as other_device,
    ):
        await device.publish(frame)
        await everything.wait_for(frame)  # routed to every allowed subscriber before the markers below
        await other_device.publish(marker)
        async with broker.client(APPLIANCE) as appliance:
            await appliance.publish(f"tablectl/{APPLIANCE}/status", status, qos=1)
        await own.wait_for(frame)
        await other_table.wait_for(marker)
        await floor.wait_for(status)
    assert own.got == [(f"{TOPIC}/out", frame)]
    assert other_table.got == [("tabledev/site-a/t2/stub/out", marker)]
    assert floor.got == [(f"tablectl/{APPLIANCE}/status", status)]
