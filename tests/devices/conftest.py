"""Fixtures for the device tests: real simulators on real sockets and ptys, a virtual clock.

Nothing here sleeps to synchronise: tests call ``driver.poll_once()`` or wait for an event,
and ``asyncio.timeout`` is only a guard against a hang.
"""

from __future__ import annotations

import asyncio
import pathlib
import random
import re
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiomqtt
import pytest
import structlog

from controller.games import GAMES, GameId
from devices.config import DeviceConfig
from devices.config_file import load_devices
from devices.drivers.base import Driver
from devices.drivers.factory import build_driver
from devices.events import DeviceEvent
from devices.transport.modbus import BusRegistry
from sim.clock import VirtualClock
from sim.table import SimTable, read_table
from tests import mosquitto_fixtures
from tests.ports import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLES = ROOT / "config" / "tables"
DEVICES = ROOT / "config" / "devices"
GUARD_S = 60.0  # failure guard only: a passing test never gets near it (a start under load takes 10 s+)

E = TypeVar("E", bound=DeviceEvent)

structlog.configure(cache_logger_on_first_use=False)


def device_config(name: str, **section: Any) -> DeviceConfig:
    """One DeviceConfig from a table-style section (profile paths relative to config/tables)."""
    section.setdefault("backoff_initial_s", 0.01)
    section.setdefault("backoff_max_s", 0.05)
    return load_devices({name: section}, TABLES, source="test.toml")[0]


# A reply's time limit for a device that answers: a simulator in this process answers within
# milliseconds when the test has the cores, but several workers on two cores can hold it back for
# a good part of a second, and a poll timed out there is a test failed for the machine's load
# (each rig test assumed every poll answered). Generous, since waiting costs nothing when the
# device answers; a test about a device that does not answer sets its own (``timeout_s=...``).
ANSWERING_TIMEOUT_S = 3.0


def fast(cfg: DeviceConfig, **changes: Any) -> DeviceConfig:
    """Short backoff, so fault tests run quickly; the reply limit of a device that answers."""
    from dataclasses import replace

    from controller.backoff import BackoffPolicy

    defaults: dict[str, Any] = {
        "timeout_s": ANSWERING_TIMEOUT_S,
        "backoff": BackoffPolicy(0.01, 0.05, 0.25),
        "offline_after": 3,
    }
    defaults.update(changes)
    return replace(cfg, **defaults)


def drain(driver: Driver) -> list[DeviceEvent]:
    out: list[DeviceEvent] = []
    while not driver.events.empty():
        out.append(driver.events.get_nowait())
    return out


def of_type(events: list[DeviceEvent], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


async def poll_until(
    driver: Driver,
    kind: type[E],
    *,
    max_polls: int = 200,
    before_poll: Callable[[], None] | None = None,
) -> tuple[E, list[DeviceEvent]]:
    """Poll until an event of ``kind`` comes out; returns it and everything seen on the way."""
    seen: list[DeviceEvent] = []
    async with asyncio.timeout(GUARD_S):
        for _ in range(max_polls):
            if before_poll is not None:
                before_poll()
            await driver.poll_once()
            for ev in drain(driver):
                seen.append(ev)
                if isinstance(ev, kind):
                    return ev, seen
    raise AssertionError(f"no {kind.__name__} after {max_polls} polls; saw {seen!r}")


async def next_event(driver: Driver, kind: type[E]) -> tuple[E, list[DeviceEvent]]:
    """Wait (for a driver running as a task) until an event of ``kind`` arrives."""
    seen: list[DeviceEvent] = []
    async with asyncio.timeout(GUARD_S):
        while True:
            ev = await driver.events.get()
            seen.append(ev)
            if isinstance(ev, kind):
                return ev, seen


@asynccontextmanager
async def running(driver: Driver) -> AsyncIterator[None]:
    """The driver's own poll loop as a task for the block; cancelled and awaited after it."""
    task = asyncio.create_task(driver.run())
    try:
        yield
    finally:
        task.cancel()
        async with asyncio.timeout(GUARD_S):
            await asyncio.gather(task, return_exceptions=True)


def keypad_commands(sim: SimTable) -> tuple[Any, list[str]]:
    """The simulated keypad's model, and the list its command block's writes are named into (a
    lock the driver wrote shows as ``"lock"``)."""
    reg = sim.devices["keypad"].register_sim
    assert reg is not None
    written: list[str] = []
    reg.on_command = lambda name, _: written.append(name)
    return sim.devices["keypad"].model, written


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture(autouse=True)
async def leak_check() -> AsyncIterator[None]:
    """Fails a test that leaves tasks of its own running."""
    before = set(asyncio.all_tasks())
    yield
    for _ in range(5):
        await asyncio.sleep(0)
    left = [t for t in asyncio.all_tasks() - before if t is not asyncio.current_task() and not t.done()]
    names = [f"{t.get_coro().__qualname__} ({t.get_coro().cr_code.co_filename})" for t in left]  # type: ignore[union-attr]
    ours = [n for n in names if "pymodbus" not in n]
    assert not ours, f"tasks left running: {ours}"


class Rig:
    """A simulated table (from an example config) plus drivers pointed at it."""

    def __init__(self, table: SimTable, clock: VirtualClock) -> None:
        self.table = table
        self.clock = clock
        self.buses = BusRegistry(clock)
        self.drivers: dict[str, Driver] = {}
        # Each driver's reply limit unless a test names its own: long, for devices that answer;
        # a module about devices that go silent sets a short one (tests/devices/test_wire_faults.py).
        self.timeout_s = ANSWERING_TIMEOUT_S

    def model(self, name: str) -> Any:
        return self.table.devices[name].model

    def sim(self, name: str) -> Any:
        info = self.table.devices[name]
        return info.register_sim or info.frame_sim

    def server(self, name: str) -> Any:
        return self.table.devices[name].server

    def driver(self, name: str, **changes: Any) -> Driver:
        if name not in self.drivers:
            cfg = next(c for c in self.table.driver_configs() if c.name == name)
            cfg = fast(cfg, **({"timeout_s": self.timeout_s} | changes))
            self.drivers[name] = build_driver(cfg, buses=self.buses, clock=self.clock)
        return self.drivers[name]

    async def close(self) -> None:
        for d in self.drivers.values():
            await d.close()
        self.buses.close()
        await self.table.stop()


@pytest.fixture
async def rig_factory(clock: VirtualClock) -> AsyncIterator[Callable[..., Awaitable[Rig]]]:
    rigs: list[Rig] = []

    async def make(table: str = "double-back-jack", seed: int = 1234) -> Rig:
        game_spec, devices = read_table(TABLES / f"{table}.toml")
        # The devices alone: the shuffler's eject loads the shoe (no dealer here to cut the stack).
        st = SimTable(devices, game_spec, seed=seed, clock=clock, direct_insert=True)
        await st.start()
        rig = Rig(st, clock)
        rigs.append(rig)
        return rig

    yield make
    for r in rigs:
        await r.close()


@pytest.fixture
async def rig(rig_factory: Callable[..., Awaitable[Rig]]) -> Rig:
    return await rig_factory()


def game(name: str) -> Any:
    return GAMES[GameId(name)]


def seeded(seed: int = 1) -> random.Random:
    return random.Random(seed)


# -- mosquitto ------------------------------------------------------------------------------------


@pytest.fixture
def mosquitto(tmp_path: pathlib.Path) -> Iterator[int]:
    """Our own broker on a free port with its own config file; never the system one."""
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\n",
        encoding="utf-8",
    )
    proc = mosquitto_fixtures.start(conf, ready_within_s=GUARD_S)
    try:
        yield port
    finally:
        mosquitto_fixtures.stop(proc, within_s=5)


