"""``tablectl sim`` for each example table: starts, lists where each device listens, answers a
plain Modbus master at the documented addresses, and stops cleanly on SIGINT or SIGTERM."""

from __future__ import annotations

import os
import pathlib
import select
import signal
import subprocess
import sys
import time

import pytest
from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient

from sim.cli import main
from tests.devices.conftest import GUARD_S, ROOT, TABLES
from tests.relocated import relocated_table

TABLE_DEVICES = {
    "double-back-jack": ["shuffler", "shoe", "reader", "keypad"],
    "double-attack": ["shuffler", "shoe", "reader", "keypad"],
    "down-under": ["shuffler", "shoe", "reader", "keypad"],
    "dj-wild": ["shuffler", "stub", "keypad"],
}
DECKS = {"double-back-jack": 6, "double-attack": 8, "down-under": 6, "dj-wild": 1}


def _start(table: str, folder: pathlib.Path) -> tuple[subprocess.Popen[bytes], dict[str, dict[str, str]]]:
    proc = subprocess.Popen(
        # The real entry point, as an operator types it: tablectl sim --config ...
        [sys.executable, "-m", "controller.cli", "sim",
         "--config", str(relocated_table(table, folder)), "--seed", "7"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    want = len(TABLE_DEVICES[table])
    buf = b""
    deadline = time.monotonic() + GUARD_S
    while buf.count(b"\n") < want:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            proc.kill()
            raise AssertionError(f"tablectl sim printed only {buf!r}")
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            raise AssertionError(f"tablectl sim exited: {proc.wait()} {proc.stderr.read()!r}")  # type: ignore[union-attr]
        buf += chunk
    listing: dict[str, dict[str, str]] = {}
    for line in buf.decode().splitlines():
        name, *fields = line.split()
        listing[name] = dict(f.split("=", 1) for f in fields)
    return proc, listing


def _stop(proc: subprocess.Popen[bytes], sig: int) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("table", sorted(TABLE_DEVICES))
async def test_tablectl_sim_answers_a_plain_modbus_master(table: str, tmp_path: pathlib.Path) -> None:
    proc, listing = _start(table, tmp_path)
    try:
        assert list(listing) == TABLE_DEVICES[table]
        sh = listing["shuffler"]
        assert sh["kind"] == "shuffler" and sh["transport"] == "modbus-tcp"
        host, port = sh["at"].rsplit(":", 1)
        # docs/devices/shuffler.md: 0-based addresses 0-9, state 0 = idle, back 1 = red.
        async with AsyncModbusTcpClient(host, port=int(port), timeout=2) as client:
            rr = await client.read_holding_registers(0, count=10, device_id=int(sh["device_id"]))
            assert not rr.isError()
            state, _cycle, _counted, fault, a_state, a_back, a_decks = rr.registers[:7]
            assert (state, fault, a_state, a_back, a_decks) == (0, 0, 0, 1, DECKS[table])
            assert rr.registers[7:] == [0, 2, DECKS[table]]
        kp = listing["keypad"]
        # The configured path, a link the simulator made to its pty.
        assert kp["transport"] == "modbus-rtu" and kp["at"] == str(tmp_path / "rs485")
        assert os.readlink(kp["at"]).startswith("/dev/pts/")
        # docs/devices/keypad.md: 33 registers from 0; meter at 22-23, key ring from 25.
        serial = AsyncModbusSerialClient(kp["at"], baudrate=19200, timeout=2)
        await serial.connect()
        try:
            rr = await serial.read_holding_registers(0, count=33, device_id=int(kp["device_id"]))
            assert not rr.isError() and rr.registers == [0] * 33
        finally:
            serial.close()
    finally:
        assert _stop(proc, signal.SIGINT) == 0


def test_tablectl_sim_stops_on_sigterm(tmp_path: pathlib.Path) -> None:
    proc, listing = _start("dj-wild", tmp_path)
    assert listing["stub"]["at"] == str(tmp_path / "stub")
    assert _stop(proc, signal.SIGTERM) == 0
    assert not (tmp_path / "stub").exists() and not (tmp_path / "rs485").exists()  # links removed


def _refused(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], table: str, extra: str = "") -> str:
    """``tablectl sim`` on a DJ Wild table file with this [table] id and ``extra`` sections: it
    exits 2 with one line, returned."""
    bad = tmp_path / "t.toml"
    game = TABLES.parent / "games" / "dj-wild.toml"
    bad.write_text(f'[table]\nid = "{table}"\nsite = "s"\ngame = "{game}"\n{extra}')
    assert main(["--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


def test_a_bad_config_is_one_line_and_exit_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "devices.x.kind" in _refused(tmp_path, capsys, "t1", '[devices.x]\nkind = "toaster"\n')


def test_the_simulators_refuse_what_the_controller_refuses(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table id the controller would refuse (not one MQTT topic level) is refused by the
    simulators too, which read the table file with their own small reader (sim/table_file.py)."""
    assert "table.id" in _refused(tmp_path, capsys, "t 1")
