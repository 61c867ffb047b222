"""paho's client with a read buffer (one recv() for many messages instead of four or more each)
and a cheaper PUBLISH.

paho reads a packet's first byte, each byte of its length and then its body with separate
``recv`` calls, after one ``select`` per packet. At thousands of small messages a second those
system calls are most of what the archive worker's MQTT thread does (bench/archive_load.py). This
subclass serves paho's small reads from a 64 KiB buffer, and keeps reading packets while the
buffer holds any (``select`` cannot see bytes already taken off the socket).

paho decodes an MQTT 5 PUBLISH's properties into a ``Properties`` object, which costs more than
the rest of the packet (some 45 µs a message on a loaded two-core machine; py-spy put it at a
fifth of the MQTT thread's samples). The events reach the worker with none (the tables publish
MQTT 3.1.1, and the worker asks for no subscription identifier), so a QoS 1 PUBLISH whose
property length is 0 is decoded here as paho would, with ``properties`` None; anything else goes
through paho's own decoding.

It overrides three of paho's internal methods, which is why pyproject.toml pins paho-mqtt below
3; tests/archive exercise it through every delivery test, and test_mqtt_publish_decoding holds
the short cut to paho's own result.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode, MQTTProtocolVersion

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

    def _handle_publish(self) -> MQTTErrorCode:
        command: int = self._in_packet["command"]
        packet: bytes | bytearray = self._in_packet["packet"]
        # [MQTT 5.0 3.3.1, 3.3.2]: QoS in bits 1-2; topic (2-byte length), packet id, then the
        # properties' length (a variable byte integer: one 0 byte when there are none).
        if self._protocol != MQTTProtocolVersion.MQTTv5 or (command & 0x06) >> 1 != 1 or len(packet) < 2:
            return super()._handle_publish()
        at = 2 + struct.unpack_from("!H", packet)[0]
        if len(packet) < at + 3 or packet[at + 2] != 0:
            return super()._handle_publish()
        message = mqtt.MQTTMessage(mid=struct.unpack_from("!H", packet, at)[0], topic=bytes(packet[2:at]))
        message.dup = command & 0x08 != 0
        message.qos = 1
        message.retain = command & 0x01 != 0
        message.payload = bytes(packet[at + 3 :])
        message.timestamp = time.monotonic()  # paho's clock for it
        self._handle_on_message(message)
        if self._manual_ack:
            return MQTTErrorCode.MQTT_ERR_SUCCESS
        return self._send_puback(message.mid)


__all__ = ["BufferedClient"]
