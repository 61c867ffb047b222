"""The people signed in at the console: the users file as it is now, their sessions (kept on disk
beside the journal, controller/console/sessions.py), the session a request carries, and
``GET /api/session`` (who is signed in here, the CSRF token, the actions the role may take).

The users file is re-read when it changes; the sessions of everyone removed from it, or given
another role or password, end there and then. A request with no live session is answered 401.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import structlog
from aiohttp import web

from controller import actions
from controller.connection_caps import ConnectionCaps, counted
from controller.console.sessions import Session, Sessions
from controller.console.state import SignedFile
from controller.console.users import User, load_users
from controller.errors import ConfigError

COOKIE = "tablectl_session"


def file_stamp(path: Path) -> tuple[int, int] | None:
    """What tells a changed users file: its modification time and size (None when unreadable)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class People:
    def __init__(
        self,
        users_path: Path,
        users: dict[str, User],
        stamp: tuple[int, int] | None,
        key: bytes,
        sessions_path: Path,
        clock: Callable[[], float],
        caps: ConnectionCaps,
        wake: Callable[[], None],
    ) -> None:
        """``users``: the users file as read at ``stamp``. ``wake``: every stream looks at the
        display again (who is signed in is on the floor's)."""
        self.users_path = users_path
        self._users = users
        self._users_stamp = stamp
        self.clock = clock
        self.caps = caps
        self._wake = wake
        self.log = structlog.get_logger("tablectl.console")
        self.sessions = Sessions(key, clock)
        self.file = SignedFile(sessions_path, key, "sessions", self.sessions.dump)
        self.changes = 0  # changes of who is signed in (the floor's list; console's loop only)

    def users(self) -> dict[str, User]:
        """The users file as it is now (re-read when it changed; a broken edit keeps the last).
        When it changed, the sessions of everyone removed, or given another role or password,
        end there and then (and on disk)."""
        stamp = file_stamp(self.users_path)
        if stamp != self._users_stamp:
            try:
                self._users = load_users(self.users_path)
                self._users_stamp = stamp
            except ConfigError as e:
                self.log.error("users_file_refused", error=str(e))
            else:
                if self.sessions.keep_only(self._users):
                    self.ended()
        return self._users

    def keep_only_users(self) -> None:
        """At start, after the sessions are restored: only those still standing for their person."""
        self.sessions.keep_only(self._users)

    def changed(self) -> None:
        """Who is signed in changed: the floor console shows it, a revoked stream ends."""
        self.changes += 1
        self._wake()

    def ended(self) -> None:
        """Sessions ended by the console itself (not by a sign-out): saved in the background."""
        self.file.changed()
        asyncio.get_running_loop().create_task(self.file.save())
        self.changed()

    def session(self, request: web.Request) -> Session:
        """The request's live session, or 401. A person removed from the users file, or given
        another role or password, is signed out."""
        token = request.cookies.get(COOKIE, "")
        session = self.sessions.get(token)
        if session is None:
            raise web.HTTPUnauthorized(reason="not signed in")
        if not session.still_for(self.users().get(session.user), self.clock()):
            if self.sessions.end(token):
                self.ended()
            raise web.HTTPUnauthorized(reason="not signed in")
        self.vouch(request, session.user)
        return session

    def vouch(self, request: web.Request, user: str) -> None:
        """The connection carried a signed-in person's request: kept when the console is full."""
        conn = counted(request.transport)
        if conn is not None:
            self.caps.vouch(conn, user)

    async def info(self, request: web.Request) -> web.StreamResponse:
        """``GET /api/session``."""
        session = self.session(request)
        return web.json_response(
            {
                "ok": True,
                "user": session.user,
                "role": session.role,
                "csrf": self.sessions.csrf(request.cookies.get(COOKIE, "")),
                "actions": [
                    a.public()
                    for a in actions.ACTIONS.values()
                    if session.role in a.roles and not a.telemetry
                ],
            }
        )
