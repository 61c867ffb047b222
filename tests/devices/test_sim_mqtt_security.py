"""The simulated MQTT stub counter behind the secured broker: TLS, its own device account, the
shipped ACL, and a broker restart, against a real mosquitto started here.

The broker is the one test_mqtt_link_security uses, from tests/devices/conftest.py (a CA and
server certificate from the openssl CLI, a mosquitto_passwd file, config/mosquitto/acl with the
device blocks from its comment); this file puts ``tablectl sim``'s side where that file has a
hand-written device. The appliance's side is the
driver ``tablectl run`` builds from the same table file. Nothing sleeps to synchronise: tests wait
for the driver's events, or for a process to exit, under GUARD_S guards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator

import pytest
from structlog.testing import capture_logs

from controller.errors import ConfigError
from controller.supervisor.config import load_table_config
from devices.commands import RequestStubCount
from devices.config_file import load_devices
from devices.drivers.base import Driver
from devices.drivers.factory import build_drivers
from devices.errors import LinkDown
from devices.events import DeviceEvent, DeviceOffline, DeviceOnline, StubCounted
from sim.cli import main as sim_main
from sim.frame_server import StubCounterSim
from sim.table import SimTable
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
    next_event,
    of_type,
)

DEVICE = "device-site-a-t1-stub"  # the account the shipped ACL's device block names
APPLIANCE_ENV = "TABLECTL_TEST_APPLIANCE_PASSWORD"
DEVICE_ENV = "TABLECTL_TEST_SIM_DEVICE_PASSWORD"
DEVICE_SIM = f'username = "{DEVICE}"\npassword_env = "{DEVICE_ENV}"\n'
ALL_PASSWORDS = [*PASSWORDS.values(), WRONG_PASSWORD]


@pytest.fixture
def passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment a lab shell has: the appliance's password and the simulated device's."""
    monkeypatch.setenv(APPLIANCE_ENV, PASSWORDS[APPLIANCE])
    monkeypatch.setenv(DEVICE_ENV, PASSWORDS[DEVICE])


def write_table(d: pathlib.Path, broker: SecureBroker, sim: str = DEVICE_SIM) -> pathlib.Path:
    """A DJ Wild table at site-a/t1 whose stub counter is on the secured broker (topic left to its
    default, tabledev/site-a/t1/stub) with the appliance's account; ``sim``: more sim-section lines."""
    path = d / "t1.toml"
    path.write_text(
        f"""[table]
id = "t1"
site = "site-a"
game = "{ROOT / "config" / "games" / "dj-wild.toml"}"

[devices.stub]
kind = "stub_counter"
profile = "{STUB_PROFILE}"
transport = "mqtt"
host = "127.0.0.1"
port = {broker.port}
tls = true
ca_file = "{broker.pki / "ca.crt"}"
username = "{APPLIANCE}"
password_env = "{APPLIANCE_ENV}"
expected = 53
heartbeat_timeout_s = 2.0
backoff_initial_s = 0.01
backoff_max_s = 0.05

[devices.stub.sim]
heartbeat_s = 0.05
{sim}""",
        encoding="utf-8",
    )
    return path


class Appliance:
    """The stub counter's driver as ``tablectl run`` builds it from the table file, running."""

    def __init__(self, path: pathlib.Path) -> None:
        config = load_table_config(path)
        assert [d.endpoint.topic for d in config.devices] == [TOPIC]
        drivers, self.buses = build_drivers(config.devices)
        [self.driver] = drivers
        self.task = asyncio.create_task(self.driver.run(), name="stub driver")

    async def close(self) -> None:
        self.task.cancel()
        _, pending = await asyncio.wait([self.task], timeout=GUARD_S)
        self.buses.close()
        assert not pending, "the driver outlived its cancellation"


@contextlib.asynccontextmanager
async def running(path: pathlib.Path) -> AsyncIterator[tuple[StubCounterSim, Driver]]:
    """``tablectl sim``'s SimTable and ``tablectl run``'s driver for one table file, both running."""
    table = SimTable.from_file(path)
    await table.start()
    appliance: Appliance | None = None
    try:
        appliance = Appliance(path)
        stub = table.devices["stub"].frame_sim
        assert stub is not None
        yield stub, appliance.driver
    finally:
        if appliance is not None:
            await appliance.close()
        await table.stop()


def sequences(events: list[DeviceEvent]) -> list[int]:
    return [e.sequence for e in of_type(events, StubCounted)]


# -- end to end -------------------------------------------------------------------------------------


