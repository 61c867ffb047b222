"""Put register-map models on the wire with pymodbus: TCP on any port, RTU on a pty pair.

Each simulated device is a pymodbus ``SimDevice`` whose action hook renders the model into the
registers on every read and carries out the command block on every write, so a Modbus master
(our drivers, or mbpoll) always sees the model's current state.

pymodbus's servers answer more than a conformant device does, so a gate sits in front of each:
sim/rtu_gate.py on the pty bridge of a serial line, sim/tcp_gate.py in a small relay that listens
on the device's TCP address and passes the requests it accepts to pymodbus on a private port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from pymodbus.constants import ExcCodes
from pymodbus.framer import FramerType
from pymodbus.framer.rtu import FramerRTU
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from devices.config import MODBUS_RTU_FRAMING, Framing
from devices.profiles import DeviceKind, Profile
from sim.faults import WireFaults
from sim.models import SimRefused
from sim.pdu_rules import SERVER_BUSY
from sim.pty import PtyBridge, link_line, unlink_line
from sim.registers import command_name
from sim.rtu_gate import RtuGate
from sim.tcp_gate import TcpGate, refused
from sim.timing import ReplyLatency
from sim.variants import Simulator, standard_simulator

_log = structlog.get_logger("sim.modbus")

_WRITE_CODES = frozenset({5, 6, 15, 16, 22, 23})


@dataclass
class RegisterSim:
    """One simulated Modbus device: a model, its profile, its id and its wire faults."""

    kind: DeviceKind
    model: Any
    profile: Profile
    device_id: int = 1
    faults: WireFaults = field(default_factory=WireFaults)
    on_command: Callable[[str, Any], None] | None = None  # (command name, result)
    latency: ReplyLatency = field(default_factory=ReplyLatency)  # each reply held (sim/timing.py)
    phase_s: float = 0.0  # the first reply held this long: the device's poll phase (sim/timing.py)
    # How the model is rendered and commanded: its variant's (sim/variants.py); None: the kind's
    # standard variant's.
    simulator: Simulator | None = None
    # The profile's named conditions (a door open, a tilt) that hold now, set through the control
    # port's ``condition`` fault (sim/actions.py): rendered into their bits over the model's.
    conditions: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.simulator is None:
            self.simulator = standard_simulator(self.kind)

    def sim_device(self, unit_id: int | None = None) -> SimDevice:
        """The pymodbus device; ``unit_id`` 0 makes it answer every id pymodbus is handed (the
        TCP gate hands it only the ids the device answers to)."""
        start = min(r.address for r in self.profile.registers.values())
        end = max(r.address + r.words for r in self.profile.registers.values())
        data = SimData(start, count=end - start, values=0, datatype=DataType.REGISTERS)
        dev_id = self.device_id if unit_id is None else unit_id
        return SimDevice(id=dev_id, simdata=[data], action=self._action)

    async def _action(
        self,
        function_code: int,
        start_address: int,
        address: int,
        count: int,
        registers: list[int],
        set_values: list[int] | list[bool] | None,
    ) -> ExcCodes | None:
        await self.faults.wait_if_held()
        if self.phase_s > 0:
            phase, self.phase_s = self.phase_s, 0.0
            await asyncio.sleep(phase)
        await self.latency.wait()
        if function_code in _WRITE_CODES:
            return self._write(address, [int(v) for v in set_values or []])
        assert self.simulator is not None
        values = self.simulator.render(self.model, self.profile)
        values |= {name: [int(on)] for name, on in self.conditions.items()}
        for spec, words in self.profile.encode_all(values):
            off = spec.address - start_address
            registers[off : off + len(words)] = words
        command_block = self.profile.registers.get("command")
        if command_block is not None:  # write-only: it keeps no copy of the last command (docs)
            off = command_block.address - start_address
            registers[off : off + command_block.count] = [0] * command_block.count
        for name, raw in self.faults.out_of_range.items():
            registers[self.profile.reg(name).address - start_address] = raw & 0xFFFF
        return None

    def _write(self, address: int, values: list[int]) -> ExcCodes | None:
        spec = self.profile.registers.get("command")
        if spec is None or address != spec.address or len(values) != spec.count:
            return ExcCodes.ILLEGAL_ADDRESS
        assert self.simulator is not None
        try:
            name, args = command_name(self.profile, values)
            result = self.simulator.command(self.model, self.profile, name, args)
        except SimRefused as exc:
            _log.info("command_refused", device_id=self.device_id, reason=str(exc))
            return ExcCodes.ILLEGAL_VALUE
        if self.on_command is not None:
            self.on_command(name, result)
        return None


def _shaper(devices: list[RegisterSim], id_offset: int) -> Callable[[bool, bytes], bytes]:
    by_id = {d.device_id: d for d in devices}
    alone = devices[0] if len(devices) == 1 else None  # answers 0 and 0xFF on TCP too

    def trace(sending: bool, data: bytes) -> bytes:
        if not sending or len(data) <= id_offset:
            return data
        dev = by_id.get(data[id_offset], alone)
        if dev is None:
            return data
        faults = dev.faults
        if faults.wrong_id and faults.wrong_id_count > 0:
            faults.wrong_id_count -= 1
            data = _with_unit_id(data, id_offset, faults.wrong_id)
        return faults.shape(data)

    return trace


def _with_unit_id(data: bytes, id_offset: int, unit: int) -> bytes:
    out = bytearray(data)
    out[id_offset] = unit
    if id_offset == 0:  # RTU: the CRC covers the id
        crc = FramerRTU.compute_CRC(bytes(out[:-2]))
        out[-2:] = crc.to_bytes(2, "big")
    return bytes(out)


class _UnsendableReply(logging.Filter):
    """pymodbus logs an ERROR when the connection a reply was for closed while it was being made
    ("Cancel send, because not connected!"). For a simulated device that is never an error: its
    master hung up, or the simulator itself closed the line (a device switched off by a fault, or
    the simulator stopping), and a real device in that place drops the reply without a word."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Cancel send, because not connected")


