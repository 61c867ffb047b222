"""The table console over HTTP (aiohttp, on an event loop of its own; docs/console.md).

    GET  /, /floor           the dealer display and the floor console (static page + script)
    POST /api/login          {"user", "password"} -> session cookie; sign-in attempts rate-limited
    POST /api/logout
    GET  /api/session        who is signed in here, the CSRF token, the actions the role may take
    GET  /api/display        the dealer display as JSON (controller/console/display.py)
    GET  /api/events         the same, live, as server-sent events
    POST /api/actions/<name> an action of the one allow-list, as the signed-in person

The console never runs on the table's event loop: every request, TLS handshake, stream and
password hash is handled on the console's own loop, in a process of its own under ``tablectl
run`` (``serve``; controller/console/process.py) or on a thread beside an in-process table
(``start``; the tests). It reaches the table only through a ``TableLink``
(controller/console/table_link.py): the public display, at most one build per change however
many clients ask, and the supervisor's commands.

Defences: a request must name the console by IP address, ``localhost`` or a name the operator
allowed (``[console] allow_hosts``), else 421, so a DNS-rebinding site gets nothing. The session
cookie is HttpOnly, SameSite=Strict, expires, and is Secure under TLS. Every POST must be JSON (an
HTML form on another site cannot send that without a CORS preflight, which is never granted), must
come from this origin when the browser says where it came from, and once signed in must carry the
session's CSRF token in ``X-CSRF-Token``. Bodies are at most 8 KiB and read within ``BODY_S``.
Wrong guesses are counted per address (and per name at an address, never per name alone) before
the password is checked, and the checks running and waiting are bounded per name and in all
(controller/console/sign_ins.py).
Connections are capped per address and in total (controller/connection_caps.py), live streams
per session, per person and per role (controller/console/shares.py). Every error is one line of
JSON; a bug is logged by its type and answered "internal error", never a traceback.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import hmac
import json
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog
from aiohttp import web

from controller import actions
from controller.addresses import answers_for, host_name
from controller.bounded import InputRefused, load_json
from controller.connection_caps import CappedSite, ConnectionCaps, counted
from controller.console.sessions import SESSION_S, Session, Sessions, token_id
from controller.console.shares import Shares
from controller.console.sign_ins import Busy, PasswordChecks, SignInAttempts, keys
from controller.console.state import SignedFile, StateRefused, load_key, state_paths
from controller.console.table_link import LocalTable, TableLink, journal_of
from controller.console.users import MAX_PASSWORD, User, hash_password, load_users, verify_password
from controller.errors import ConfigError
from controller.ids import USER_NAME, matches
from controller.supervisor.supervisor import Supervisor

COOKIE = "tablectl_session"
MAX_BODY = 8 * 1024
BODY_S = 10.0  # a request body (at most 8 KiB) arrives within this, or 408
IDLE_S = 15.0  # a connection sends a whole request within this of opening or of its last answer
HANDSHAKE_S = 10.0  # a TLS handshake completes within this
MAX_PER_SOURCE = 64  # open connections from one address (a browser opens 6 or so; a proxy more)
MAX_CONNECTIONS = 2048  # open connections in all (at the cap, one nobody vouched for makes room)
MAX_CONNECTIONS_PER_ACCOUNT = 32  # one signed-in person's connections kept at the cap
MAX_STREAMS_PER_SESSION = 4  # live event streams for one session (a page holds one)
MAX_STREAMS_PER_ACCOUNT = 8  # for one person however many times they sign in (two screens' worth)
MAX_STREAMS = 64  # live event streams in all: each role has its share (shares.py), 32 of 2 roles
STREAM_WRITE_S = 30.0  # a client that reads none of its stream for this long is dropped
REFUSAL_LOG_S = 60.0  # refused connections are logged once a minute per address, with a count
MAX_REFUSAL_SOURCES = 1024
HASHING = 2  # password hashes checked at once (16 MiB and one core each)
HASHING_PER_NAME = 1  # of those, for one name: guesses at one name leave the others a check
# One more, only for a person at their own address (signed in from there before): a queue of
# guesses, from other addresses, cannot keep them waiting.
HASHING_OWN = 1
WAITING_PER_NAME = 8  # checks waiting for one name (and for the own lane); past it, 503
WAITING = 32  # checks waiting in all; past it, 503 with Retry-After (never a lock)
BUSY_RETRY_S = 2
# An SSE event this often, so a dead client's stream ends and a page knows within 2 s that the
# appliance is gone (a comment would not reach the page's script).
HEARTBEAT_S = 1.0
HSTS = "max-age=31536000"
STATIC = Path(__file__).with_name("static")
RESULT_KEYS = ("ok", "error", "events", "seq")
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_DUMMY_HASH = hash_password("not anyone's password", salt=b"\0" * 16)

CONSOLE: web.AppKey[Console] = web.AppKey("console")


class Console:
    def __init__(
        self,
        table: Supervisor | TableLink,
        users: Path,
        *,
        allow_hosts: tuple[str, ...] = (),
        clock: Callable[[], float] = time.time,
        tls: ssl.SSLContext | None = None,
        state: Path | None = None,
    ) -> None:
        """``state``: where the console keeps its key, sessions and sign-in attempts (named as for
        a journal there; default: beside the supervisor's journal). ``clock``: wall time, as
        sessions and attempts outlive a restart."""
        self.table: TableLink = LocalTable(table) if isinstance(table, Supervisor) else table
        self.allow_hosts = frozenset(host_name(h) for h in allow_hosts)
        self.users_path = users
        self.clock = clock
        self.tls = tls
        self.headers = {**HEADERS, **({"Strict-Transport-Security": HSTS} if tls is not None else {})}
        self.log = structlog.get_logger("tablectl.console")
        self._users: dict[str, User] = load_users(users)  # a bad or missing file stops `run` at once
        self._users_stamp = self._stamp()
        key_path, sessions_path, attempts_path = state_paths(journal_of(self.table, state))
        try:
            key = load_key(key_path)
        except StateRefused as e:
            raise ConfigError(str(e)) from None
        self.sessions = Sessions(key, clock)
        self.attempts = SignInAttempts(clock)
        self._sessions_file = SignedFile(sessions_path, key, "sessions", self.sessions.dump)
        self._attempts_file = SignedFile(attempts_path, key, "sign-ins", self.attempts.dump)
        for file, restore in (
            (self._sessions_file, self.sessions.restore),
            (self._attempts_file, self.attempts.restore),
        ):
            try:
                restore(file.load())
            except StateRefused as e:  # start without them: everyone signs in again
                self.log.error("console_state_refused", error=str(e))
        self.sessions.keep_only(self._users)
        self._refusals: collections.OrderedDict[str, tuple[float, int]] = collections.OrderedDict()
        self.caps = ConnectionCaps(
            MAX_PER_SOURCE, MAX_CONNECTIONS, self._refused, per_account=MAX_CONNECTIONS_PER_ACCOUNT
        )
        self.streams: collections.Counter[str] = collections.Counter()  # live streams per session id
        self.stream_shares = Shares(MAX_STREAMS, MAX_STREAMS_PER_ACCOUNT)  # per person and role
        self._signed_in = 0  # changes of who is signed in (the floor's list; console's loop only)
        self._public: tuple[int, dict[str, Any]] | None = None
        self._building: asyncio.Future[tuple[int, dict[str, Any]]] | None = None
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tick: asyncio.Event | None = None
        self.checks = PasswordChecks(HASHING, HASHING_PER_NAME, HASHING_OWN, WAITING_PER_NAME, WAITING)
        self._busy_logged: tuple[float, int] = (-REFUSAL_LOG_S, 0)  # when, and refused since
        self.bound: tuple[str, int] = ("", 0)
        self.app = self._build()

    # ------------------------------------------------------------------ lifecycle
    def _build(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._guard])
        app[CONSOLE] = self
        r = app.router
        r.add_get("/", self._page("dealer.html"))
        r.add_get("/floor", self._page("floor.html"))
        r.add_get("/static/console.js", self._file("console.js", "text/javascript"))
        r.add_get("/static/console.css", self._file("console.css", "text/css"))
        r.add_post("/api/login", self.login)
        r.add_post("/api/logout", self.logout)
        r.add_get("/api/session", self.session_info)
        r.add_get("/api/display", self.display)
        r.add_get("/api/events", self.events)
        r.add_post("/api/actions/{name}", self.action)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on ``host:port`` (0: a free port) from the console's own thread; the address
        actually bound. Called on the table's loop, which the console then leaves alone."""
        started: concurrent.futures.Future[tuple[str, int]] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._serve, args=(host, port, started), name="tablectl-console", daemon=True
        )
        self._thread.start()
        bound = await asyncio.wrap_future(started)
        self.table.attach(self._wake_threadsafe)
        self.log.info("console_listening", host=bound[0], port=bound[1], tls=self.tls is not None)
        return bound

    def _serve(self, host: str, port: int, started: concurrent.futures.Future[tuple[str, int]]) -> None:
        """The console's thread: its event loop, until stop()."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            try:
                bound = loop.run_until_complete(self._listen(host, port))
            except BaseException as e:
                started.set_exception(e)
                return
            started.set_result(bound)
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _listen(self, host: str, port: int) -> tuple[str, int]:
        self._tick = asyncio.Event()
        self._runner = web.AppRunner(
            self.app,
            access_log=None,
            shutdown_timeout=2.0,
            keepalive_timeout=IDLE_S,
            lingering_time=BODY_S,  # an unread body is drained at most this long, then closed
        )
        await self._runner.setup()
        site = CappedSite(
            self._runner, host, port, self.caps, ssl_context=self.tls, handshake_timeout=HANDSHAKE_S
        )
        await site.start()
        bound = self._runner.addresses[0]
        return str(bound[0]), int(bound[1])

    async def serve(self, host: str, port: int) -> tuple[str, int]:
        """Listen on ``host:port`` on the running loop (the console's own process); close()
        ends it."""
        self._loop = asyncio.get_running_loop()
        bound = self.bound = await self._listen(host, port)
        self.table.attach(self._wake)
        self.log.info("console_listening", host=bound[0], port=bound[1], tls=self.tls is not None)
        return bound

    async def close(self) -> None:
        """The end of serve(): streams ended, connections closed, the state files saved."""
        self.table.detach()
        await self._shutdown()

    async def stop(self) -> None:
        """Close every connection and end the console's thread (called on the table's loop)."""
        self.table.detach()
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already ended
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._shutdown(), loop))
            loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        self._loop = self._thread = None

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._sessions_file.save()
        await self._attempts_file.save()

    async def _on_shutdown(self, app: web.Application) -> None:
        # Open SSE streams would hold runner.cleanup() for its whole shutdown timeout: end them.
        self._closing = True
        self._wake()

    def _wake_threadsafe(self) -> None:
        """From the table's loop, after every change: a wake-up of the console's loop."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the console's loop is closing
                loop.call_soon_threadsafe(self._wake)

    def _people_changed(self) -> None:
        self._signed_in += 1
        self._wake()

    def _wake(self) -> None:
        """On the console's loop: every stream looks at the display again."""
        if self._tick is not None:
            self._tick.set()
            self._tick = asyncio.Event()

    def _refused(self, source: str, why: str) -> None:
        """One log line per address and minute however many connections it is refused (a flood
        of refusals must not become a flood of log lines); the line says how many."""
        now = time.monotonic()
        last, count = self._refusals.get(source, (-REFUSAL_LOG_S, 0))
        if now - last < REFUSAL_LOG_S:
            self._refusals[source] = (last, count + 1)
            return
        self.log.warning("console_connection_refused", remote=source, reason=why, refused=count + 1)
        self._refusals[source] = (now, 0)
        self._refusals.move_to_end(source)
        while len(self._refusals) > MAX_REFUSAL_SOURCES:
            self._refusals.popitem(last=False)

    def _busy(self) -> None:
        """A sign-in refused as too many wait for a password check: one log line a minute with
        a count, however many (a flood of refusals must not become a flood of log lines)."""
        now = time.monotonic()
        last, count = self._busy_logged
        if now - last < REFUSAL_LOG_S:
            self._busy_logged = (last, count + 1)
            return
        self.log.warning("login_busy", refused=count + 1)
        self._busy_logged = (now, 0)

    # ------------------------------------------------------------------ guards
    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        host = request.headers.get("Host")
        if host is None or not answers_for(host, self.allow_hosts):
            response: web.StreamResponse = _error(421, "this console answers to its address or allowed names")
            response.headers.update(self.headers)
            return response
        conn = counted(request.transport)
        if conn is not None:
            self.caps.busy(conn, True)  # at the cap, an idle connection is closed before this one
        try:
            response = await handler(request)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            response = _error(e.status, (e.reason or "refused").splitlines()[0])
        except Exception as e:  # a bug: logged by its type, never a traceback to the client
            self.log.error("console_failed", path=request.path, error=type(e).__name__)
            response = _error(500, "internal error")
        finally:
            if conn is not None:
                self.caps.busy(conn, False)
        if not response.prepared:
            response.headers.update(self.headers)
            if response.status == 408:
                response.force_close()  # the rest of a body that never came is not waited for
        return response

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self.users_path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def users(self) -> dict[str, User]:
        """The users file as it is now (re-read when it changed; a broken edit keeps the last).
        When it changed, the sessions of everyone removed, or given another role or password,
        end there and then (and on disk)."""
        stamp = self._stamp()
        if stamp != self._users_stamp:
            try:
                self._users = load_users(self.users_path)
                self._users_stamp = stamp
            except ConfigError as e:
                self.log.error("users_file_refused", error=str(e))
            else:
                if self.sessions.keep_only(self._users):
                    self._sessions_changed()
        return self._users

    def _sessions_changed(self) -> None:
        self._sessions_file.changed()
        asyncio.get_running_loop().create_task(self._sessions_file.save())
        self._people_changed()  # the floor console shows who is signed in; a revoked stream ends

    def _session(self, request: web.Request) -> Session:
        """The request's live session, or 401. A person removed from the users file, or given
        another role or password, is signed out."""
        token = request.cookies.get(COOKIE, "")
        session = self.sessions.get(token)
        if session is None:
            raise web.HTTPUnauthorized(reason="not signed in")
        if not session.still_for(self.users().get(session.user), self.clock()):
            if self.sessions.end(token):
                self._sessions_changed()
            raise web.HTTPUnauthorized(reason="not signed in")
        self._vouch(request, session.user)
        return session

    def _vouch(self, request: web.Request, user: str) -> None:
        """The connection carried a signed-in person's request: kept when the console is full."""
        conn = counted(request.transport)
        if conn is not None:
            self.caps.vouch(conn, user)

    @staticmethod
    def _same_origin(request: web.Request) -> None:
        """403 unless the browser says the request comes from this origin (or says nothing)."""
        origin = request.headers.get("Origin")
        # The host only: behind a TLS proxy the browser's origin is https:// and ours is http://.
        if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
            raise web.HTTPForbidden(reason="cross-site request refused")
        if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            raise web.HTTPForbidden(reason="cross-site request refused")

    @staticmethod
    async def _json(request: web.Request) -> dict[str, Any]:
        if request.content_type != "application/json":
            raise web.HTTPUnsupportedMediaType(reason="the body must be application/json")
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=request.content_length)
        try:
            async with asyncio.timeout(BODY_S):  # a body trickled a byte at a time holds nothing long
                body = await request.read()  # bounded by client_max_size
        except TimeoutError:
            raise web.HTTPRequestTimeout(reason=f"the body did not arrive within {BODY_S:.0f} s") from None
        if not body:
            return {}
        try:
            doc = load_json(body, max_bytes=MAX_BODY)
        except InputRefused as e:
            raise web.HTTPBadRequest(reason=f"the body: {e}") from None
        if not isinstance(doc, dict):
            raise web.HTTPBadRequest(reason="the body must be a JSON object")
        return doc

    # ------------------------------------------------------------------ pages
    @staticmethod
    def _page(name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        return Console._file(name, "text/html")

    @staticmethod
    def _file(name: str, content_type: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        body = (STATIC / name).read_bytes()

        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(body=body, content_type=content_type, charset="utf-8")

        return handler

    # ------------------------------------------------------------------ the API
    async def login(self, request: web.Request) -> web.StreamResponse:
        self._same_origin(request)
        doc = await self._json(request)
        name, password = doc.get("user"), doc.get("password")
        name_key = name if matches(USER_NAME, name) else None
        remote = str(request.remote)
        # Counted per address and per name at that address, never per name alone: nobody is
        # locked out by others' guesses. Counted before the hash is checked, in one step: a
        # burst from one address gets LIMIT checks, not one each.
        counts = keys(name_key, remote)
        wait, attempt = self.attempts.reserve(*counts)
        if wait > 0:
            known = name_key if name_key in self.users() else None
            self.log.warning("login_rate_limited", user=known, remote=request.remote)
            response = _error(429, f"too many failed sign-ins; try again in {int(wait) + 1} s")
            response.headers["Retry-After"] = str(int(wait) + 1)
            return response
        # The checks for one name, and in all, are bounded: past the queue, 503 and nothing
        # counted. At the person's own address (signed in from before) a lane of their own.
        own = name_key is not None and self.attempts.trusted(name_key, remote)
        try:
            turn = self.checks.admit(name_key or "", own)
        except Busy:
            self.attempts.release(attempt, *counts)
            self._busy()
            response = _error(503, f"too many sign-ins at once; try again in {BUSY_RETRY_S} s")
            response.headers["Retry-After"] = str(BUSY_RETRY_S)
            return response
        user = self.users().get(name_key) if name_key else None
        ok = False
        try:
            self._attempts_file.changed()
            await self._attempts_file.save()  # on disk before the hash: a restart does not forget it
            if isinstance(password, str) and len(password) <= MAX_PASSWORD:
                # A name that does not exist costs as much as a wrong password (no user probing).
                encoded = user.password if user is not None else _DUMMY_HASH
                async with turn:
                    ok = await asyncio.to_thread(verify_password, password, encoded) and user is not None
        finally:
            turn.leave()
        if not ok or user is None:
            # A name nobody has is not logged: it may be a password typed into the wrong field.
            self.log.warning("login_failed", user=user.name if user else None, remote=request.remote)
            return _error(401, "wrong name or password")
        self.attempts.release(attempt, *counts)
        self.attempts.trust(user.name, remote)
        self._attempts_file.changed()
        token, _ = self.sessions.new(user)
        self._vouch(request, user.name)
        self._sessions_file.changed()
        await self._sessions_file.save()
        await self._attempts_file.save()
        self.log.info("login", user=user.name, role=user.role)
        body = {"ok": True, "user": user.name, "role": user.role, "csrf": self.sessions.csrf(token)}
        response = web.json_response(body)
        response.set_cookie(
            COOKIE,
            token,
            max_age=SESSION_S,
            httponly=True,
            samesite="Strict",
            path="/",
            # Under the console's own TLS, or behind a TLS proxy, the cookie goes back over https
            # only. (A client that claims https without it only makes its own cookie unusable.)
            secure=self.tls is not None
            or request.secure
            or request.headers.get("X-Forwarded-Proto") == "https",
        )
        self._people_changed()  # the floor console shows who is signed in
        return response

    def _csrf(self, request: web.Request, session: Session) -> None:
        self._same_origin(request)
        want = self.sessions.csrf(request.cookies.get(COOKIE, ""))
        if not hmac.compare_digest(request.headers.get("X-CSRF-Token", ""), want):
            raise web.HTTPForbidden(reason="missing or wrong X-CSRF-Token")

    async def logout(self, request: web.Request) -> web.StreamResponse:
        session = self._session(request)
        self._csrf(request, session)
        self.sessions.end(request.cookies.get(COOKIE, ""))
        self._sessions_file.changed()
        await self._sessions_file.save()
        self.log.info("logout", user=session.user)
        response = web.json_response({"ok": True})
        response.del_cookie(COOKIE, path="/")
        self._people_changed()
        return response

    async def session_info(self, request: web.Request) -> web.StreamResponse:
        session = self._session(request)
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
            people = sorted({(s.user, s.role) for s in self.sessions if s.expires > now})
            body["people"] = [{"user": u, "role": r} for u, r in people]
        return body

    async def display(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(await self.view(self._session(request)))

    async def events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the display now and after every change, until sign-out or shutdown.
        At most MAX_STREAMS_PER_SESSION live for one session, MAX_STREAMS_PER_ACCOUNT for one
        person, and each role its share of MAX_STREAMS: one account signed in many times cannot
        take the floor's streams."""
        session = self._session(request)
        sid = token_id(request.cookies.get(COOKIE, ""))
        if self.streams[sid] >= MAX_STREAMS_PER_SESSION:
            return _error(429, f"at most {MAX_STREAMS_PER_SESSION} live streams for one sign-in")
        why = self.stream_shares.take(session.user, session.role)
        if why is not None:
            return _error(429, f"live streams: {why}; close another page")
        self.streams[sid] += 1
        try:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **self.headers})
            await response.prepare(request)
            # The browser went away, or stopped reading for STREAM_WRITE_S: the stream ends.
            with contextlib.suppress(ConnectionResetError, TimeoutError):
                await self._stream(request, response)
            return response
        finally:
            self.stream_shares.give_back(session.user, session.role)
            self.streams[sid] -= 1
            if self.streams[sid] <= 0:
                del self.streams[sid]

    async def _write(self, response: web.StreamResponse, data: bytes) -> None:
        async with asyncio.timeout(STREAM_WRITE_S):
            await response.write(data)

    async def _stream(self, request: web.Request, response: web.StreamResponse) -> None:
        version = (-1, -1)
        while not self._closing:
            try:
                session = self._session(request)
            except web.HTTPUnauthorized:
                await self._write(response, b"event: signed_out\ndata: {}\n\n")
                break
            if version != (self.table.version, self._signed_in):
                version = (self.table.version, self._signed_in)
                data = json.dumps(await self.view(session), separators=(",", ":"))
                await self._write(response, f"event: display\ndata: {data}\n\n".encode())
                continue
            tick = self._tick
            assert tick is not None
            try:
                await asyncio.wait_for(tick.wait(), HEARTBEAT_S)
            except TimeoutError:
                await self._write(response, b"event: alive\ndata: {}\n\n")

    async def action(self, request: web.Request) -> web.StreamResponse:
        session = self._session(request)
        self._csrf(request, session)
        name = request.match_info["name"]
        action = actions.ACTIONS.get(name)
        if action is None:
            return _error(404, "unknown command (allowed: " + ", ".join(sorted(actions.ACTIONS)) + ")")
        if session.role not in action.roles:
            self.log.warning("console_action_forbidden", user=session.user, role=session.role, command=name)
            return _error(403, f"{name}: the {session.role} role may not do this")
        args = await self._json(request)
        result = await self.table.command(name, args, session.user, session.role)
        self.log.info("console_action", user=session.user, command=name, ok=bool(result.get("ok")))
        out = {k: result[k] for k in RESULT_KEYS if k in result}
        if "error" in out:
            out["error"] = str(out["error"]).splitlines()[0][:300]
        return web.json_response(out)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"ok": False, "error": message}, status=status)
