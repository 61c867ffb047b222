"""The simulators as a Modbus master sees them, frame by frame (Modbus over Serial Line V1.02,
Modbus Messaging on TCP/IP Implementation Guide V1.0b, Modbus Application Protocol V1.1b3): on a
shared RTU line a device answers only its own id, applies a broadcast write (id 0) without
answering it; on TCP a device alone on its address answers its id, 0xFF and 0, and nothing else;
on both, bad requests are refused with the documented exception codes.

Raw bytes on a real pty and a real socket: no Modbus library on the master's side, so nothing
here can agree with the simulator by sharing its code. tests/devices/test_mbpoll.py does the same
with libmodbus's mbpoll."""

from __future__ import annotations

import asyncio
import os
import struct
import termios
import tty

import pytest

from devices.profiles import DeviceKind, load_profile
from sim.modbus_server import ModbusTcpSim, RegisterSim
from sim.models import ReaderModel, ShoeModel
from sim.rtu_gate import crc16
from tests.devices.conftest import DEVICES, GUARD_S, Rig


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


async def test_a_request_right_after_an_unknown_function_is_still_found(line: Line) -> None:
    """Frames of a function whose layout Modbus does not define are found where their CRC closes
    them, so a request sent straight after one (in the same write) is not taken for its tail."""
    try:
        request, n = _read_keypad()
        line.send(rtu(9, 0x41, words=(0, 1)) + rtu(3, 0x41, 7) + request)  # other id, ours, a read
        assert await line.reply(5) == rtu(3, 0xC1, 0x01)
        assert (await line.reply(n))[:3] == bytes([3, 3, 2])
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


async def test_a_broadcast_the_devices_would_refuse_is_neither_carried_out_nor_answered(
    rig: Rig, line: Line
) -> None:
    keypad = rig.model("keypad")
    try:
        line.send(rtu(0, 6, words=(33, 1)))  # lock, but with function 6, which no page documents
        line.send(rtu(0, 16, words=(33, 0), tail=bytes([0])))  # a write of no registers
        line.send(rtu(0, 3, words=(14, 1)))  # a broadcast read means nothing
        line.send(rtu(3, 3, words=(14, 1)))  # the keypad's locked flag
        assert await line.reply(7) == rtu(3, 3, 2, words=(0,))  # the first answer on the line
        assert not keypad.locked
    finally:
        line.close()


async def test_a_write_whose_byte_count_does_not_match_is_illegal_data_value(line: Line) -> None:
    try:
        line.send(rtu(3, 16, words=(33, 4), tail=bytes([6]) + struct.pack(">3H", 1, 0, 0)))
        assert await line.reply(5) == rtu(3, 0x90, 0x03)
    finally:
        line.close()


# -- Modbus TCP ---------------------------------------------------------------------------------


def mbap(tid: int, unit: int, pdu: bytes, *, protocol: int = 0) -> bytes:
    return struct.pack(">HHHB", tid, protocol, len(pdu) + 1, unit) + pdu


def read_pdu(address: int, quantity: int, fc: int = 3) -> bytes:
    return struct.pack(">BHH", fc, address, quantity)


