"""The simulators as a Modbus master sees them, frame by frame (Modbus over Serial Line V1.02,
Modbus Application Protocol V1.1b3): on a shared RTU line a device answers only its own id,
applies a broadcast write (id 0) without answering it, and refuses bad requests with the
documented exception codes."""

from __future__ import annotations

import asyncio
import os
import struct
import termios
import tty

import pytest

from sim.rtu_gate import crc16
from tests.devices.conftest import GUARD_S, Rig


def rtu(*parts: int, words: tuple[int, ...] = (), tail: bytes = b"") -> bytes:
    body = bytes(parts) + b"".join(struct.pack(">H", w) for w in words) + tail
    return body + crc16(body)


class Line:
    """The master's end of a simulated RTU line, raw bytes in and out."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd)
        termios.tcflush(self.fd, termios.TCIOFLUSH)

    def send(self, frame: bytes) -> None:
        os.write(self.fd, frame)

    async def reply(self, length: int) -> bytes:
        """The next ``length`` bytes the line carries, read as the loop (which runs the simulator's
        end of the line) goes on; GUARD_S only guards a failing test."""
        loop = asyncio.get_running_loop()
        got = b""
        async with asyncio.timeout(GUARD_S):
            while len(got) < length:
                readable = loop.create_future()
                loop.add_reader(self.fd, readable.set_result, None)
                try:
                    await readable
                finally:
                    loop.remove_reader(self.fd)
                got += os.read(self.fd, length - len(got))
        return got

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
async def line(rig: Rig) -> Line:
    server = rig.table.devices["keypad"].server  # keypad id 3 and reader id 2 share the line
    assert server is not None
    return Line(server.path)


def _read_keypad(length: int = 1) -> tuple[bytes, int]:
    """A read of the keypad's first register and the length of its reply."""
    return rtu(3, 3, words=(0, length)), 5 + 2 * length


async def test_a_request_for_another_id_gets_no_reply(line: Line) -> None:
    try:
        line.send(rtu(9, 3, words=(0, 1)))  # nobody on this line is id 9
        request, n = _read_keypad()
        line.send(request)
        # The first bytes back are the keypad's answer: id 9 was never answered.
        assert (await line.reply(n))[:3] == bytes([3, 3, 2])
    finally:
        line.close()


async def test_quantity_out_of_range_is_illegal_data_value(line: Line) -> None:
    try:
        for quantity in (0, 126):  # 1..125 registers per read (MBAP V1.1b3, 6.3)
            line.send(rtu(3, 3, words=(0, quantity)))
            assert await line.reply(5) == rtu(3, 0x83, 0x03)
    finally:
        line.close()


async def test_an_undocumented_function_is_illegal_function(line: Line) -> None:
    try:
        for code in (0x01, 0x02, 0x04, 0x06, 0x41):  # undocumented, then unknown to Modbus
            line.send(rtu(3, code, words=(0, 1)))
            assert await line.reply(5) == rtu(3, code | 0x80, 0x01), hex(code)
    finally:
        line.close()


async def test_a_broadcast_write_is_carried_out_and_never_answered(rig: Rig, line: Line) -> None:
    keypad = rig.table.devices["keypad"]
    assert keypad.register_sim is not None and not keypad.model.locked
    done: asyncio.Event = asyncio.Event()
    keypad.register_sim.on_command = lambda name, result: done.set()
    try:
        # docs/devices/keypad.md: command block at 33, four words; lock = 1.
        line.send(rtu(0, 16, words=(33, 4), tail=bytes([8]) + struct.pack(">4H", 1, 0, 0, 0)))
        async with asyncio.timeout(GUARD_S):
            await done.wait()  # carried out (a master waits its turnaround delay after a broadcast)
        assert keypad.model.locked
        line.send(rtu(3, 3, words=(14, 1)))  # the keypad's locked flag
        assert await line.reply(7) == rtu(3, 3, 2, words=(1,))  # the first answer on the line is this one
    finally:
        line.close()


async def test_a_write_whose_byte_count_does_not_match_is_illegal_data_value(line: Line) -> None:
    try:
        line.send(rtu(3, 16, words=(33, 4), tail=bytes([6]) + struct.pack(">3H", 1, 0, 0)))
        assert await line.reply(5) == rtu(3, 0x90, 0x03)
    finally:
        line.close()
