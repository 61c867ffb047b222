"""Put register-map models on the wire with pymodbus: TCP on any port, RTU on a pty pair.

Each simulated device is a pymodbus ``SimDevice`` whose action hook renders the model into the
registers on every read and carries out the command block on every write, so a Modbus master
(our drivers, or mbpoll) always sees the model's current state.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from sim.pty import PtyBridge, link_line, unlink_line
from sim.registers import command, render
from sim.rtu_gate import RtuGate

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

    def sim_device(self) -> SimDevice:
        start = min(r.address for r in self.profile.registers.values())
        end = max(r.address + r.words for r in self.profile.registers.values())
        data = SimData(start, count=end - start, values=0, datatype=DataType.REGISTERS)
        return SimDevice(id=self.device_id, simdata=[data], action=self._action)

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
        if function_code in _WRITE_CODES:
            return self._write(address, [int(v) for v in set_values or []])
        for name, values in render(self.kind, self.model, self.profile).items():
            spec = self.profile.reg(name)
            words = self.profile.encode(name, values)
            off = spec.address - start_address
            registers[off : off + len(words)] = words
        for name, raw in self.faults.out_of_range.items():
            registers[self.profile.reg(name).address - start_address] = raw & 0xFFFF
        return None

    def _write(self, address: int, values: list[int]) -> ExcCodes | None:
        spec = self.profile.registers.get("command")
        if spec is None or address != spec.address or len(values) != spec.count:
            return ExcCodes.ILLEGAL_ADDRESS
        try:
            result = command(self.kind, self.model, self.profile, values)
        except SimRefused as exc:
            _log.info("command_refused", device_id=self.device_id, reason=str(exc))
            return ExcCodes.ILLEGAL_VALUE
        if self.on_command is not None:
            names = {v: k for k, v in self.profile.commands.items()}
            self.on_command(names[values[0]], result)
        return None


def _shaper(devices: list[RegisterSim], id_offset: int) -> Callable[[bool, bytes], bytes]:
    by_id = {d.device_id: d for d in devices}

    def trace(sending: bool, data: bytes) -> bytes:
        if not sending or len(data) <= id_offset:
            return data
        dev = by_id.get(data[id_offset])
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


class ModbusTcpSim:
    """One TCP listener (port 0 picks a free port); ``port`` holds the real one after start."""

    def __init__(self, devices: list[RegisterSim], *, host: str = "127.0.0.1", port: int = 0):
        self.devices = devices
        self.host = host
        self.port = port
        self._server: ModbusTcpServer | None = None

    async def start(self) -> None:
        server = ModbusTcpServer(
            [d.sim_device() for d in self.devices],
            address=(self.host, self.port),
            trace_packet=_shaper(self.devices, 6),  # MBAP header: unit id is byte 6
        )
        await server.serve_forever(background=True)
        sockets = getattr(server.transport, "sockets", None) or []
        if not sockets:
            raise RuntimeError(f"modbus sim could not listen on {self.host}:{self.port}")
        self.port = sockets[0].getsockname()[1]
        self._server = server
        _log.info("listening", transport="modbus-tcp", host=self.host, port=self.port)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.shutdown()  # type: ignore[no-untyped-call]

    async def drop_link(self) -> None:
        """The device vanishes: listener and connections closed (same port kept for later)."""
        await self.stop()

    async def restore_link(self) -> None:
        await self.start()


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
    ) -> None:
        self.devices = devices
        self.baudrate = baudrate
        self.framing = framing  # the line's, as the table file configures it (8E1 by default)
        self.link = link
        self.bridge = PtyBridge(RtuGate({d.device_id for d in devices}), framing)
        self._server: ModbusSerialServer | None = None

    @property
    def path(self) -> str:
        return self.link or self.bridge.host_path

    async def start(self) -> None:
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