class Socket:
    """The master's end of a TCP connection to a simulated device, raw frames in and out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Socket:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    def send(self, frame: bytes) -> None:
        self.writer.write(frame)

    async def reply(self) -> bytes:
        """The next whole MBAP frame; GUARD_S only guards a failing test."""
        async with asyncio.timeout(GUARD_S):
            head = await self.reader.readexactly(6)
            return head + await self.reader.readexactly(int.from_bytes(head[4:6], "big"))

    async def closed_by_device(self) -> bool:
        async with asyncio.timeout(GUARD_S):
            return await self.reader.read(1) == b""

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@pytest.fixture
async def shuffler(rig: Rig) -> Socket:
    return await Socket.open(rig.server("shuffler").port)  # alone on its address, device_id 1


async def test_tcp_a_device_alone_answers_its_id_0xff_and_0_each_echoed(shuffler: Socket) -> None:
    try:
        for tid, unit in enumerate((1, 0xFF, 0), start=1):  # guide 4.4.1.2: 0xFF, and 0 accepted
            shuffler.send(mbap(tid, unit, read_pdu(5, 2)))  # slot_a_back, slot_a_decks
            assert await shuffler.reply() == mbap(tid, unit, bytes([3, 4]) + struct.pack(">2H", 1, 6))
    finally:
        await shuffler.close()


async def test_tcp_another_unit_id_is_never_answered(shuffler: Socket) -> None:
    try:
        shuffler.send(mbap(1, 7, read_pdu(0, 1)))  # not a gateway: nobody behind it is 7
        shuffler.send(mbap(2, 1, read_pdu(6, 1)))
        # The first answer on the connection is the second request's: 7 was never answered.
        assert await shuffler.reply() == mbap(2, 1, bytes([3, 2, 0, 6]))
    finally:
        await shuffler.close()


async def test_tcp_quantity_out_of_range_is_illegal_data_value(shuffler: Socket) -> None:
    try:
        for tid, quantity in enumerate((0, 126), start=1):  # 1..125 registers per read (6.3)
            shuffler.send(mbap(tid, 1, read_pdu(0, quantity)))
            assert await shuffler.reply() == mbap(tid, 1, bytes([0x83, 0x03]))
        for tid, quantity in enumerate((0, 124), start=3):  # 1..123 per write (6.12)
            shuffler.send(mbap(tid, 1, struct.pack(">BHHB", 16, 10, quantity, 2 * quantity % 256)))
            assert await shuffler.reply() == mbap(tid, 1, bytes([0x90, 0x03]))
    finally:
        await shuffler.close()


async def test_tcp_an_undocumented_function_is_illegal_function(shuffler: Socket) -> None:
    try:
        # 1, 2, 4: coils, discrete inputs, input registers; 6, 8, 0x2B: defined but not documented
        # for these devices; 0x41: a code Modbus does not define.
        for tid, code in enumerate((0x01, 0x02, 0x04, 0x06, 0x08, 0x2B, 0x41), start=1):
            shuffler.send(mbap(tid, 1, read_pdu(0, 1, fc=code)))
            assert await shuffler.reply() == mbap(tid, 1, bytes([code | 0x80, 0x01])), hex(code)
    finally:
        await shuffler.close()


async def test_tcp_an_address_outside_the_map_is_illegal_data_address(shuffler: Socket) -> None:
    try:
        for tid, (address, quantity) in enumerate(((14, 1), (13, 2), (200, 1)), start=1):
            shuffler.send(mbap(tid, 1, read_pdu(address, quantity)))  # the map ends at 13
            assert await shuffler.reply() == mbap(tid, 1, bytes([0x83, 0x02])), address
    finally:
        await shuffler.close()


async def test_tcp_requests_sent_without_waiting_are_each_answered(shuffler: Socket) -> None:
    """Guide 4.4.1.2: on TCP a client may send several requests without waiting for the answers;
    each answer carries its request's transaction id."""
    try:
        shuffler.send(
            b"".join(mbap(tid, 1, read_pdu(address, 1)) for tid, address in ((1, 6), (2, 5), (3, 8)))
        )
        answers = {await shuffler.reply() for _ in range(3)}
        assert answers == {
            mbap(1, 1, bytes([3, 2, 0, 6])),
            mbap(2, 1, bytes([3, 2, 0, 1])),
            mbap(3, 1, bytes([3, 2, 0, 2])),
        }
    finally:
        await shuffler.close()


async def test_tcp_a_request_beyond_sixteen_unanswered_is_server_busy(rig: Rig, shuffler: Socket) -> None:
    """Guide 4.4.2.2: a server takes 1 to 16 requests at once (NumberMaxOfServerTransaction) and
    answers exception 06 when it has no room for another."""
    faults = rig.sim("shuffler").faults
    faults.hold()  # the device answers nothing until released
    try:
        shuffler.send(b"".join(mbap(tid, 1, read_pdu(6, 1)) for tid in range(1, 18)))
        assert await shuffler.reply() == mbap(17, 1, bytes([0x83, 0x06]))
        faults.release()
        answers = {await shuffler.reply() for _ in range(16)}
        assert answers == {mbap(tid, 1, bytes([3, 2, 0, 6])) for tid in range(1, 17)}
    finally:
        faults.release()
        await shuffler.close()


async def test_tcp_a_write_whose_byte_count_does_not_match_is_illegal_data_value(shuffler: Socket) -> None:
    try:
        shuffler.send(mbap(1, 1, struct.pack(">BHHB3H", 16, 10, 4, 6, 1, 1, 0)))
        assert await shuffler.reply() == mbap(1, 1, bytes([0x90, 0x03]))
    finally:
        await shuffler.close()


async def test_tcp_a_frame_of_another_protocol_is_discarded(shuffler: Socket) -> None:
    try:
        shuffler.send(mbap(1, 1, read_pdu(6, 1), protocol=1))  # guide 4.4.2.2: simply discarded
        shuffler.send(mbap(2, 1, read_pdu(6, 1)))
        assert await shuffler.reply() == mbap(2, 1, bytes([3, 2, 0, 6]))
    finally:
        await shuffler.close()


