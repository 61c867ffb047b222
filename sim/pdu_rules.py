"""Which requests a simulated device refuses before its registers are looked at, and with what
exception (Modbus Application Protocol V1.1b3, 6.3, 6.12 and 7). Shared by the RTU gate
(sim/rtu_gate.py) and the TCP gate (sim/tcp_gate.py), so both transports refuse alike.

- A function the device pages do not document (anything but 3, read holding registers, and 16,
  write multiple registers) gets exception 01, illegal function: coils, discrete inputs and
  input registers (1, 2, 4) included, and codes Modbus itself does not define (0x41 → ``C1 01``).
- A read of 0 or more than 125 registers, a write of 0 or more than 123, or a request whose
  length or byte count does not match its quantity gets exception 03, illegal data value.

Addresses outside the map (exception 02) are pymodbus's check, against the map each device
serves; a command the model refuses gets 03 from sim/modbus_server.py.
"""

from __future__ import annotations

from typing import Final

FUNCTIONS: Final = frozenset({3, 16})  # docs/devices/: every profile is read with 3, written with 16
READ_MAX: Final = 125
WRITE_MAX: Final = 123
ILLEGAL_FUNCTION: Final = 0x01
ILLEGAL_DATA_VALUE: Final = 0x03
SERVER_BUSY: Final = 0x06


def refusal(pdu: bytes) -> int | None:
    """The exception code the device answers to this request PDU (function code first), or
    None when the request goes on to the device's registers."""
    fc = pdu[0]
    if fc not in FUNCTIONS:
        return ILLEGAL_FUNCTION
    quantity = int.from_bytes(pdu[3:5], "big") if len(pdu) >= 5 else 0
    if fc == 3:
        ok = len(pdu) == 5 and 1 <= quantity <= READ_MAX
    else:
        ok = len(pdu) >= 6 and 1 <= quantity <= WRITE_MAX and pdu[5] == 2 * quantity
        ok = ok and len(pdu) == 6 + pdu[5]
    return None if ok else ILLEGAL_DATA_VALUE


def exception_pdu(fc: int, code: int) -> bytes:
    """An exception response PDU: the function code with its high bit set, then the code."""
    return bytes(((fc | 0x80) & 0xFF, code))