async def test_the_simulated_stub_reaches_the_appliance_over_tls_as_its_device_account(
    broker: SecureBroker, tmp_path: pathlib.Path, passwords: None
) -> None:
    path = write_table(tmp_path, broker)
    cfg = load_table_config(path, side="both").devices[0]
    assert (cfg.sim_mqtt.tls, cfg.sim_mqtt.ca_file) == (cfg.mqtt.tls, cfg.mqtt.ca_file)
    assert (cfg.sim_mqtt.username, cfg.sim_mqtt.password) == (DEVICE, PASSWORDS[DEVICE])
    assert not [pw for pw in ALL_PASSWORDS if pw in repr(cfg)]
    async with running(path) as (stub, driver):
        # Heartbeats: the device account may write tabledev/site-a/t1/stub/out and the table's
        # account may read it; the broker drops anything else, so arriving is the ACL's say-so.
        await next_event(driver, DeviceOnline)
        await stub.count(53)
        got, _ = await next_event(driver, StubCounted)
        assert (got.count, got.ok, got.sequence) == (53, True, 1)
        # And back: the appliance's request on .../in reaches the device, which answers a count it
        # has not sent yet (it counts without reporting here, so only the request can bring it).
        stub.model.count_stub(37)  # a stub after a round: 53 minus the cards dealt
        await driver.send(RequestStubCount())
        got, _ = await next_event(driver, StubCounted)
        assert (got.count, got.ok, got.sequence) == (37, True, 2)


async def test_the_simulated_stub_comes_back_after_a_broker_restart(
    broker: SecureBroker, tmp_path: pathlib.Path, passwords: None
) -> None:
    async with running(write_table(tmp_path, broker)) as (stub, driver):
        await next_event(driver, DeviceOnline)
        await stub.count(53)
        assert (await next_event(driver, StubCounted))[0].sequence == 1

        broker.stop()  # SIGTERM: every connection closes, the sim's and the appliance's
        await next_event(driver, DeviceOffline)
        # Counted while the broker is away: the frame is dropped, and the simulator carries on.
        async with asyncio.timeout(GUARD_S):
            await stub.count(53)

        broker.start()  # same port, same accounts
        _, seen = await next_event(driver, DeviceOnline)  # the sim's heartbeats flow again
        # It subscribed to .../in again: a request is answered with the count it could not send.
        await driver.send(RequestStubCount())
        got, more = await next_event(driver, StubCounted)
        assert (got.count, got.ok, got.sequence) == (53, True, 2)
        assert sequences(seen + more) == [2]


# -- the device's account -------------------------------------------------------------------------


def test_tablectl_sim_with_a_wrong_device_password_exits_with_one_line(
    broker: SecureBroker, tmp_path: pathlib.Path
) -> None:
    path = write_table(tmp_path, broker)
    env = {**os.environ, APPLIANCE_ENV: PASSWORDS[APPLIANCE], DEVICE_ENV: WRONG_PASSWORD}
    # The real entry point, as an operator types it: tablectl sim --config ...
    proc = subprocess.run(
        [sys.executable, "-m", "controller.cli", "sim", "--config", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=GUARD_S,
        check=False,
    )
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 1 and out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"tablectl sim: {path}: devices.stub: ") and "refused" in err
    assert f"as {DEVICE} (" in err and "Not authorized" in err
    assert not [pw for pw in ALL_PASSWORDS if pw in out + err]


async def test_a_refused_device_login_never_shows_the_password_in_any_log(
    broker: SecureBroker,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(APPLIANCE_ENV, PASSWORDS[APPLIANCE])
    monkeypatch.setenv(DEVICE_ENV, WRONG_PASSWORD)
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="mqtt")  # aiomqtt turns paho's logger down to WARNING
    table = SimTable.from_file(write_table(tmp_path, broker))
    with capture_logs() as logs, pytest.raises(LinkDown) as down:
        await table.start()
    text = str(down.value)
    assert "\n" not in text and "devices.stub: " in text and f"refused the sim's login as {DEVICE}" in text
    assert any("CONNECT" in r.getMessage() for r in caplog.records), "paho's debug log is captured"
    seen = [text, repr(down.value), repr(table.devices["stub"].config)]
    seen += [" ".join(f"{k}={v}" for k, v in entry.items()) for entry in logs]
    seen += [r.getMessage() for r in caplog.records]
    assert not [s for s in seen if any(pw in s for pw in ALL_PASSWORDS)]


