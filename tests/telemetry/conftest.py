"""A real mosquitto per test, with TLS from a CA made here, passwords and the shipped ACL.

Every broker these fixtures start is recorded and killed at the end of the session whatever
happens. Nothing here sleeps to synchronise: brokers are ready when their log says so, and
tests wait for MQTT messages under ``asyncio.timeout`` guards.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiomqtt
import pytest
import structlog

from controller.telemetry.broker import BrokerSettings
from tests import mosquitto_fixtures
from tests.ports import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
MOSQUITTO_DIR = ROOT / "config" / "mosquitto"
GUARD_S = 60.0  # failure guard only: a passing test never gets near it (a start under load takes 10 s+)
PASSWORD = {
    "site-a/t1": "pw-t1",
    "site-a/t2": "pw-t2",
    "floor-console": "pw-floor",
    "monitor-ops": "pw-monitor",
    "archive-main": "pw-archive",
    # An appliance account named as the archive, made by hand (add-user.sh refuses the name): the
    # shipped ACL must still keep it out of tablectl/<site>/archive/.
    "site-a/archive": "pw-not-the-archive",
    "archive-1": "pw-archive",
}

structlog.configure(cache_logger_on_first_use=False)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A CA and a server certificate for 127.0.0.1/localhost, made with the openssl CLI."""
    return mosquitto_fixtures.make_pki(tmp_path_factory)


@dataclass
class Broker:
    """One mosquitto: TLS listener, password file, the shipped ACL, persistence in its own dir."""

    dir: pathlib.Path
    pki: pathlib.Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def conf(self) -> pathlib.Path:
        return self.dir / "mosquitto.conf"

    def prepare(self) -> None:
        acl = self.dir / "acl"
        shutil.copy(MOSQUITTO_DIR / "acl", acl)
        passwd = self.dir / "passwd"
        for name, password in PASSWORD.items():
            role = "table" if "/" in name else name.split("-")[0]
            if role in ("floor", "monitor", "archive") and f"user {name}\n" in acl.read_text(
                encoding="utf-8"
            ):
                role = "table-existing"  # the shipped ACL already has its block: only the password
            if name.endswith("/archive"):
                role = "table-existing"  # by hand: add-user.sh refuses it
            env = {**os.environ, "TABLECTL_NEW_PASSWORD": password}
            if role == "table-existing":
                subprocess.run(["mosquitto_passwd", "-b", str(passwd), name, password], check=True, env=env)
            else:
                subprocess.run(
                    [
                        str(MOSQUITTO_DIR / "add-user.sh"),
                        str(passwd),
                        str(acl),
                        str(self.dir / "dynsec.json"),
                        role,
                        name,
                    ],
                    check=True,
                    env=env,
                    capture_output=True,
                )
        extra = f"persistence true\npersistence_location {self.dir}/\nmax_queued_messages 1000000\n"
        self.conf.write_text(
            mosquitto_fixtures.tls_conf(
                port=self.port, pki=self.pki, password_file=passwd, acl_file=acl, extra=extra
            ),
            encoding="utf-8",
        )

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        self.proc = mosquitto_fixtures.start(self.conf, ready_within_s=GUARD_S)

    def stop(self) -> None:
        """SIGTERM: mosquitto saves its persistence file (retained messages, sessions) and exits."""
        mosquitto_fixtures.stop(self.proc, within_s=10)

    def settings(self, user: str, *, keepalive: int = 5) -> BrokerSettings:
        ca = self.pki / "ca.crt"
        return BrokerSettings("127.0.0.1", self.port, True, ca, user, PASSWORD[user], keepalive)


@pytest.fixture
def broker(tmp_path: pathlib.Path, pki: pathlib.Path) -> Iterator[Broker]:
    yield from mosquitto_fixtures.serving(Broker(tmp_path / "broker", pki))


@dataclass
class Received:
    topic: str
    payload: bytes
    retain: bool

    def json(self) -> dict[str, Any]:
        """The payload's document, parsed once and shared (read it, do not change it): waits call
        this on every message at every new one, which parsed 2 million payloads in the flood test."""
        return self._doc

    @functools.cached_property
    def _doc(self) -> dict[str, Any]:
        doc = json.loads(self.payload)
        assert isinstance(doc, dict)
        return doc


class Observer:
    """A subscriber that collects every message, reconnecting (persistent session) across outages."""

    def __init__(self, settings: BrokerSettings, topic: str, identifier: str, persistent: bool) -> None:
        self.settings, self.topic, self.identifier, self.persistent = settings, topic, identifier, persistent
        self.messages: list[Received] = []
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.subscribed = asyncio.Event()

    async def _run(self) -> None:
        while True:
            client = aiomqtt.Client(
                self.settings.host,
                self.settings.port,
                identifier=self.identifier,
                username=self.settings.username,
                password=self.settings.password,
                clean_session=not self.persistent,
                tls_context=self.settings.tls_context(),
                keepalive=5,
            )
            try:
                async with client:
                    await client.subscribe(self.topic, qos=1)
                    self.subscribed.set()
                    async for m in client.messages:
                        payload = m.payload if isinstance(m.payload, bytes) else str(m.payload).encode()
                        async with self._changed:
                            self.messages.append(Received(m.topic.value, payload, m.retain))
                            self._changed.notify_all()
            except aiomqtt.MqttError:
                await asyncio.sleep(0.05)  # reconnect backoff while the broker is away

    async def __aenter__(self) -> Observer:
        self._task = asyncio.create_task(self._run())
        async with asyncio.timeout(GUARD_S):
            await self.subscribed.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def wait_for(self, predicate: Callable[[list[Received]], bool], guard_s: float = GUARD_S) -> None:
        async with asyncio.timeout(guard_s), self._changed:
            await self._changed.wait_for(lambda: predicate(self.messages))

    def on(self, suffix: str) -> list[Received]:
        return [m for m in self.messages if m.topic.endswith(suffix)]


@contextlib.asynccontextmanager
async def observer(
    broker: Broker,
    user: str = "floor-console",
    topic: str = "tablectl/#",
    *,
    persistent: bool = False,
    identifier: str | None = None,
) -> AsyncIterator[Observer]:
    ident = identifier or f"observer-{os.getpid()}-{time.monotonic_ns()}"
    async with Observer(broker.settings(user), topic, ident, persistent) as obs:
        yield obs
