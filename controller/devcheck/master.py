"""A minimal Modbus master of raw frames, for the conformance check.

Not pymodbus: the check must send what a library would refuse to (undocumented functions, a
quantity of 0, another unit id, a broadcast, noise before a frame, two frames back to back) and
see exactly what comes back, and how long it took. TCP (MBAP) on a socket; RTU on the device's
serial line (the same ``SerialLink`` the drivers use, so the line's framing is the configured
one). Frames are read by content: an RTU reply is complete when its function's layout says so
and its CRC closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from dataclasses import dataclass, replace

from devices.config import DeviceConfig, TransportKind
from devices.errors import TransportError
from devices.transport.links import SerialLink


def crc16(frame: bytes) -> bytes:
    """The Modbus RTU CRC, low byte first."""
    crc = 0xFFFF
    for b in frame:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return struct.pack("<H", crc)


def read_pdu(address: int, quantity: int, fc: int = 3) -> bytes:
    return struct.pack(">BHH", fc, address, quantity)


def write_pdu(address: int, words: tuple[int, ...] | list[int]) -> bytes:
    n = len(words)
    return struct.pack(">BHHB", 16, address, n, 2 * n) + struct.pack(f">{n}H", *words)


@dataclass(frozen=True, slots=True)
class Reply:
    pdu: bytes | None  # None: nothing (or nothing valid) came within the timeout
    seconds: float

    @property
    def exception(self) -> int | None:
        if self.pdu is not None and len(self.pdu) == 2 and self.pdu[0] & 0x80:
            return self.pdu[1]
        return None

    def describe(self) -> str:
        if self.pdu is None:
            return "no answer"
        if self.exception is not None:
            return f"exception {self.exception:02d}"
        return f"a normal reply to function {self.pdu[0]}"


def _rtu_reply_length(buf: bytes) -> int | None:
    """The length of the RTU reply at the head of ``buf`` when known (id, function first)."""
    if len(buf) < 3:
        return None
    fc = buf[1]
    if fc & 0x80:
        return 5
    if fc in (1, 2, 3, 4):
        return 5 + buf[2]
    return 8  # 5, 6, 15, 16: id, fc, address, value/quantity, CRC


class Master:
    """One device's end of the wire: ``request`` sends one PDU and waits for the answer."""

    def __init__(self, config: DeviceConfig) -> None:
        self.config = config
        self.timeout_s = config.timeout_s
        self.gap_s = config.endpoint.gap_s
        self.rtu = config.endpoint.transport is TransportKind.MODBUS_RTU
        self._tid = 0
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._link: SerialLink | None = None
        self._rx = b""
        self.replies: list[float] = []  # seconds, every answered request

    async def open(self) -> None:
        ep = self.config.endpoint
        if self.rtu:
            # The same serial link the drivers' lines use, with the RTU line's own framing.
            line = replace(ep, transport=TransportKind.SERIAL_LINE, framing=ep.serial_framing)
            self._link = SerialLink(line)
        else:
            async with asyncio.timeout(max(self.timeout_s, 2.0)):
                self._stream = await asyncio.open_connection(ep.host, ep.port)

    async def close(self) -> None:
        if self._link is not None:
            await self._link.close()
        if self._stream is not None:
            self._stream[1].close()
            with contextlib.suppress(Exception):
                await self._stream[1].wait_closed()

    # -- frames ---------------------------------------------------------------------------
    def frame(self, unit: int, pdu: bytes) -> bytes:
        if self.rtu:
            body = bytes((unit,)) + pdu
            return body + crc16(body)
        self._tid = (self._tid + 1) & 0xFFFF
        return struct.pack(">HHHB", self._tid, 0, len(pdu) + 1, unit) + pdu

    async def send_raw(self, data: bytes) -> None:
        if self._link is not None:
            self._rx = b""
            await self._link.write(data)
        else:
            assert self._stream is not None
            self._stream[1].write(data)
            await self._stream[1].drain()

    async def request(self, unit: int, pdu: bytes, *, timeout_s: float | None = None) -> Reply:
        frame = self.frame(unit, pdu)
        tid = self._tid
        start = time.monotonic()
        await self.send_raw(frame)
        return await self.reply(unit, tid=tid, start=start, timeout_s=timeout_s)

    async def reply(
        self, unit: int, *, tid: int | None = None, start: float | None = None, timeout_s: float | None = None
    ) -> Reply:
        """The next answer from ``unit`` (on TCP: with transaction ``tid``), or none in time."""
        begun = time.monotonic() if start is None else start
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            async with asyncio.timeout(limit):
                pdu = await (self._rtu_reply(unit) if self.rtu else self._tcp_reply(tid))
        except (TimeoutError, TransportError):
            pdu = None
        seconds = time.monotonic() - begun
        if pdu is not None:
            self.replies.append(seconds)
        if self.rtu and self.gap_s:
            await asyncio.sleep(self.gap_s)  # the line's quiet time between requests
        return Reply(pdu, seconds)

    async def _tcp_reply(self, tid: int | None) -> bytes:
        assert self._stream is not None
        reader = self._stream[0]
        while True:
            head = await reader.readexactly(7)
            got_tid, _proto, length, _unit = struct.unpack(">HHHB", head)
            pdu = await reader.readexactly(length - 1)
            if tid is None or got_tid == tid:
                return pdu

    async def _rtu_reply(self, unit: int) -> bytes:
        assert self._link is not None
        while True:
            while self._rx:
                n = _rtu_reply_length(self._rx)
                if n is None or len(self._rx) < n:
                    break
                frame = self._rx[:n]
                if frame[0] == unit and crc16(frame[:-2]) == frame[-2:]:
                    self._rx = self._rx[n:]
                    return frame[1:-2]
                self._rx = self._rx[1:]  # not a frame from this unit here: look one byte on
            self._rx += await self._link.read(self.timeout_s)
