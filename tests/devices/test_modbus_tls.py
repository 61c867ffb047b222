"""Modbus/TCP Security (issue 23, item 6): ``transport = "modbus-tls"`` with both ends certified.

Real sockets and real TLS: certificates made here with the openssl CLI (a devices CA that signs the
simulated devices' and the appliance's certificates, and a rogue CA that signs an impostor's), the
simulator serving TLS, and the appliance's pymodbus TLS client. A master without the right
certificate gets no answer (a forged poll cannot become a card); a device without one is not
believed; and a table plays its rounds over it.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import socket
import ssl
import struct
import subprocess
import warnings

import pytest

from controller.errors import ConfigError
from controller.supervisor.rig import table_file, virtual_table
from devices.config import ModbusTls, TransportKind
from devices.config_file import load_devices
from devices.errors import TransportError
from devices.transport.modbus import ModbusBus
from sim.table import SimTable, read_table
from tests.devices.conftest import GUARD_S, TABLES
from tests.mosquitto_fixtures import make_ca, openssl
from tests.relocated import relocated_table
from tests.supervisor.conftest import tablectl
from tests.support.flat_table import flat_text


def _cert(d: pathlib.Path, name: str, ca: str, *, server: bool) -> None:
    """``<name>.key`` and ``<name>.crt`` signed by ``ca``: a device (server, for 127.0.0.1) or a
    master (client)."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN=tablectl test {name}", cwd=d)  # fmt: skip
    ext = (
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        if server
        else "extendedKeyUsage=clientAuth\n"
    )
    (d / f"{name}.ext").write_text(ext, encoding="utf-8")
    signed_by = ("-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial")
    openssl("x509", "-req", "-in", f"{name}.csr", *signed_by, "-out", f"{name}.crt", "-days", "2",
            "-extfile", f"{name}.ext", cwd=d)  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("modbus-pki")
    make_ca(d, "devices-ca", "/CN=tablectl test devices CA")
    make_ca(d, "rogue-ca", "/CN=someone else's CA")
    _cert(d, "device", "devices-ca", server=True)
    _cert(d, "appliance", "devices-ca", server=False)
    _cert(d, "impostor", "rogue-ca", server=False)
    _cert(d, "fake-device", "rogue-ca", server=True)
    return d


def _tls_table(
    tmp_path: pathlib.Path,
    pki: pathlib.Path,
    *,
    device: str = "device",
    appliance_cert: str = "appliance",
    source: pathlib.Path | None = None,
) -> pathlib.Path:
    """The example Down Under table (or ``source``) with its TCP devices (shuffler, shoe) on
    modbus-tls."""
    text = flat_text(source or table_file("down-under"))  # every section's lines in the file
    mine = appliance_cert
    appliance = f'cert = "{pki}/{mine}.crt"\nkey = "{pki}/{mine}.key"\nca_file = "{pki}/devices-ca.crt"\n'
    served = f'cert = "{pki}/{device}.crt"\nkey = "{pki}/{device}.key"\nca_file = "{pki}/devices-ca.crt"\n'
    text = text.replace('transport = "modbus-tcp"\n', f'transport = "modbus-tls"\n{appliance}')
    for name in ("shuffler", "shoe"):
        text = text.replace(f"[devices.{name}.sim]\n", f"[devices.{name}.sim]\n{served}")
    path = tmp_path / "down-under-tls.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def test_a_table_plays_its_rounds_over_modbus_tls(pki: pathlib.Path, tmp_path: pathlib.Path) -> None:
    table = _tls_table(tmp_path, pki)
    async with virtual_table(table, tmp_path / "j.db", seed=5, boxes=2) as rig:
        shoe = next(d for d in rig.sim.driver_configs() if d.name == "shoe")
        assert shoe.endpoint.transport is TransportKind.MODBUS_TLS and shoe.endpoint.tls is not None
        await rig.dealer.open_table()
        await rig.dealer.play(2)
    from controller.journal import Journal

    with Journal.open(tmp_path / "j.db", create=False, readonly=True) as journal:
        kinds = [r.kind for r in journal.records()]
    assert kinds.count("round_settled") == 2 and "card_dealt" in kinds