_UNSENDABLE = _UnsendableReply()


def _quiet_unsendable_replies() -> None:
    logger = logging.getLogger("pymodbus.logging")
    if _UNSENDABLE not in logger.filters:
        logger.addFilter(_UNSENDABLE)


class ModbusTcpSim:
    """One TCP address (port 0 picks a free port); ``port`` holds the real one after start.

    The address is the relay's: each master connection gets a connection of its own to pymodbus's
    server on a private loopback port, and a TcpGate (sim/tcp_gate.py) between them that answers
    refusals itself and drops what a conformant device would not answer."""

    def __init__(
        self,
        devices: list[RegisterSim],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: ssl.SSLContext | None = None,
    ):
        self.devices = devices
        self.host = host
        self.port = port
        # Modbus/TCP Security: the wire's TLS ends at the relay, which is what a master talks to
        # (the gate's checks apply to the decrypted frames as on plain TCP); pymodbus behind it
        # listens on loopback only. The context requires the master's certificate.
        self.tls = tls
        self.transport = "modbus-tls" if tls is not None else "modbus-tcp"
        self._server: ModbusTcpServer | None = None
        self._front: asyncio.Server | None = None
        self._backend_port = 0
        self._relays: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        _quiet_unsendable_replies()
        sim_devices = [d.sim_device() for d in self.devices]
        if len(self.devices) == 1:  # alone on its address: 0 and 0xFF reach it too (tcp_gate.py)
            sim_devices.append(self.devices[0].sim_device(unit_id=0))
        server = ModbusTcpServer(
            sim_devices,
            address=("127.0.0.1", 0),
            trace_packet=_shaper(self.devices, 6),  # MBAP header: unit id is byte 6
        )  # broadcast_enable stays off: on TCP, unit 0 addresses the device (guide 4.4.1.2)
        await server.serve_forever(background=True)
        sockets = getattr(server.transport, "sockets", None) or []
        if not sockets:
            raise RuntimeError("modbus sim could not listen on a loopback port")
        self._backend_port = sockets[0].getsockname()[1]
        self._server = server
        try:
            # A master that opens a connection and never finishes its handshake is dropped in time.
            tls: dict[str, Any] = {"ssl": self.tls, "ssl_handshake_timeout": 10.0} if self.tls else {}
            self._front = await asyncio.start_server(self._relay, self.host, self.port, **tls)
        except OSError as exc:
            await self.stop()
            raise RuntimeError(f"modbus sim could not listen on {self.host}:{self.port} ({exc})") from exc
        self.port = self._front.sockets[0].getsockname()[1]
        _log.info("listening", transport=self.transport, host=self.host, port=self.port)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        gate = TcpGate({d.device_id for d in self.devices})
        upstream = _Upstream(self._backend_port, writer)
        try:
            while data := await reader.read(4096):
                forward, reply = gate.feed(data)
                if reply:
                    writer.write(reply)
                for frame in forward:
                    if upstream.full:
                        writer.write(refused(frame, SERVER_BUSY))
                    else:
                        await upstream.send(frame)
                await writer.drain()  # a master that does not read its answers is not read either
                if gate.closed:
                    _log.info("unframeable_request", transport=self.transport, port=self.port)
                    break
        except (OSError, asyncio.CancelledError):
            pass  # the master or the server went away: this connection ends, the others go on
        finally:
            await upstream.close()
            writer.close()
            self._relays.discard(task)

    async def stop(self) -> None:
        front, self._front = self._front, None
        if front is not None:
            front.close()
        relays, self._relays = list(self._relays), set()
        for task in relays:
            task.cancel()
        for task in relays:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        server, self._server = self._server, None
        if server is not None:
            await server.shutdown()  # type: ignore[no-untyped-call]

    async def drop_link(self) -> None:
        """The device vanishes: listener and connections closed (same port kept for later)."""
        await self.stop()

    async def restore_link(self) -> None:
        await self.start()


