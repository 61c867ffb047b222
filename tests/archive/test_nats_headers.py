"""The archive's NATS client reads message headers its own, faster way
(controller/archive/jetstream.py: ArchiveClient): the same dict as nats-py's reader, whatever the
block holds (every event delivered carries the table's Nats-Msg-Id); and a message's stream
sequence is read from its ack subject as nats-py reads it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client
from nats.aio.msg import Msg

from controller.archive.jetstream import ArchiveClient, stream_seq

# Header blocks built of the pieces that matter: names, colons, every ASCII whitespace, line ends,
# bytes beyond ASCII and invalid UTF-8.
pieces = st.sampled_from(
    [
        b"Nats-Msg-Id",
        b"Status",
        b"a",
        b"Z9",
        b":",
        b": ",
        b" ",
        b"\t",
        b"\x0b",
        b"\x0c",
        b"\x1c",
        b"\x1f",
        b"\r",
        b"\n",
        b"\r\n",
        b"\r\n\r\n",
        b"\xc3\xa9",
        b"\xff",
        b"v.1.2",
        b"",
        b"\x00",
    ]
)
blocks = st.lists(pieces, max_size=14).map(b"".join) | st.binary(max_size=40)


@settings(max_examples=1000, deadline=None)
@given(blocks)
def test_headers_read_as_nats_py_reads_them(raw: bytes) -> None:
    assert ArchiveClient._parse_header_lines(raw) == Client._parse_header_lines(raw)


def test_the_table_s_message_id_is_read() -> None:
    raw = b"Nats-Msg-Id: floor.dab-01.17.0123abcd\r\n\r\n"
    assert ArchiveClient._parse_header_lines(raw) == {"Nats-Msg-Id": "floor.dab-01.17.0123abcd"}


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.TABLECTL_EVENTS.archive.1.4711.17.1800000000000000000.3",
        "$JS.ACK._.ACCOUNTHASH.TABLECTL_EVENTS.archive.2.4711.18.1800000000000000000.0.x1y2",
        "$JS.ACK.hub.ACCOUNTHASH.TABLECTL_EVENTS.archive.1.4711.19.1800000000000000000.5.tok",
    ],
)
def test_a_message_s_stream_sequence_is_read_from_its_ack_subject(reply: str) -> None:
    """The worker puts what its pulls brought back in the stream's order by this (a backlog comes
    to the pulls in turn, interleaved): the sequence nats-py's own metadata says."""
    msg = Msg(ArchiveClient(), subject="tablectl.f.t.events", reply=reply, data=b"{}")
    assert stream_seq(reply) == msg.metadata.sequence.stream == 4711


@pytest.mark.parametrize("reply", [None, "", "_INBOX.abc", "$JS.ACK.x.y.1.notanumber.2.3.4"])
def test_a_message_without_a_stream_sequence_sorts_first(reply: str | None) -> None:
    assert stream_seq(reply) == 0