@pytest.mark.parametrize("length", [0, 1, 255, 0xFFFF])
async def test_tcp_a_length_no_frame_can_have_closes_the_connection(
    rig: Rig, shuffler: Socket, length: int
) -> None:
    try:
        shuffler.send(struct.pack(">HHHB", 1, 0, length, 1) + read_pdu(6, 1))
        assert await shuffler.closed_by_device()  # the stream cannot be framed again
        again = await Socket.open(rig.server("shuffler").port)  # the device itself goes on
        try:
            again.send(mbap(2, 1, read_pdu(6, 1)))
            assert await again.reply() == mbap(2, 1, bytes([3, 2, 0, 6]))
        finally:
            await again.close()
    finally:
        await shuffler.close()


async def test_tcp_devices_sharing_an_address_answer_only_their_own_ids() -> None:
    """Several devices behind one address are told apart by unit id, as behind a gateway: 0xFF
    and 0 then name none of them, and are not answered."""
    reader = RegisterSim(DeviceKind.READER, ReaderModel(), load_profile(DEVICES / "ref-reader-peek.toml"), 2)
    shoe = RegisterSim(DeviceKind.SHOE, ShoeModel(), load_profile(DEVICES / "ref-shoe.toml"), 3)
    server = ModbusTcpSim([reader, shoe])
    await server.start()
    conn = await Socket.open(server.port)
    try:
        reader.model.faults.dead = True  # health 21 tells the reader's answer from the shoe's 0
        conn.send(mbap(1, 2, read_pdu(0, 1)))
        assert await conn.reply() == mbap(1, 2, bytes([3, 2, 0, 21]))
        for tid, unit in enumerate((0xFF, 0, 9), start=2):
            conn.send(mbap(tid, unit, read_pdu(0, 1)))
        conn.send(mbap(5, 3, read_pdu(0, 1)))
        assert await conn.reply() == mbap(5, 3, bytes([3, 2, 0, 0]))
    finally:
        await conn.close()
        await server.stop()


async def test_a_valid_frame_after_noise_is_found_and_answered(line: Line) -> None:
    """A receiver resynchronises by content and CRC: bytes that form no frame (line noise, a
    frame cut short) are skipped, and the next frame whose CRC closes it is answered."""
    try:
        request, n = _read_keypad()
        for noise in (b"\x00\xff\x13", b"\x03\x10\x00\x21\x00\x04\x08\x01", b"\x03\x03\x00"):
            line.send(noise + request)
            assert (await line.reply(n))[:3] == bytes([3, 3, 2]), noise.hex()
    finally:
        line.close()


async def test_frames_sent_back_to_back_are_each_answered(line: Line) -> None:
    """Two requests in one write (no silence between them) are two requests: each is answered,
    in order, as a real slave answers the frames it receives one after the other."""
    try:
        first, n1 = _read_keypad(1)
        second = rtu(2, 3, words=(0, 2))  # the reader's health and insert_seq
        line.send(first + second)
        assert (await line.reply(n1))[:3] == bytes([3, 3, 2])
        assert (await line.reply(9))[:3] == bytes([2, 3, 4])
    finally:
        line.close()


def write_pdu(address: int, *words: int) -> bytes:
    return struct.pack(">BHHB", 16, address, len(words), 2 * len(words)) + struct.pack(
        f">{len(words)}H", *words
    )


async def test_set_light_takes_only_0_or_1_and_command_blocks_read_as_0(rig: Rig, line: Line) -> None:
    """keypad.md: set_light (3, box, spot, 0/1); any other last argument is illegal (03) and
    changes nothing. The command block is write-only and reads 0 in every word."""
    keypad = rig.model("keypad")
    try:
        for n, value in enumerate((2, 0xFFFF)):
            line.send(rtu(3, 16, words=(33, 4), tail=bytes([8]) + struct.pack(">4H", 3, 1, 1, value)))
            assert await line.reply(5) == rtu(3, 0x90, 0x03), value
            assert not keypad.lights, n
        line.send(rtu(3, 16, words=(33, 4), tail=bytes([8]) + struct.pack(">4H", 3, 1, 1, 1)))
        assert await line.reply(8) == rtu(3, 16, words=(33, 4))
        assert keypad.lights == {(1, 1)}
        line.send(rtu(3, 3, words=(33, 4)))  # the command block just written
        assert await line.reply(13) == rtu(3, 3, 8, words=(0, 0, 0, 0))
    finally:
        line.close()


async def test_tcp_the_shoe_takes_no_write_anywhere(rig: Rig) -> None:
    """shoe.md: the shoe has no command block; a write anywhere in its map is 02."""
    shoe = await Socket.open(rig.server("shoe").port)
    try:
        for tid, address in enumerate((0, 6, 8, 15), start=1):
            shoe.send(mbap(tid, 1, write_pdu(address, 0)))
            assert await shoe.reply() == mbap(tid, 1, bytes([0x90, 0x02])), address
    finally:
        await shoe.close()
