"""The table's incoming MQTT messages, with a cap on the floor commands waiting to be handled.

aiomqtt's own bounded queue discards what does not fit with one warning line each: a flood of
2,000 commands lost 995 without a word to their senders and wrote 997 log lines. Here the queue
itself is unbounded for the table's own status messages, and commands past ``COMMAND_QUEUE``
waiting are refused instead: each gets a result on its result topic (docs/mqtt.md) saying the
queue was full, keeping the request's ``id``; they are counted (``tablectl_commands_refused``);
and a burst of refusals is one log line, written when the burst is over, with its count.

A refusal keeps only the command's name, id and who (a few dozen bytes), at most
``MAX_REFUSALS`` of them waiting to be answered: past that a flood is counted and said in the
burst's line as unanswered, so memory stays bounded whatever arrives.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass
from typing import Any

import aiomqtt
from structlog.typing import FilteringBoundLogger

from controller.bounded import InputRefused, load_json
from controller.ids import TEXT, matches
from controller.telemetry.commands import MAX_COMMAND_BYTES

COMMAND_QUEUE = 1000  # floor commands waiting to be handled, at most
MAX_REFUSALS = 10_000  # refusals waiting to be published, at most
QUIET_S = 1.0  # a burst of refusals is over once none came for this long


@dataclass(frozen=True, slots=True)
class Refusal:
    name: str
    request_id: str | None
    who: str | None


class Overflow:
    """Commands past the queue's cap: refusals to publish, counted, logged once per burst."""

    def __init__(self, command_prefix: str, log: FilteringBoundLogger, cap: int = COMMAND_QUEUE) -> None:
        self.prefix, self.log, self.cap = command_prefix, log, cap
        self.waiting: collections.deque[Refusal] = collections.deque()
        self.refused = 0  # all refusals since the process started (the metric)
        self.unanswered = 0  # refused past MAX_REFUSALS waiting: counted, no result
        self.burst = 0  # refused in the burst under way
        self.wake = asyncio.Event()
        self.quiet = asyncio.Event()  # set when a burst's line is written (tests wait on it)

    def queue_type(self) -> type[asyncio.Queue[aiomqtt.Message]]:
        """The queue class for aiomqtt's ``queue_type``: commands past the cap are refused."""
        overflow = self

        class Inbox(asyncio.Queue[aiomqtt.Message]):
            def put_nowait(self, item: aiomqtt.Message) -> None:
                if self.qsize() >= overflow.cap and overflow.refuse(item):
                    return
                super().put_nowait(item)

        return Inbox

    def refuse(self, message: aiomqtt.Message) -> bool:
        """True when ``message`` is a command, refused (its result to be published)."""
        topic = message.topic.value
        name = topic[len(self.prefix) :] if topic.startswith(self.prefix) else ""
        if not name or "/" in name:
            return False  # not a command: the table's own status, kept whatever the queue holds
        self.refused += 1
        self.burst += 1
        self.quiet.clear()
        if len(self.waiting) >= MAX_REFUSALS:
            self.unanswered += 1
        else:
            self.waiting.append(Refusal(name, *_id_and_who(message.payload)))
        self.wake.set()
        return True

    def reason(self) -> dict[str, Any]:
        return {
            "ok": False,
            "error": f"refused: the table's command queue is full ({self.cap} waiting); send it again later",
        }

    def said(self) -> None:
        """The burst is over: one line with its count."""
        if self.burst:
            self.log.warning(
                "telemetry.commands_refused",
                count=self.burst,
                unanswered=self.unanswered,
                why=f"the command queue was full ({self.cap} waiting)",
            )
        self.burst = self.unanswered = 0
        self.quiet.set()


def _id_and_who(payload: object) -> tuple[str | None, str | None]:
    """The request's ``id`` and ``who``, when they can be read: only what its result keeps (the
    command itself is not checked, let alone handled, so a flood costs a JSON parse each)."""
    body = bytes(payload) if isinstance(payload, bytes | bytearray) else b""
    try:
        doc = load_json(body, max_bytes=MAX_COMMAND_BYTES)
    except InputRefused:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    request_id, who = doc.get("id"), doc.get("who")
    return (
        request_id if matches(TEXT, request_id) else None,
        who if matches(TEXT, who) else None,
    )
