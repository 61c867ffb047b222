"""The dealer display as each person sees it: ``GET /api/display`` once, ``GET /api/events`` live
as server-sent events, until sign-out or shutdown.

The public display is built on the table's side at most once per change however many clients
ask (they share the one build); the floor's also lists who is signed in. Live streams are capped
per session, per person and per role (controller/console/shares.py), so one account signed in
many times cannot take the floor's streams; a client that reads none of its stream for
``STREAM_WRITE_S`` is dropped, and an event every ``HEARTBEAT_S`` ends a dead client's stream
and tells a page within 2 s that the appliance is gone.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from controller import actions
from controller.console.http_rules import error
from controller.console.people import COOKIE, People
from controller.console.sessions import Session, token_id
from controller.console.shares import Shares
from controller.console.table_link import TableLink

MAX_STREAMS_PER_SESSION = 4  # live event streams for one session (a page holds one)
MAX_STREAMS_PER_ACCOUNT = 8  # for one person however many times they sign in (two screens' worth)
MAX_STREAMS = 64  # live event streams in all: each role has its share (shares.py), 32 of 2 roles
STREAM_WRITE_S = 30.0  # a client that reads none of its stream for this long is dropped
# An SSE event this often, so a dead client's stream ends and a page knows within 2 s that the
# appliance is gone (a comment would not reach the page's script).
HEARTBEAT_S = 1.0


class Streams:
    def __init__(
        self, table: TableLink, people: People, clock: Callable[[], float], headers: dict[str, str]
    ) -> None:
        """``headers``: the console's security headers, sent with each stream."""
        self.table = table
        self.people = people
        self.clock = clock
        self.headers = headers
        self.per_session: collections.Counter[str] = collections.Counter()  # live streams per session id
        self.shares = Shares(MAX_STREAMS, MAX_STREAMS_PER_ACCOUNT)  # per person and role
        self._public: tuple[int, dict[str, Any]] | None = None
        self._building: asyncio.Future[tuple[int, dict[str, Any]]] | None = None
        self._closing = False
        self._tick: asyncio.Event | None = None

    def open(self) -> None:
        """On the console's loop, before it serves."""
        self._tick = asyncio.Event()

    def wake(self) -> None:
        """On the console's loop: every stream looks at the display again."""
        if self._tick is not None:
            self._tick.set()
            self._tick = asyncio.Event()

    def close(self) -> None:
        """Every stream ends (they would hold the server's shutdown for its whole timeout)."""
        self._closing = True
        self.wake()

    async def _public_display(self) -> dict[str, Any]:
        """The public display as of the latest change when asked: built on the table's loop at
        most once per change however many clients ask (they share the one build)."""
        want = self.table.version
        while self._public is None or self._public[0] < want:
            if self._building is None or self._building.done():
                self._building = asyncio.ensure_future(self.table.public())
            # Applied here, not in a done-callback: awaiting a finished future does not yield,
            # so a callback not yet run would leave this loop spinning.
            built = await asyncio.shield(self._building)
            if self._public is None or built[0] > self._public[0]:
                self._public = built
        return self._public[1]

    async def view(self, session: Session) -> dict[str, Any]:
        """The display as this person sees it: the floor also sees who is signed in."""
        body = dict(await self._public_display())
        body["signed_in"] = {"user": session.user, "role": session.role}
        if session.role == actions.FLOOR:
            now = self.clock()
            people = sorted({(s.user, s.role) for s in self.people.sessions if s.expires > now})
            body["people"] = [{"user": u, "role": r} for u, r in people]
        return body

    async def display(self, request: web.Request) -> web.StreamResponse:
        """``GET /api/display``."""
        return web.json_response(await self.view(self.people.session(request)))

    async def events(self, request: web.Request) -> web.StreamResponse:
        """``GET /api/events``: the display now and after every change, until sign-out or
        shutdown. At most MAX_STREAMS_PER_SESSION live for one session, MAX_STREAMS_PER_ACCOUNT for
        one person, and each role its share of MAX_STREAMS: one account signed in many times
        cannot take the floor's streams."""
        session = self.people.session(request)
        sid = token_id(request.cookies.get(COOKIE, ""))
        if self.per_session[sid] >= MAX_STREAMS_PER_SESSION:
            return error(429, f"at most {MAX_STREAMS_PER_SESSION} live streams for one sign-in")
        why = self.shares.take(session.user, session.role)
        if why is not None:
            return error(429, f"live streams: {why}; close another page")
        self.per_session[sid] += 1
        try:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **self.headers})
            await response.prepare(request)
            # The browser went away, or stopped reading for STREAM_WRITE_S: the stream ends.
            with contextlib.suppress(ConnectionResetError, TimeoutError):
                await self._stream(request, response)
            return response
        finally:
            self.shares.give_back(session.user, session.role)
            self.per_session[sid] -= 1
            if self.per_session[sid] <= 0:
                del self.per_session[sid]

    async def _write(self, response: web.StreamResponse, data: bytes) -> None:
        async with asyncio.timeout(STREAM_WRITE_S):
            await response.write(data)

    async def _stream(self, request: web.Request, response: web.StreamResponse) -> None:
        version = (-1, -1)
        while not self._closing:
            try:
                session = self.people.session(request)
            except web.HTTPUnauthorized:
                await self._write(response, b"event: signed_out\ndata: {}\n\n")
                break
            if version != (self.table.version, self.people.changes):
                version = (self.table.version, self.people.changes)
                data = json.dumps(await self.view(session), separators=(",", ":"))
                await self._write(response, f"event: display\ndata: {data}\n\n".encode())
                continue
            tick = self._tick
            assert tick is not None
            try:
                await asyncio.wait_for(tick.wait(), HEARTBEAT_S)
            except TimeoutError:
                await self._write(response, b"event: alive\ndata: {}\n\n")
