"""What a conformant Modbus TCP server does before it looks at its registers, in front of
pymodbus's TCP server (which answers `80 01` to a function it cannot decode or a quantity out of
range, answers coils and input registers from the same map, and fails with exception 04 on a unit
id it does not serve).

Per the Modbus Messaging on TCP/IP Implementation Guide V1.0b (4.4.1.2, 4.4.2.2) and the
Application Protocol V1.1b3, one frame (MBAP header, then the PDU) at a time:
- a frame whose protocol identifier is not 0 (Modbus) is discarded, unanswered;
- a length field outside 2-254 leaves no way to find the next frame: the connection is closed;
- unit identifier: a device that is alone on its address is addressed by that address, so the
  identifier means nothing to it. It answers 0xFF (the value the guide says a client uses for a
  server on TCP/IP), 0 (which the guide also accepts for a device addressed directly: on TCP, 0 is
  not a broadcast) and its own configured id (what a master set up from the device page sends).
  Several devices behind one address are told apart by their ids alone, as behind a gateway. Any
  other id is not answered: the device is not a gateway, so the gateway exceptions 0A/0B would be
  untrue, and answering would let a master configured for another unit act on this one;
- every other request is judged as on every transport (sim/pdu_rules.py): an undocumented
  function gets exception 01, a bad quantity or byte count exception 03. The reply echoes the
  transaction and unit identifiers;
- a request beyond the 16 a connection may have unanswered gets exception 06, server busy
  (guide 4.4.2.2: NumberMaxOfServerTransaction is 1 to 16); sim/modbus_server.py counts them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from sim.pdu_rules import exception_pdu, refusal

DIRECT_IDS: Final = frozenset({0, 0xFF})  # a device alone on its address (guide 4.4.1.2)
_HEADER: Final = 7  # transaction id (2), protocol id (2), length (2), unit id (1)
_LENGTH_MIN, _LENGTH_MAX = 2, 254  # unit id + function code, up to the 260-byte ADU


class TcpGate:
    """One connection's gate: feed it the master's bytes; it returns the frames that go on to the
    server and what is answered straight back. ``closed`` once the stream cannot be framed."""

    def __init__(self, device_ids: Collection[int]) -> None:
        ids = frozenset(device_ids)
        self.unit_ids = ids | DIRECT_IDS if len(ids) == 1 else ids
        self.closed = False
        self._buf = b""

    def feed(self, data: bytes) -> tuple[list[bytes], bytes]:
        """The whole frames that go on to the server, one by one, and the bytes answered."""
        if self.closed:
            return [], b""
        self._buf += data
        forward: list[bytes] = []
        reply = b""
        while len(self._buf) >= _HEADER:
            length = int.from_bytes(self._buf[4:6], "big")
            if not _LENGTH_MIN <= length <= _LENGTH_MAX:
                self.closed, self._buf = True, b""
                break
            if len(self._buf) < 6 + length:
                break
            frame, self._buf = self._buf[: 6 + length], self._buf[6 + length :]
            to_server, to_master = self._judge(frame)
            if to_server:
                forward.append(to_server)
            reply += to_master
        return forward, reply

    def _judge(self, frame: bytes) -> tuple[bytes, bytes]:
        protocol, unit, pdu = int.from_bytes(frame[2:4], "big"), frame[6], frame[7:]
        if protocol != 0 or unit not in self.unit_ids:
            return b"", b""
        code = refusal(pdu)
        return (frame, b"") if code is None else (b"", refused(frame, code))


def refused(frame: bytes, code: int) -> bytes:
    """The exception answer to one request frame: its transaction and unit ids, its function code
    with the high bit set, the exception code."""
    body = exception_pdu(frame[7], code)
    return frame[:4] + (1 + len(body)).to_bytes(2, "big") + frame[6:7] + body
