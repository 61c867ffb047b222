"""``async with session(client)``: aiomqtt's ``async with client``, without the stray
``Future exception was never retrieved`` a lost connection leaves behind.

aiomqtt 2.x records a broker that went away by setting an exception on a future of the client
(``_disconnected``). Only message iteration and a publish that fails at once ever read it; a
connection lost while neither is under way (a publish waiting for its PUBACK as the broker dies,
which is what Ctrl-C on a terminal does when the broker shares the process group, or a link idle
between reads) is left with the exception unread, and asyncio logs it when the future is
collected, often at exit. A cancel during the connect can leave the CONNACK future in the same
state. Both futures are read here once the block is left, and a disconnect still to come (the
client's socket can outlive a connect that was cancelled) is read when it lands. The loss itself
still surfaces as ``MqttError`` where aiomqtt raises it; nothing is swallowed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiomqtt


@contextlib.asynccontextmanager
async def session(client: aiomqtt.Client) -> AsyncIterator[aiomqtt.Client]:
    try:
        async with client:
            yield client
    finally:
        # Private attributes of aiomqtt 2.x (checked on 2.5); getattr so a later version that
        # renames them loses only this clean-up.
        for name in ("_connected", "_disconnected"):
            future = getattr(client, name, None)
            if isinstance(future, asyncio.Future):
                mark_retrieved(future)


def mark_retrieved(future: asyncio.Future[None]) -> None:
    """Read the future's exception now if it has one, or when it gets one."""
    if future.done():
        _read(future)
    else:
        future.add_done_callback(_read)


def _read(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