_IN_FLIGHT_MAX = 16  # requests one master connection may have unanswered (the guide: 1 to 16)


@dataclass
class _Leg:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    pump: asyncio.Task[None] | None = None


class _Upstream:
    """One master connection's way to pymodbus. pymodbus's server takes one request per connection
    until it has answered it (a second one in the same read waits for more bytes, or takes the
    first one's place), while a Modbus TCP master may send several without waiting (guide 4.4.1.2).
    So each request goes on a connection to pymodbus that has no request unanswered, opened when
    none is idle; answers go back to the master as they come. ``full`` once ``_IN_FLIGHT_MAX``
    are unanswered (one whose answer a wire fault dropped stays so until the master hangs up)."""

    def __init__(self, port: int, master: asyncio.StreamWriter) -> None:
        self.port = port
        self.master = master
        self.idle: list[_Leg] = []
        self.busy: list[_Leg] = []

    @property
    def full(self) -> bool:
        return len(self.busy) >= _IN_FLIGHT_MAX

    async def send(self, frame: bytes) -> None:
        leg = self.idle.pop() if self.idle else await self._open()
        self.busy.append(leg)
        leg.writer.write(frame)

    async def _open(self) -> _Leg:
        leg = _Leg(*await asyncio.open_connection("127.0.0.1", self.port))
        leg.pump = asyncio.create_task(self._answers(leg))
        return leg

    async def _answers(self, leg: _Leg) -> None:
        with contextlib.suppress(OSError):
            while data := await leg.reader.read(4096):
                self.master.write(data)
                await self.master.drain()
                if leg in self.busy:  # answered: free for the next request
                    self.busy.remove(leg)
                    self.idle.append(leg)

    async def close(self) -> None:
        legs, self.busy, self.idle = [*self.busy, *self.idle], [], []
        for leg in legs:
            leg.writer.close()
            if leg.pump is not None:
                leg.pump.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await leg.pump


class ModbusRtuSim:
    """Devices on one RTU line, served on a pty; ``path`` is the line the master opens: ``link``
    (a symlink made to the pty, at the path the table's config names) or else the pty itself."""

    def __init__(
        self,
        devices: list[RegisterSim],
        *,
        baudrate: int = 19200,
        framing: Framing = MODBUS_RTU_FRAMING,
        link: str = "",
        paced: bool = False,
    ) -> None:
        """``paced``: the line carries each frame in its time at ``baudrate`` (sim/wire_pace.py),
        not at once as a bare pty does."""
        self.devices = devices
        self.baudrate = baudrate
        self.framing = framing  # the line's, as the table file configures it (8E1 by default)
        self.link = link
        gate = RtuGate({d.device_id for d in devices})
        self.bridge = PtyBridge(gate, framing, baudrate=baudrate if paced else None)
        self._server: ModbusSerialServer | None = None

    @property
    def path(self) -> str:
        return self.link or self.bridge.host_path

    async def start(self) -> None:
        _quiet_unsendable_replies()
        self.bridge.open()
        if self.link:
            link_line(self.link, self.bridge.host_path)
        server = ModbusSerialServer(
            [d.sim_device() for d in self.devices],
            framer=FramerType.RTU,
            port=self.bridge.device_path,
            baudrate=self.baudrate,
            **self.framing.for_port(self.bridge.device_path).pyserial(),
            broadcast_enable=True,  # id 0 writes reach every device here, unanswered (sim/rtu_gate.py)
            trace_packet=_shaper(self.devices, 0),  # RTU: device id is the first byte
        )
        await server.serve_forever(background=True)
        self._server = server
        _log.info("listening", transport="modbus-rtu", path=self.path)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):
                await server.shutdown()  # type: ignore[no-untyped-call]
        if self.link and self.bridge.is_open:
            unlink_line(self.link, self.bridge.host_path)
        self.bridge.close()

    def drop_link(self) -> None:
        self.bridge.cut = True

    def restore_link(self) -> None:
        self.bridge.cut = False


async def settle() -> None:
    """Give the loop a turn (used after starting servers)."""
    await asyncio.sleep(0)
