"""What a table's devices are: each device's kind, profile, endpoint (transport, address, framing,
TLS), retry and poll settings, as :class:`DeviceConfig`. devices/config_file.py reads them from
the ``[devices.<name>]`` sections of a table file."""

from __future__ import annotations

import argparse
import os
import pathlib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final, Literal

from controller.backoff import BackoffPolicy
from devices.profiles import DeviceKind, Profile


class TransportKind(StrEnum):
    MODBUS_TCP = "modbus-tcp"
    MODBUS_TLS = "modbus-tls"  # Modbus/TCP Security: MBAP over TLS 1.2+, both ends certified
    MODBUS_RTU = "modbus-rtu"
    SERIAL_LINE = "serial-line"
    MQTT = "mqtt"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often *our* code repeats a failed request (pymodbus itself is told not to)."""

    read_attempts: int = 2  # reads are idempotent
    write_attempts: int = 1  # a command is not repeated unless the profile says it is safe


Parity = Literal["even", "odd", "none"]
_PARITY_CODE: Final = {"even": "E", "odd": "O", "none": "N"}  # pyserial's and pymodbus's letters


@dataclass(frozen=True, slots=True)
class Framing:
    """How each character goes on a serial line: data bits, parity, stop bits.

    Modbus over Serial Line (V1.02, 2.5.1) makes even parity the default, and a line without
    parity must use two stop bits so a character keeps its 11 bits; RTU carries 8 data bits.
    Frame devices on a plain serial line keep their usual 8N1."""

    bytesize: int = 8
    parity: Parity = "even"
    stopbits: int = 1

    @property
    def parity_code(self) -> str:
        """``E``, ``O`` or ``N``: what pyserial and pymodbus take."""
        return _PARITY_CODE[self.parity]

    def describe(self) -> str:
        return f"{self.bytesize}{self.parity_code}{self.stopbits}"

    def for_port(self, path: str) -> Framing:
        """The framing to set on the port at ``path``: this one, or on a pty (the simulators'
        lines) 8 data bits, no parity and these stop bits. A pty carries bytes and has neither
        parity nor a byte size: Linux accepts a request for them (tcsetattr succeeds) and
        silently keeps 8 data bits without parity, so asking for them would only pretend."""
        if not _is_pty(path):
            return self
        return Framing(bytesize=8, parity="none", stopbits=self.stopbits)

    def pyserial(self) -> dict[str, Any]:
        """The keyword arguments of pyserial's (and pymodbus's) serial ports."""
        return {"bytesize": self.bytesize, "parity": self.parity_code, "stopbits": self.stopbits}


def _is_pty(path: str) -> bool:
    try:
        return os.path.realpath(path).startswith("/dev/pts/")
    except (OSError, ValueError):
        return False


MODBUS_RTU_FRAMING: Final = Framing()
LINE_FRAMING: Final = Framing(parity="none")


# Modbus/TCP Security's registered port (Modbus/TCP Security Protocol Specification, 2018).
MODBUS_TLS_PORT: Final = 802
NETWORK_MODBUS: Final = frozenset({TransportKind.MODBUS_TCP, TransportKind.MODBUS_TLS})


@dataclass(frozen=True, slots=True)
class ModbusTls:
    """One end's files for Modbus/TCP Security: its own certificate and key, and the CA the other
    end's certificate must chain to. Both ends present a certificate (mutual authentication)."""

    cert: pathlib.Path
    key: pathlib.Path = field(repr=False)
    ca_file: pathlib.Path

    def context(self, side: Literal["client", "server"]) -> ssl.SSLContext:
        """The TLS context of this end: TLS 1.2 or later, the peer's certificate required and
        checked against ``ca_file`` (a client also checks that the device's certificate names the
        host it dials). The appliance's ModbusBus, the config check and the simulator all build
        it here. Raises OSError or ssl.SSLError for unusable files."""
        if side == "client":
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # check_hostname and CERT_REQUIRED on
        else:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.verify_mode = ssl.CERT_REQUIRED  # no certificate from the master: no session
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_verify_locations(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.cert), str(self.key))
        return ctx


@dataclass(frozen=True, slots=True)
class Endpoint:
    transport: TransportKind
    host: str = ""  # TCP / MQTT host
    port: int = 0  # TCP / MQTT port; 0 lets the simulator choose
    path: str = ""  # serial device path (RTU, line); empty lets the simulator make a pty
    baudrate: int = 19200
    gap_s: float = 0.0  # quiet time between requests on this bus
    topic: str = ""  # MQTT base topic of the device
    framing: Framing | None = None  # serial lines: None is the transport's default (serial_framing)
    tls: ModbusTls | None = None  # modbus-tls: the appliance's (client's) files

    @property
    def serial_framing(self) -> Framing:
        """The line's framing as configured, else Modbus's 8E1 on RTU and 8N1 on a frame line."""
        if self.framing is not None:
            return self.framing
        return MODBUS_RTU_FRAMING if self.transport is TransportKind.MODBUS_RTU else LINE_FRAMING

    @property
    def bus_key(self) -> tuple[str, str, int]:
        """Devices with the same bus key share one connection, one lock and one gap."""
        return (self.transport.value, self.path or self.host, self.port)

    def describe(self) -> str:
        if self.transport in (TransportKind.MODBUS_RTU, TransportKind.SERIAL_LINE):
            return self.path
        if self.transport is TransportKind.MQTT:
            return f"{self.host}:{self.port} {self.topic}"
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class MqttAccess:
    """How an MQTT device link logs in to its broker: TLS and an account."""

    tls: bool = False
    ca_file: pathlib.Path | None = None  # None with tls: the system's trust store
    username: str | None = None
    password_env: str | None = None  # the variable the password came from, for messages
    password: str | None = field(default=None, repr=False)  # never in a repr, a log line or an error


