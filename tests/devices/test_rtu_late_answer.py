"""A late answer on a serial line is never taken for the next request's.

Modbus RTU has no transaction id: pymodbus hands whatever frame arrives to the request waiting
then. A request that timed out may still be answered; the bus used to send the next request at
once, and that request took the late answer for its own ("read 7 at 0: got 0 registers"), its own
answer going to the one after: a keypad marked failed on a busy machine, with nothing wrong but a
slow reply. The far end here is the test on a real pty, answering when it chooses, so nothing
depends on how busy the machine is: the late answer is on the line before the next request runs."""

from __future__ import annotations

import asyncio
import os
import tty
from collections.abc import AsyncIterator

import pytest
from pymodbus.framer import FramerRTU

from devices.config import Endpoint, TransportKind
from devices.errors import DeviceTimeout
from devices.transport.modbus import ModbusBus

DEVICE = 3
GUARD_S = 30.0  # failure guard only


def _frame(pdu: bytes) -> bytes:
    body = bytes([DEVICE]) + pdu
    return body + FramerRTU.compute_CRC(body).to_bytes(2, "big")


@pytest.fixture
async def line() -> AsyncIterator[tuple[int, ModbusBus]]:
    """The device's end of a pty (the test reads requests and writes answers) and a bus on the other."""
    master, slave = os.openpty()
    tty.setraw(slave)
    bus = ModbusBus(Endpoint(TransportKind.MODBUS_RTU, path=os.ttyname(slave)))
    try:
        yield master, bus
    finally:
        bus.close()
        os.close(master)
        os.close(slave)


async def _request(master: int) -> bytes:
    """The next request the bus put on the line, as the device reads it."""
    loop = asyncio.get_running_loop()
    readable = asyncio.Event()
    loop.add_reader(master, readable.set)
    try:
        async with asyncio.timeout(GUARD_S):
            await readable.wait()
        return os.read(master, 256)
    finally:
        loop.remove_reader(master)


async def test_the_answer_to_a_request_that_timed_out_is_not_the_next_ones(
    line: tuple[int, ModbusBus],
) -> None:
    master, bus = line
    writing = asyncio.create_task(bus.write_registers(DEVICE, 33, [1], timeout_s=0.2))
    write = await _request(master)
    assert write[1] == 0x10
    with pytest.raises(DeviceTimeout):
        await writing  # the device says nothing in time
    reading = asyncio.create_task(bus.read_holding(DEVICE, 0, 2, timeout_s=GUARD_S))
    # The write's answer, late: on the line before the read has even started.
    os.write(master, _frame(bytes([0x10]) + (33).to_bytes(2, "big") + (1).to_bytes(2, "big")))
    read = await _request(master)
    assert read[1] == 0x03, read.hex()
    os.write(master, _frame(bytes([0x03, 4]) + (7).to_bytes(2, "big") + (9).to_bytes(2, "big")))
    async with asyncio.timeout(GUARD_S):
        assert await reading == [7, 9]
