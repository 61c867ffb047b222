"""A serial write never blocks the event loop: a line that does not take its bytes (a stalled
adapter, flow control held) holds up that device's write only, never the other devices' polls.
Shown on a real pty whose other end reads nothing until the test says so; no timing."""

from __future__ import annotations

import asyncio
import os
import tty

from devices.config import Endpoint, TransportKind
from devices.transport.links import SerialLink

PAYLOAD = b"x" * (1 << 20)  # far more than a pty's buffer holds


async def test_a_write_the_line_cannot_take_waits_without_blocking_the_loop() -> None:
    master, slave = os.openpty()
    tty.setraw(slave)  # bytes as they are: no echo, no line discipline in the way
    link = SerialLink(Endpoint(TransportKind.SERIAL_LINE, path=os.ttyname(slave)))
    try:
        writing = asyncio.create_task(link.write(PAYLOAD))
        # The buffer fills and the write waits; meanwhile other work on the loop goes on.
        others_ran = 0
        while others_ran < 50:
            await asyncio.sleep(0)
            others_ran += 1
        assert not writing.done(), "the line took a megabyte without being read"
        # The far end reads: the write goes on and ends with every byte delivered, in order.
        received = bytearray()
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        loop.add_reader(master, readable.set)
        try:
            while len(received) < len(PAYLOAD):
                await readable.wait()
                readable.clear()
                received += os.read(master, 1 << 16)
        finally:
            loop.remove_reader(master)
        await writing
        assert bytes(received) == PAYLOAD
    finally:
        await link.close()
        os.close(master)
        os.close(slave)
