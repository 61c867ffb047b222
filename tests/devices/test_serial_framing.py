"""Serial framing per line (issue 12): data bits, parity and stop bits, Modbus's 8E1 by default.

Modbus over Serial Line V1.02, 2.5.1: even parity is the default, a line without parity uses two
stop bits, RTU sends 8 data bits. A pty has no parity (Linux drops it, and may refuse to set it),
so what is checked here is that the configured framing is validated and reaches pyserial and
pymodbus, on both the appliance's side and the simulator's.
"""

from __future__ import annotations

import termios
from typing import Any

import pytest

from controller.errors import ConfigError
from devices.config import Framing, TransportKind
from devices.config_file import load_devices
from devices.transport.links import SerialLink
from devices.transport.modbus import ModbusBus
from sim.pty import Pty, set_framing
from tests.devices.conftest import ROOT, TABLES

KEYPAD: dict[str, Any] = {
    "kind": "keypad",
    "profile": "../devices/ref-keypad.toml",
    "transport": "modbus-rtu",
    "path": "/dev/ttyUSB0",
    "device_id": 3,
}
READER: dict[str, Any] = {
    "kind": "reader",
    "profile": "../devices/ref-reader-peek.toml",
    "transport": "modbus-rtu",
    "path": "/dev/ttyUSB0",
    "device_id": 2,
}
STUB: dict[str, Any] = {
    "kind": "stub_counter",
    "profile": "../devices/ref-stub-counter.toml",
    "transport": "serial-line",
    "path": "/dev/ttyUSB1",
}


def _framing(section: dict[str, Any]) -> str:
    [cfg] = load_devices({"dev": section}, TABLES, source="t.toml")
    return cfg.endpoint.serial_framing.describe()


@pytest.mark.parametrize(
    ("section", "framing"),
    [
        (KEYPAD, "8E1"),  # the Modbus default
        ({**KEYPAD, "parity": "none"}, "8N2"),  # no parity: two stop bits
        ({**KEYPAD, "parity": "odd"}, "8O1"),
        ({**KEYPAD, "parity": "even", "stopbits": 2}, "8E2"),
        (STUB, "8N1"),  # a frame device's usual line
        ({**STUB, "bytesize": 7, "parity": "even", "stopbits": 2}, "7E2"),
    ],
)
def test_each_line_has_its_framing_and_modbus_defaults_to_8e1(section: dict[str, Any], framing: str) -> None:
    assert _framing(section) == framing


@pytest.mark.parametrize(
    ("devices", "key", "rule"),
    [
        ({"dev": {**KEYPAD, "parity": "none", "stopbits": 1}}, "dev.stopbits", "needs 2 stop bits"),
        ({"dev": {**KEYPAD, "bytesize": 7}}, "dev.bytesize", "8 data bits"),
        ({"dev": {**KEYPAD, "parity": "mark"}}, "dev.parity", "must be one of even, odd, none"),
        ({"dev": {**KEYPAD, "parity": True}}, "dev.parity", "must be one of even, odd, none"),
        ({"dev": {**KEYPAD, "stopbits": 1.5}}, "dev.stopbits", "must be 1 or 2"),
        ({"dev": {**STUB, "bytesize": 9}}, "dev.bytesize", "must be an integer 5-8"),
        ({"dev": {**KEYPAD, "transport": "modbus-tcp", "parity": "even"}}, "dev.parity", "for a serial line"),
        ({"dev": {**KEYPAD, "port": 502}}, "dev.port", "only for a network transport"),
        ({"a": KEYPAD, "b": {**READER, "parity": "odd"}}, "b.parity", "must agree on its speed and framing"),
        (
            {"a": KEYPAD, "b": {**READER, "baudrate": 9600}},
            "b.baudrate",
            "must agree on its speed and framing",
        ),
    ],
)
def test_a_bad_framing_is_one_line_naming_the_key(devices: dict[str, Any], key: str, rule: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_devices(devices, TABLES, source="t.toml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"t.toml: devices.{key}: ") and rule in msg, msg


def test_a_pty_keeps_the_stop_bits_and_drops_parity() -> None:
    framing = Framing(bytesize=8, parity="odd", stopbits=2)
    assert framing.for_port("/dev/ttyUSB0") is framing
    pty = Pty(framing)
    try:
        assert framing.for_port(pty.path) == Framing(bytesize=8, parity="none", stopbits=2)
        cflag = termios.tcgetattr(pty.fd)[2]
        assert cflag & termios.CSTOPB
    finally:
        pty.close()


def test_linux_accepts_parity_on_a_pty_and_silently_clears_it() -> None:
    """What docs/devices/README.md says of ptys: asking for parity and 7 data bits succeeds
    (no error), and reading the settings back shows 8 data bits without parity: the pty kept
    nothing of it but the stop bits."""
    pty = Pty()
    try:
        set_framing(pty.fd, Framing(bytesize=7, parity="even", stopbits=2))  # does not raise
        cflag = termios.tcgetattr(pty.fd)[2]
        assert not cflag & termios.PARENB
        assert cflag & termios.CSIZE == termios.CS8
        assert cflag & termios.CSTOPB
    finally:
        pty.close()
    readme = (ROOT / "docs" / "devices" / "README.md").read_text(encoding="utf-8")
    assert "silently keeps 8 data bits without parity" in readme and "refuses to set" not in readme


async def test_the_configured_framing_reaches_pymodbus() -> None:
    [cfg] = load_devices({"dev": {**KEYPAD, "parity": "odd", "stopbits": 2}}, TABLES, source="t.toml")
    bus = ModbusBus(cfg.endpoint)
    params = bus._new_client().ctx.comm_params
    assert (params.bytesize, params.parity, params.stopbits, params.baudrate) == (8, "O", 2, 19200)
    [default] = load_devices({"dev": KEYPAD}, TABLES, source="t.toml")
    params = ModbusBus(default.endpoint)._new_client().ctx.comm_params
    assert (params.bytesize, params.parity, params.stopbits) == (8, "E", 1)


async def test_the_serial_link_opens_its_port_with_the_framing() -> None:
    far = Pty()  # the device's end; the link opens the other program's path
    try:
        section = {**STUB, "path": far.path, "bytesize": 8, "parity": "even", "stopbits": 2}
        [cfg] = load_devices({"dev": section}, TABLES, source="t.toml")
        assert cfg.endpoint.transport is TransportKind.SERIAL_LINE
        link = SerialLink(cfg.endpoint)
        try:
            await link.write(b"$x*00\r\n")
            port = link._port
            assert port is not None
            # On a pty the parity cannot be set (see sim/pty.py); the stop bits can, and are.
            assert (port.bytesize, port.parity, port.stopbits) == (8, "N", 2)
            assert termios.tcgetattr(port.fileno())[2] & termios.CSTOPB
        finally:
            await link.close()
    finally:
        far.close()