def tls_context(tls: bool, ca_file: pathlib.Path | None) -> ssl.SSLContext | None:
    """The TLS context of a connection to the device broker (None without TLS): the broker's
    certificate is checked against ``ca_file`` (None: the system's trust store) and against the
    host name connected to. The config check, the appliance's MqttLink and the simulator's
    MqttSink all build it here, so a simulated device trusts exactly what the appliance trusts and
    a CA file the check accepted is one the link can use. Raises OSError or ssl.SSLError for an
    unusable CA file."""
    if not tls:
        return None
    return ssl.create_default_context(cafile=str(ca_file) if ca_file else None)


# Which end of an MQTT device's link a process is; see load_devices.
Side = Literal["appliance", "sim", "both"]


@dataclass(frozen=True)
class DeviceConfig:
    name: str
    kind: DeviceKind
    profile: Profile
    endpoint: Endpoint
    device_id: int = 1
    timeout_s: float = 0.5
    poll_interval_s: float = 0.1
    offline_after: int = 3  # consecutive failed polls before the device counts as offline
    # A device the controller has not heard from since it started is still connecting (it may
    # simply not be up yet) for this long; only then do its connection failures count.
    connect_grace_s: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    options: Mapping[str, Any] = field(default_factory=dict)  # kind-specific, checked below
    sim: Mapping[str, Any] = field(default_factory=dict)  # simulator settings, for sim/ only
    source: str = ""  # "file: devices.name" for messages
    mqtt: MqttAccess = field(default_factory=MqttAccess)  # MQTT transport only
    # The simulated device's own broker account ([devices.<name>.sim] username, password_env) with
    # the section's tls and ca_file; ``mqtt`` above is the appliance's account, which the ACL lets
    # read a device's frames but not write them.
    sim_mqtt: MqttAccess = field(default_factory=MqttAccess)
    # modbus-tls: the simulated device's (server's) files, from [devices.<name>.sim].
    sim_tls: ModbusTls | None = None

    def with_endpoint(self, **changes: Any) -> DeviceConfig:
        return replace(self, endpoint=replace(self.endpoint, **changes))


# The example tables' serial lines are links to ptys the simulator makes under this folder, one
# subfolder per table id (config/tables/*.toml).
RUN_ROOT: Final = "/tmp/tablectl"


def relocated(
    devices: list[DeviceConfig], table_id: str, *, port_base: int | None = None, run_dir: str | None = None
) -> list[DeviceConfig]:
    """The table's devices moved for one copy of the table on a shared host, the same way by
    `tablectl sim` and `tablectl run` given the same options, so the two find each other and no
    other copy collides with them (docs/simulators.md, "Two tables on one host").

    ``port_base``: the Modbus TCP (and TLS) devices, in the file's order, listen on port_base,
    port_base + 1, ... instead of the file's ports. ``run_dir``: a serial path under
    /tmp/tablectl/<table id>/ (where the simulator makes its ptys) moves to the same name under
    run_dir. Other addresses (real hosts, MQTT brokers, /dev/tty*) are left as they are."""
    out, offset = [], 0
    prefix = f"{RUN_ROOT}/{table_id}/"
    for d in devices:
        ep = d.endpoint
        if port_base is not None and ep.transport in NETWORK_MODBUS:
            ep = replace(ep, port=port_base + offset)
            offset += 1
        if run_dir is not None and ep.path.startswith(prefix):
            ep = replace(ep, path=str(pathlib.Path(run_dir) / ep.path.removeprefix(prefix)))
        out.append(replace(d, endpoint=ep))
    return out


def port_base_arg(text: str) -> int:
    """--port-base (sim and run): a TCP port from which the table's Modbus TCP devices are numbered."""
    base = int(text) if text.isdigit() else -1
    if not 1024 <= base <= 65_000:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a port from 1024 to 65000 (the devices take it, +1, ...)"
        )
    return base


def add_relocation_arguments(p: argparse.ArgumentParser) -> None:
    """--port-base and --run-dir, the same for `tablectl sim` and `tablectl run` (see ``relocated``)."""
    p.add_argument(
        "--port-base",
        type=port_base_arg,
        default=None,
        metavar="PORT",
        help="move the table's Modbus TCP devices to PORT, PORT+1, ... in the file's order (give sim and "
        "run the same), so two copies of a table on one host do not collide (docs/simulators.md)",
    )
    p.add_argument(
        "--run-dir",
        default=None,
        metavar="DIR",
        help="make (sim) and find (run) the serial lines the file puts under /tmp/tablectl/<table id>/ "
        "in DIR instead (give sim and run the same)",
    )
