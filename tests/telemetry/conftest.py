"""A real mosquitto per test, with TLS from a CA made here, passwords and the shipped ACL.

Every broker these fixtures start is recorded and killed at the end of the session whatever
happens. Nothing here sleeps to synchronise: brokers are ready when their log says so, and
tests wait for MQTT messages under ``asyncio.timeout`` guards.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiomqtt
import pytest
import structlog

from controller.telemetry.broker import BrokerSettings

ROOT = pathlib.Path(__file__).resolve().parents[2]
MOSQUITTO_DIR = ROOT / "config" / "mosquitto"
GUARD_S = 20.0  # failure guard only: a passing test never gets near it
PASSWORD = {
    "site-a/t1": "pw-t1",
    "site-a/t2": "pw-t2",
    "floor-console": "pw-floor",
    "monitor-ops": "pw-monitor",
}

structlog.configure(cache_logger_on_first_use=False)
_started: list[subprocess.Popen[bytes]] = []


@pytest.fixture(scope="session", autouse=True)
def _kill_our_brokers() -> Iterator[None]:
    """Whatever a test did, no mosquitto of ours outlives the session."""
    yield
    for proc in _started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _binary() -> str:
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not pathlib.Path(binary).exists():
        pytest.skip("mosquitto is not installed")
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: pathlib.Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A CA and a server certificate for 127.0.0.1/localhost, made with the openssl CLI."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=tablectl test CA", cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="utf-8")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "2", "-extfile", "san.ext", cwd=d)  # fmt: skip
    return d


@dataclass
class Broker:
    """One mosquitto: TLS listener, password file, the shipped ACL, persistence in its own dir."""

    dir: pathlib.Path
    pki: pathlib.Path
    port: int = field(default_factory=_free_port)
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
            if role in ("floor", "monitor") and f"user {name}\n" in acl.read_text(encoding="utf-8"):
                role = "table-existing"  # the shipped ACL already has its block: only the password
            env = {**os.environ, "TABLECTL_NEW_PASSWORD": password}
            if role == "table-existing":
                subprocess.run(["mosquitto_passwd", "-b", str(passwd), name, password], check=True, env=env)
            else:
                subprocess.run(
                    [str(MOSQUITTO_DIR / "add-user.sh"), str(passwd), str(acl), role, name],
                    check=True, env=env, capture_output=True,
                )  # fmt: skip
        self.conf.write_text(
            f"""per_listener_settings false
allow_anonymous false
password_file {passwd}
acl_file {acl}
listener {self.port} 127.0.0.1
cafile {self.pki / "ca.crt"}
certfile {self.pki / "server.crt"}
keyfile {self.pki / "server.key"}
persistence true
persistence_location {self.dir}/
max_queued_messages 1000000
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
user {getpass.getuser()}
""",
            encoding="utf-8",
        )

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        self.proc = subprocess.Popen([_binary(), "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)  # fmt: skip
        _started.append(self.proc)
        _wait_running(self.proc)

    def stop(self) -> None:
        """SIGTERM: mosquitto saves its persistence file (retained messages, sessions) and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def settings(self, user: str, *, keepalive: int = 5) -> BrokerSettings:
        ca = self.pki / "ca.crt"
        return BrokerSettings("127.0.0.1", self.port, True, ca, user, PASSWORD[user], keepalive)


def _wait_running(proc: subprocess.Popen[bytes]) -> None:
    """Drain the broker's log in a thread (a full pipe would stall it) until it says it is running."""
    assert proc.stderr is not None
    stderr = proc.stderr
    running = threading.Event()
    log: list[bytes] = []

    def drain() -> None:
        for line in iter(stderr.readline, b""):
            log.append(line)
            if b" running" in line:
                running.set()
        running.set()  # exited: let the waiter look

    threading.Thread(target=drain, daemon=True, name="mosquitto-log").start()
    if not running.wait(GUARD_S) or proc.poll() is not None:
        raise RuntimeError(f"mosquitto did not start: {b''.join(log).decode(errors='replace')[-800:]}")


@pytest.fixture
def broker(tmp_path: pathlib.Path, pki: pathlib.Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker", pki)
    b.dir.mkdir()
    b.prepare()
    b.start()
    try:
        yield b
    finally:
        b.stop()


@dataclass
class Received:
    topic: str
    payload: bytes
    retain: bool

    def json(self) -> dict[str, Any]:
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
                self.settings.host, self.settings.port, identifier=self.identifier,
                username=self.settings.username, password=self.settings.password,
                clean_session=not self.persistent, tls_context=self.settings.tls_context(), keepalive=5,
            )  # fmt: skip
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
    broker: Broker, user: str = "floor-console", topic: str = "tablectl/#", *, persistent: bool = False,
    identifier: str | None = None,
) -> AsyncIterator[Observer]:  # fmt: skip
    ident = identifier or f"observer-{os.getpid()}-{time.monotonic_ns()}"
    async with Observer(broker.settings(user), topic, ident, persistent) as obs:
        yield obs