async def test_the_listing_gives_the_broker_and_topic_as_one_value(
    broker: SecureBroker, tmp_path: pathlib.Path, passwords: None
) -> None:
    """`tablectl sim` prints one ``key=value`` line per device; a space would split ``at``."""
    table = SimTable.from_file(write_table(tmp_path, broker))
    await table.start()
    try:
        [line] = table.listing()
    finally:
        await table.stop()
    fields = dict(field.split("=", 1) for field in line.split()[1:])
    assert fields["at"] == f"mqtts://127.0.0.1:{broker.port}/{TOPIC}"


def test_a_literal_password_in_the_sim_section_is_refused_in_one_line(
    broker: SecureBroker, tmp_path: pathlib.Path, passwords: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_table(tmp_path, broker, f'username = "{DEVICE}"\npassword = "Lit-pw-8Jw"\n')
    assert sim_main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"tablectl sim: {path}: devices.stub.sim.password: "
        "a password is never written in the table config; use password_env\n"
    )


def test_an_unset_sim_password_variable_is_named_in_one_line(
    broker: SecureBroker, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(APPLIANCE_ENV, PASSWORDS[APPLIANCE])
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    path = write_table(tmp_path, broker)
    with pytest.raises(ConfigError) as err:
        load_table_config(path, side="sim")
    assert (
        str(err.value)
        == f"{path}: devices.stub.sim.password_env: environment variable {DEVICE_ENV} is not set"
    )


def test_each_end_reads_only_its_own_password(
    broker: SecureBroker, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tablectl run` at a table never has the device's password, nor `tablectl sim` the appliance's."""
    path = write_table(tmp_path, broker)
    monkeypatch.setenv(APPLIANCE_ENV, PASSWORDS[APPLIANCE])
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    [run_side] = load_table_config(path).devices
    assert (run_side.mqtt.password, run_side.sim_mqtt.password) == (PASSWORDS[APPLIANCE], None)
    assert run_side.sim_mqtt.password_env == DEVICE_ENV  # still checked, only not read
    monkeypatch.delenv(APPLIANCE_ENV)
    monkeypatch.setenv(DEVICE_ENV, PASSWORDS[DEVICE])
    [sim_side] = load_table_config(path, side="sim").devices
    assert (sim_side.mqtt.password, sim_side.sim_mqtt.password) == (None, PASSWORDS[DEVICE])
    with pytest.raises(ConfigError, match=f"environment variable {APPLIANCE_ENV} is not set"):
        load_table_config(path)


@pytest.mark.parametrize("key", ["username", "password_env"])
def test_a_sim_account_belongs_to_mqtt_devices_only(tmp_path: pathlib.Path, key: str) -> None:
    section = {
        "kind": "stub_counter",
        "profile": str(STUB_PROFILE),
        "transport": "serial-line",
        "sim": {key: DEVICE_ENV},
    }
    with pytest.raises(ConfigError, match=rf'devices\.stub\.sim\.{key}: only for transport = "mqtt"'):
        load_devices({"stub": section}, tmp_path, source="t.toml", environ={DEVICE_ENV: "x"})


def test_the_documented_sim_section_loads_with_the_production_example(
    pki: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    page = (ROOT / "docs" / "devices" / "README.md").read_text(encoding="utf-8")

    def toml_after(heading: str) -> str:
        section = page[page.index(heading) :]
        start = section.index("```toml\n") + len("```toml\n")
        return section[start : section.index("```\n", start)]

    example = toml_after("## MQTT devices") + "\n" + toml_after("### The simulated device behind")
    for sub in ("tables", "devices", "mosquitto"):
        (tmp_path / sub).mkdir()
    shutil.copy(STUB_PROFILE, tmp_path / "devices" / STUB_PROFILE.name)
    shutil.copy(pki / "ca.crt", tmp_path / "mosquitto" / "ca.crt")
    environ = {"TABLECTL_MQTT_PASSWORD": "appliance-pw", "TABLECTL_SIM_STUB_PASSWORD": "device-pw"}
    [cfg] = load_devices(tomllib.loads(example)["devices"], tmp_path / "tables", environ=environ, side="both")
    assert (cfg.sim_mqtt.tls, cfg.sim_mqtt.ca_file) == (True, (tmp_path / "mosquitto" / "ca.crt").resolve())
    assert (cfg.sim_mqtt.password, cfg.mqtt.password) == ("device-pw", "appliance-pw")
    # The documented account is the one the ACL's own example block gives that device.
    assert f"user {cfg.sim_mqtt.username}\n" in device_acl_block("example-floor/djw-01/stub")