# -- mosquitto with TLS, accounts and the shipped ACL (devices on MQTT, and their simulator) ----------

STUB_PROFILE = DEVICES / "ref-stub-counter.toml"
APPLIANCE = "site-a/t1"  # the table's own account, as for telemetry
TOPIC = f"tabledev/{APPLIANCE}/stub"
PASSWORDS = {
    APPLIANCE: "Appliance-pw-7f3K",
    "site-a/t2": "Other-table-pw-2xQ",
    "device-site-a-t1-stub": "Device-pw-9LmZ",
    "device-site-a-t2-stub": "Other-device-pw-4Rt",
    "floor-console": "Floor-pw-1Hs",
    "test-observer": "Observer-pw-6Vb",
}
WRONG_PASSWORD = "Wrong-pw-Zq81xx"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A CA and a server certificate for 127.0.0.1, and a second CA that signed nothing here."""
    d = mosquitto_fixtures.make_pki(tmp_path_factory, "other-ca")
    (d / "not-a-cert.crt").write_text("this is not PEM\n", encoding="utf-8")
    return d


def device_acl_block(site_table_device: str) -> str:
    """The device block exactly as config/mosquitto/acl's comment shows it, for another device."""
    shipped = (ROOT / "config" / "mosquitto" / "acl").read_text(encoding="utf-8")
    example = re.findall(r"^#\s+((?:user|topic) .*example-floor.*)$", shipped, re.MULTILINE)
    assert [line.split()[0] for line in example] == ["user", "topic", "topic"], example
    dashed = site_table_device.replace("/", "-")
    block = "\n".join(example)
    block = block.replace("example-floor/djw-01/stub", site_table_device)
    return block.replace("example-floor-djw-01-stub", dashed) + "\n"


@dataclass
class SecureBroker:
    """mosquitto with a TLS listener, no anonymous access, a password file and the shipped ACL."""

    dir: pathlib.Path
    pki: pathlib.Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    def prepare(self) -> None:
        passwd = self.dir / "passwd"
        passwd.touch(mode=0o600)
        for user, password in PASSWORDS.items():
            subprocess.run(["mosquitto_passwd", "-b", str(passwd), user, password], check=True)
        acl = (ROOT / "config" / "mosquitto" / "acl").read_text(encoding="utf-8")
        acl += "\n" + device_acl_block("site-a/t1/stub") + "\n" + device_acl_block("site-a/t2/stub")
        acl += "\n# test only: sees everything, to show what the broker let through\nuser test-observer\n"
        acl += "topic read #\n"
        (self.dir / "acl").write_text(acl, encoding="utf-8")
        conf = mosquitto_fixtures.tls_conf(
            port=self.port,
            pki=self.pki,
            password_file=passwd,
            acl_file=self.dir / "acl",
            extra="persistence false\n",
        )
        (self.dir / "mosquitto.conf").write_text(conf, encoding="utf-8")

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        self.proc = mosquitto_fixtures.start(self.dir / "mosquitto.conf", ready_within_s=GUARD_S)

    def stop(self) -> None:
        mosquitto_fixtures.stop(self.proc, within_s=GUARD_S)

    def client(self, user: str, password: str | None = None) -> aiomqtt.Client:
        import ssl

        return aiomqtt.Client(
            "127.0.0.1",
            self.port,
            username=user,
            password=password or PASSWORDS[user],
            tls_context=ssl.create_default_context(cafile=str(self.pki / "ca.crt")),
        )


@pytest.fixture
def broker(tmp_path: pathlib.Path, pki: pathlib.Path) -> Iterator[SecureBroker]:
    yield from mosquitto_fixtures.serving(SecureBroker(tmp_path / "broker", pki))