@pytest.fixture
async def served_shoe(pki: pathlib.Path, tmp_path: pathlib.Path):  # type: ignore[no-untyped-def]
    """The simulated shoe serving modbus-tls on a free port; yields (sim table, its shoe config)."""
    _, devices = read_table(_tls_table(tmp_path, pki))
    spec, _ = read_table(TABLES / "down-under.toml")
    st = SimTable([d for d in devices if d.name == "shoe"], spec, seed=1)
    await st.start()
    try:
        yield st, next(c for c in st.driver_configs() if c.name == "shoe")
    finally:
        await st.stop()


async def _read(tls: ModbusTls, cfg) -> list[int]:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    bus = ModbusBus(replace(cfg.endpoint, tls=tls))
    try:
        async with asyncio.timeout(GUARD_S):
            return await bus.read_holding(cfg.device_id, 1, 2, timeout_s=2.0, attempts=1)
    finally:
        bus.close()


async def test_the_appliance_with_its_certificate_is_answered(served_shoe, pki: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    _, cfg = served_shoe
    words = await _read(ModbusTls(pki / "appliance.crt", pki / "appliance.key", pki / "devices-ca.crt"), cfg)
    assert len(words) == 2


async def test_a_master_with_another_ca_s_certificate_is_refused(served_shoe, pki: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    _, cfg = served_shoe
    # The impostor trusts the devices' CA (it can see the device's certificate) but its own
    # certificate is not one the device's CA signed: the handshake fails, no request is answered.
    impostor = ModbusTls(pki / "impostor.crt", pki / "impostor.key", pki / "devices-ca.crt")
    with pytest.raises(TransportError):
        await _read(impostor, cfg)


def _raw_poll(port: int, context: ssl.SSLContext | None) -> bytes:
    """A self-consistent Modbus read (function 3, 2 words at 1) sent as bytes; what comes back."""
    request = struct.pack(">HHHBBHH", 1, 0, 6, 1, 3, 1, 2)
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD_S) as raw:
        try:
            conn = context.wrap_socket(raw, server_hostname="127.0.0.1") if context else raw
            conn.sendall(request)
            return conn.recv(256)
        except (ssl.SSLError, ConnectionError):
            return b""


@pytest.mark.parametrize("how", ["plain TCP", "TLS without a certificate", "TLS 1.1"])
async def test_a_forged_poll_without_the_right_certificate_gets_no_answer(
    served_shoe, pki: pathlib.Path, how: str
) -> None:  # type: ignore[no-untyped-def]
    _, cfg = served_shoe
    context: ssl.SSLContext | None = None
    if how != "plain TCP":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(cafile=str(pki / "devices-ca.crt"))
        if how == "TLS 1.1":
            context.load_cert_chain(str(pki / "appliance.crt"), str(pki / "appliance.key"))
            context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
            with warnings.catch_warnings():  # deprecated: exactly why the device must refuse it
                warnings.simplefilter("ignore", DeprecationWarning)
                context.maximum_version = ssl.TLSVersion.TLSv1_1
    answer = await asyncio.to_thread(_raw_poll, cfg.endpoint.port, context)
    assert answer == b"", f"{how}: the device answered {answer!r}"


async def test_the_appliance_does_not_believe_a_device_without_the_devices_ca_s_certificate(
    pki: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    _, devices = read_table(_tls_table(tmp_path, pki, device="fake-device"))
    spec, _ = read_table(TABLES / "down-under.toml")
    st = SimTable([d for d in devices if d.name == "shoe"], spec, seed=1)
    await st.start()
    try:
        cfg = next(c for c in st.driver_configs() if c.name == "shoe")
        # The fake device admits our certificate (its CA file is the devices' CA), but its own
        # is signed by someone else: the appliance stops at the handshake.
        with pytest.raises(TransportError):
            await _read(ModbusTls(pki / "appliance.crt", pki / "appliance.key", pki / "devices-ca.crt"), cfg)
    finally:
        await st.stop()


def test_the_config_needs_cert_key_and_ca_and_defaults_to_port_802(pki: pathlib.Path) -> None:
    section = {
        "kind": "shoe",
        "profile": "../devices/ref-shoe.toml",
        "transport": "modbus-tls",
        "host": "127.0.0.1",
    }
    files = {
        "cert": str(pki / "appliance.crt"),
        "key": str(pki / "appliance.key"),
        "ca_file": str(pki / "devices-ca.crt"),
    }
    (shoe,) = load_devices({"shoe": {**section, **files}}, TABLES, source="t.toml")
    assert shoe.endpoint.port == 802 and shoe.endpoint.tls is not None
    with pytest.raises(
        ConfigError, match=r"devices\.shoe\.key: transport = \"modbus-tls\" needs cert, key and ca_file"
    ):
        load_devices(
            {"shoe": {**section, "cert": files["cert"], "ca_file": files["ca_file"]}}, TABLES, source="t.toml"
        )
    wrong_key = {**files, "key": str(pki / "impostor.key")}
    with pytest.raises(
        ConfigError, match=r"devices\.shoe\.cert: the certificate, key and CA cannot be used together"
    ):
        load_devices({"shoe": {**section, **wrong_key}}, TABLES, source="t.toml")
    with pytest.raises(ConfigError, match=r"devices\.shoe\.cert: only for transport = \"modbus-tls\""):
        load_devices(
            {"shoe": {**section, "transport": "modbus-tcp", "cert": files["cert"]}}, TABLES, source="t.toml"
        )


def _ready_or_waiting(run: subprocess.Popen[str]) -> tuple[bool, dict[str, str]]:
    """Read `tablectl run`'s JSON log until it is ready, or until it has said it waits for both TLS
    devices with the reason; True when ready, and the health (or the wait's error) per device."""
    assert run.stdout is not None
    health: dict[str, str] = {}
    waiting: dict[str, str] = {}
    for raw in run.stdout:
        line = json.loads(raw)
        if line["event"] == "device_health":
            health[line["device"]] = line["health"]
        if line["event"] == "waiting_for_device" and line["device"] in ("shuffler", "shoe"):
            waiting[line["device"]] = line.get("error", "")
        if line["event"] == "ready":
            return True, health
        if set(waiting) == {"shuffler", "shoe"} and {"reader", "keypad"} <= set(health):
            return False, waiting
    raise AssertionError(f"tablectl run ended ({run.wait()})")


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=GUARD_S * 2)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("appliance_cert", ["appliance", "impostor"])
def test_run_and_sim_as_processes_over_modbus_tls(
    pki: pathlib.Path, tmp_path: pathlib.Path, appliance_cert: str
) -> None:
    """The wire as deployed: `tablectl sim` serving modbus-tls and `tablectl run` dialling it, two
    processes on free ports. With its certificate the table is ready; with another CA's, `run`
    waits for the TLS devices naming why, and never hears a word from them."""
    shipped = relocated_table("down-under", tmp_path)
    config = _tls_table(tmp_path, pki, appliance_cert=appliance_cert, source=shipped)
    sim = tablectl("sim", "--config", config, "--seed", "3")
    try:
        assert sim.stdout is not None
        listing = [sim.stdout.readline() for _ in range(4)]  # printed once every device listens
        assert sum("transport=modbus-tls" in line for line in listing) == 2, listing
        run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db")
        try:
            ready, seen = _ready_or_waiting(run)
        finally:
            assert _stop(run) == 0
    finally:
        assert _stop(sim) == 0
    if appliance_cert == "appliance":
        assert ready and seen == dict.fromkeys(("shuffler", "shoe", "reader", "keypad"), "online")
    else:
        assert not ready and all(seen.values()), seen
