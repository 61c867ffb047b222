"""What a conformant Modbus RTU slave does before it looks at its registers, in front of
pymodbus's serial server (which answers every id, broadcast included, and stops answering after a
function it cannot decode).

Per Modbus over Serial Line V1.02 and the Application Protocol V1.1b3, on a shared line:
- a frame for another id is ignored (never answered: two answers would collide on RS-485);
- a broadcast (id 0) write is carried out by every device and never answered; a broadcast read
  is meaningless and ignored;
- any other request is judged as on every transport (sim/pdu_rules.py): an undocumented function
  gets exception 01, a bad quantity or byte count exception 03;
- a frame with a bad CRC is dropped, as a receiver drops a damaged frame.

Frames are found by content and CRC, not by silences (which a pty or a USB adapter does not keep):
the receiver looks for the first place in what it holds where a request of a known layout (or,
for a function whose layout Modbus leaves open, the shortest run its CRC closes) starts and is
closed by its CRC. Bytes before it (line noise, the rest of a damaged or cut-off frame) are
dropped, so a valid frame after noise is answered, as a real slave resynchronises. Several frames
in one read are several requests, handed to the server one at a time (sim/pty.py paces them).
"""

from __future__ import annotations

import struct
from collections.abc import Collection

from sim.pdu_rules import exception_pdu, refusal

_MAX_FRAME = 256  # RTU ADU limit; more without a valid frame is noise


def _crc_step(crc: int, byte: int) -> int:
    crc ^= byte
    for _ in range(8):
        crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def crc16(frame: bytes) -> bytes:
    """The Modbus RTU CRC, low byte first."""
    crc = 0xFFFF
    for b in frame:
        crc = _crc_step(crc, b)
    return struct.pack("<H", crc)


def _closed_length(buf: bytes) -> int:
    """The length of the shortest frame at the head of ``buf`` that its CRC closes (at least id,
    function and CRC), or 0: how a frame of a function whose layout we do not know is found, so
    a request that follows it at once is not taken for part of it. One pass over ``buf``."""
    crc = 0xFFFF
    for i in range(len(buf) - 2):
        crc = _crc_step(crc, buf[i])
        if i >= 1 and buf[i + 1] == crc & 0xFF and buf[i + 2] == crc >> 8:
            return i + 3
    return 0


def _exception(device_id: int, function: int, code: int) -> bytes:
    body = bytes((device_id,)) + exception_pdu(function, code)
    return body + crc16(body)


def _frame_length(buf: bytes) -> int | None:
    """The length of the request at the head of ``buf`` when its function fixes it; None when
    more bytes are needed; 0 for a function whose layout we do not know."""
    if len(buf) < 2:
        return None
    fc = buf[1]
    if fc in (1, 2, 3, 4, 5, 6):
        return 8
    if fc in (15, 16):
        return 9 + buf[6] if len(buf) >= 7 else None
    return 0


def _next_frame(buf: bytes) -> tuple[int, int] | None:
    """Where the first frame in ``buf`` that its CRC closes starts, and its length; None when
    there is none yet. Quadratic in the worst case, on at most two frames' worth of bytes."""
    for start in range(len(buf) - 3):
        head = buf[start:]
        n = _frame_length(head)
        if n is None:
            continue
        if n == 0:
            n = _closed_length(head[:_MAX_FRAME])
            if not n:
                continue
        if len(head) >= n and crc16(head[: n - 2]) == head[n - 2 : n]:
            return start, n
    return None


class RtuGate:
    """Feed it the master's bytes; it returns what goes on to the server and what is answered
    straight back to the master."""

    def __init__(self, device_ids: Collection[int]) -> None:
        self.device_ids = frozenset(device_ids)
        self._buf = b""

    def feed(self, data: bytes) -> tuple[list[bytes], bytes]:
        """The frames to hand to the server (one request each, in order) and what is answered
        straight back to the master."""
        self._buf += data
        forward: list[bytes] = []
        reply = b""
        while True:
            found = _next_frame(self._buf)
            if found is None:
                # Nothing closes yet: keep what may still become a frame, at most one frame's worth.
                self._buf = self._buf[-_MAX_FRAME:]
                break
            start, n = found
            frame, self._buf = self._buf[start : start + n], self._buf[start + n :]
            to_server, to_master = self._judge(frame)
            if to_server:
                forward.append(to_server)
            reply += to_master
        return forward, reply

    def _judge(self, frame: bytes) -> tuple[bytes, bytes]:
        device_id, fc = frame[0], frame[1]
        if device_id != 0 and device_id not in self.device_ids:
            return b"", b""
        broadcast = device_id == 0
        code = refusal(frame[1:-2])
        if code is None and broadcast and fc == 3:
            return b"", b""  # a broadcast read is meaningless: nobody answers, nothing to do
        if code is not None:
            return b"", b"" if broadcast else _exception(device_id, fc, code)
        return frame, b""  # pymodbus (broadcast_enable) applies a broadcast and does not answer
