"""paho's client with a read buffer: one recv() for many messages instead of four or more each.

paho reads a packet's first byte, each byte of its length and then its body with separate
``recv`` calls, after one ``select`` per packet. At thousands of small messages a second those
system calls are most of what the archive worker's MQTT thread does (bench/archive_load.py). This
subclass serves paho's small reads from a 64 KiB buffer, and keeps reading packets while the
buffer holds any (``select`` cannot see bytes already taken off the socket).

It overrides two of paho's internal methods, which is why pyproject.toml pins paho-mqtt below 3;
tests/archive exercise it through every delivery test.
"""

from __future__ import annotations

from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

_CHUNK = 65536


class BufferedClient(mqtt.Client):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._buffered_sock: object = None
        self._buffer = bytearray()

    def _sock_recv(self, bufsize: int) -> bytes:
        if self._sock is not self._buffered_sock:
            # A new connection: bytes left from the old socket mean nothing on this one.
            self._buffered_sock = self._sock
            self._buffer.clear()
        if not self._buffer:
            data = super()._sock_recv(max(bufsize, _CHUNK))
            if not data:
                return data  # the peer closed: paho takes b"" as the connection lost
            if len(data) <= bufsize:
                return data
            self._buffer += data
        out = bytes(self._buffer[:bufsize])
        del self._buffer[:bufsize]
        return out

    def loop_read(self, max_packets: int = 1) -> MQTTErrorCode:
        rc = super().loop_read(max_packets)
        while rc == MQTTErrorCode.MQTT_ERR_SUCCESS and self._buffer and self._sock is self._buffered_sock:
            rc = super().loop_read(max_packets)
        return rc


__all__ = ["BufferedClient"]
