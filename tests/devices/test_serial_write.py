"""A serial write never blocks the event loop: a line that does not take its bytes (a stalled
adapter, flow control held) holds up that device's write only, never the other devices' polls.
Shown on a real pty whose other end reads nothing until the test says so; the stall guard runs
on the link's clock, here a virtual one, so no test depends on how busy the machine is."""

from __future__ import annotations

import asyncio
import os
import time
import tty
from collections.abc import AsyncIterator, Callable

import pytest

from devices.config import Endpoint, TransportKind
from devices.errors import LinkDown
from devices.transport.links import WRITE_TIMEOUT_S, SerialLink
from sim.clock import VirtualClock

PAYLOAD = b"x" * (1 << 20)  # far more than a pty's buffer holds


@pytest.fixture
async def pty() -> AsyncIterator[tuple[int, str]]:
    """The master end (the test reads it) and the path of the slave (the link writes it)."""
    master, slave = os.openpty()
    tty.setraw(slave)  # bytes as they are: no echo, no line discipline in the way
    try:
        yield master, os.ttyname(slave)
    finally:
        os.close(master)
        os.close(slave)


async def _others_run_while(writing: asyncio.Task[None]) -> None:
    """The buffer fills and the write waits; meanwhile other work on the loop goes on."""
    for _ in range(50):
        await asyncio.sleep(0)
    assert not writing.done(), "the line took a megabyte without being read"


async def _read_until(
    master: int, size: int, writing: asyncio.Task[None], each_read: Callable[[], None] | None = None
) -> bytes:
    """Everything the write sends, read as the far end would; a failed write ends the reading
    with its own error at once (else the reader would wait for bytes that never come)."""
    received = bytearray()
    loop = asyncio.get_running_loop()
    readable = asyncio.Event()
    loop.add_reader(master, readable.set)
    try:
        while len(received) < size:
            waiting = asyncio.ensure_future(readable.wait())
            await asyncio.wait([waiting, writing], return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                waiting.cancel()
                await writing  # raises the write's failure; a write done early is a bug of its own
                raise AssertionError(f"the write ended with {size - len(received)} bytes unread")
            readable.clear()
            received += os.read(master, 1 << 16)
            if each_read is not None:
                each_read()
    finally:
        loop.remove_reader(master)
    return bytes(received)


async def test_a_write_the_line_cannot_take_waits_without_blocking_the_loop(pty: tuple[int, str]) -> None:
    master, path = pty
    link = SerialLink(Endpoint(TransportKind.SERIAL_LINE, path=path), clock=VirtualClock())
    try:
        writing = asyncio.create_task(link.write(PAYLOAD))
        await _others_run_while(writing)
        # The far end reads: the write goes on and ends with every byte delivered, in order.
        assert await _read_until(master, len(PAYLOAD), writing) == PAYLOAD
        await writing
    finally:
        await link.close()


async def test_a_line_that_keeps_taking_bytes_is_not_stalled(pty: tuple[int, str]) -> None:
    """A megabyte through a pty is some hundreds of waits for the line. Loaded machines made their
    sum pass a guard on the whole write (and the write failed with the line working all along):
    the guard is on each wait. Here the process is held up (as a busy machine holds it) for
    longer than the guard once, and the clock moves by most of the guard on every read."""
    master, path = pty
    clock = VirtualClock()
    link = SerialLink(Endpoint(TransportKind.SERIAL_LINE, path=path), clock=clock)
    held_up = False

    def after_each_read() -> None:
        nonlocal held_up
        if not held_up:
            held_up = True
            time.sleep(WRITE_TIMEOUT_S * 1.2)  # not a synchronisation: the whole loop is held up
        clock.advance(WRITE_TIMEOUT_S * 0.2)

    try:
        writing = asyncio.create_task(link.write(PAYLOAD))
        await _others_run_while(writing)
        assert await _read_until(master, len(PAYLOAD), writing, after_each_read) == PAYLOAD
        await writing
    finally:
        await link.close()


async def test_a_line_that_takes_nothing_for_the_guard_is_lost(pty: tuple[int, str]) -> None:
    _, path = pty  # the far end reads nothing
    clock = VirtualClock()
    link = SerialLink(Endpoint(TransportKind.SERIAL_LINE, path=path), clock=clock)
    try:
        writing = asyncio.create_task(link.write(PAYLOAD))
        await _others_run_while(writing)
        clock.advance(WRITE_TIMEOUT_S / 2)
        await _others_run_while(writing)  # still waiting: the guard has not run out
        clock.advance(WRITE_TIMEOUT_S / 2)
        with pytest.raises(LinkDown, match="took nothing"):
            await writing
    finally:
        await link.close()
