"""The archive's NATS client reads message headers its own, faster way
(controller/archive/jetstream.py: ArchiveClient): the same dict as nats-py's reader, whatever the
block holds (every event delivered carries the table's Nats-Msg-Id)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from controller.archive.jetstream import ArchiveClient

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
