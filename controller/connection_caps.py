"""Connections to one of the appliance's HTTP servers (the console, /metrics), counted: at most
``per_source`` open from one address and ``total`` open at all. A connection past the address's
cap is answered one 503 line and closed before aiohttp sees a byte of it, so a flood of sockets
costs the server a counter, not a request handler each.

At the total cap a new connection is not refused while a connection nobody has vouched for is
open: the oldest such (idle before busy) is closed to make room. A connection is vouched for once
it carries a signed-in person's request (``vouch``, at most ``per_account`` of one person's), so
idle or trickling connections from many addresses without an account, reconnecting as fast as
they are closed, only push each other out: the people signed in keep theirs, and a new one gets
in and signs in. Only when every open connection is vouched for is a new one refused.

The other bounds on a slow or idle client are aiohttp's own, set by the console: since aiohttp
3.14 ``keepalive_timeout`` also runs from the moment a connection opens and is not reset by a
trickle of bytes, so a client that has not sent a whole request line and headers by then is
closed (slowloris), and an idle keep-alive connection the same time after its last answer. TLS
handshakes have their own timeout (``ssl_handshake_timeout``); a request body is read under the
console's own timeout.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.web_runner import BaseSite

REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)


def _refusal(message: str) -> bytes:
    body = b'{"ok":false,"error":"' + message.encode() + b'"}'
    return REFUSED % (len(body), body)


class ConnectionCaps:
    def __init__(
        self,
        per_source: int,
        total: int,
        on_refused: Callable[[str, str], None],
        per_account: int = 32,
    ) -> None:
        self.per_source = per_source
        self.total = total
        self.per_account = per_account
        self.on_refused = on_refused
        self.open: collections.Counter[str] = collections.Counter()
        self.refused = 0
        self.evicted = 0
        # Connections nobody vouched for, oldest first, and whether each is in a request now.
        self._anonymous: collections.OrderedDict[_Counted, bool] = collections.OrderedDict()
        self._vouched: dict[_Counted, str] = {}  # the signed-in person each carried
        self._by_account: collections.Counter[str] = collections.Counter()

    def count(self) -> int:
        return sum(self.open.values())

    def admit(self, conn: _Counted, source: str) -> bytes | None:
        """None (and counted) when a connection from ``source`` may open; else the refusal."""
        if self.open[source] >= self.per_source:
            why = "too many connections from your address"
        elif self.count() >= self.total and not self._evict():
            why = "the console has too many connections"
        else:
            self.open[source] += 1
            self._anonymous[conn] = False
            return None
        self.refused += 1
        self.on_refused(source, why)
        return _refusal(why)

    def _evict(self) -> bool:
        """Close the oldest connection nobody vouched for (an idle one first); whether there was one."""
        victim = next((c for c, busy in self._anonymous.items() if not busy), None)
        if victim is None:
            victim = next(iter(self._anonymous), None)
        if victim is None:
            return False
        self.evicted += 1
        victim.drop()
        return True

    def busy(self, conn: _Counted, busy: bool) -> None:
        """``conn`` is (or no longer is) in a request: an idle one is closed first at the cap."""
        if conn in self._anonymous:
            self._anonymous[conn] = busy

    def vouch(self, conn: _Counted, account: str) -> None:
        """``conn`` carried a request of signed-in ``account``: it is kept at the cap (up to
        ``per_account`` of one person's connections; past that it stays as anyone's)."""
        if conn not in self._anonymous or self._by_account[account] >= self.per_account:
            return
        del self._anonymous[conn]
        self._vouched[conn] = account
        self._by_account[account] += 1

    def leave(self, conn: _Counted, source: str) -> None:
        self._anonymous.pop(conn, None)
        account = self._vouched.pop(conn, None)
        if account is not None:
            self._by_account[account] -= 1
            if self._by_account[account] <= 0:
                del self._by_account[account]
        self.open[source] -= 1
        if self.open[source] <= 0:
            del self.open[source]


class _Counted(asyncio.Protocol):
    """aiohttp's request handler behind the caps (it sees nothing of a refused connection)."""

    def __init__(self, caps: ConnectionCaps, inner: asyncio.Protocol) -> None:
        self.caps = caps
        self.inner = inner
        self.source: str | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer: Any = transport.get_extra_info("peername")
        source = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        assert isinstance(transport, asyncio.Transport)
        refusal = self.caps.admit(self, source)
        if refusal is not None:
            transport.write(refusal)
            transport.close()
            return
        self.source = source
        self.transport = transport
        self.inner.connection_made(transport)

    def drop(self) -> None:
        """Closed to make room (``ConnectionCaps._evict``): uncounted now, aborted at once."""
        if self.source is not None:
            self.caps.leave(self, self.source)
            self.source = None
            if self.transport is not None:
                self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.source is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.source is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.source is not None:
            self.caps.leave(self, self.source)
            self.source = None
        if self.transport is not None:
            self.transport = None
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.source is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.source is not None:
            self.inner.resume_writing()


def counted(transport: asyncio.BaseTransport | None) -> _Counted | None:
    """The counted connection a request came on (None for one the caps never saw)."""
    protocol = transport.get_protocol() if transport is not None else None
    return protocol if isinstance(protocol, _Counted) else None


class CappedSite(BaseSite):
    """aiohttp's TCPSite with every connection counted by ``caps`` (and TLS when given)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        caps: ConnectionCaps,
        *,
        ssl_context: ssl.SSLContext | None = None,
        handshake_timeout: float = 10.0,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=512)
        self.host, self.port, self.caps, self.handshake_timeout = host, port, caps, handshake_timeout

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self.host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        caps = self.caps

        def protocol() -> asyncio.Protocol:
            return _Counted(caps, server())

        self._server = await asyncio.get_running_loop().create_server(
            protocol,
            self.host,
            self.port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            ssl_handshake_timeout=self.handshake_timeout if self._ssl_context else None,
        )
