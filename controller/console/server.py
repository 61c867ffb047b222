"""The table console over HTTP (aiohttp, on the supervisor's own event loop; docs/console.md).

    GET  /, /floor           the dealer display and the floor console (static page + script)
    POST /api/login          {"user", "password"} -> session cookie; failed sign-ins rate-limited
    POST /api/logout
    GET  /api/session        who is signed in here, the CSRF token, the actions the role may take
    GET  /api/display        the dealer display as JSON (controller/console/display.py)
    GET  /api/events         the same, live, as server-sent events
    POST /api/actions/<name> an action of the one allow-list, as the signed-in person

Defences: a request must name the console by IP address, ``localhost`` or a name the operator
allowed (``[console] allow_hosts``), else 421, so a DNS-rebinding site gets nothing. The session
cookie is HttpOnly, SameSite=Strict and expires. Every POST must be JSON (an HTML form on another
site cannot send that without a CORS preflight, which is never granted), must come from this
origin when the browser says where it came from, and once signed in must carry the session's
CSRF token in ``X-CSRF-Token``. Bodies are at most 8 KiB. Every error is one line of JSON; a bug
is logged by its type and answered "internal error", never a traceback.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog
from aiohttp import web

from controller.bounded import InputRefused, load_json
from controller.console.display import display, turn
from controller.console.users import MAX_PASSWORD, User, hash_password, load_users, verify_password
from controller.errors import ConfigError
from controller.ids import USER_NAME, matches
from controller.supervisor import actions
from controller.supervisor.supervisor import Supervisor
from controller.telemetry.web import answers_for, host_name

COOKIE = "tablectl_session"
SESSION_S = 12 * 3600  # a shift; then sign in again
MAX_BODY = 8 * 1024
LOGIN_FAILURES = 5  # failed sign-ins allowed per address and per name within LOGIN_WINDOW_S
LOGIN_WINDOW_S = 300.0
MAX_TRACKED = 10_000  # addresses and names remembered for the rate limit (oldest forgotten first)
MAX_SESSIONS = 256  # at one table; past this the oldest session ends (a bounded dict, not a leak)
HEARTBEAT_S = 15.0  # an SSE comment this often, so a dead client's stream ends
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


@dataclass(slots=True)
class Session:
    user: str
    role: str
    csrf: str
    expires: float
    since: float = field(default=0.0)


class FailedLogins:
    """How many sign-ins failed recently per key (an address or a name): a sliding window."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._failures: collections.OrderedDict[str, collections.deque[float]] = collections.OrderedDict()

    def retry_after(self, *keys: str) -> float:
        """Seconds until a sign-in may be tried again for any of ``keys``; 0 when it may now."""
        now, wait = self.clock(), 0.0
        for key in keys:
            times = self._failures.get(key)
            while times and times[0] <= now - LOGIN_WINDOW_S:
                times.popleft()
            if times is not None and len(times) >= LOGIN_FAILURES:
                wait = max(wait, times[0] + LOGIN_WINDOW_S - now)
        return wait

    def failed(self, *keys: str) -> None:
        for key in keys:
            self._failures.setdefault(key, collections.deque(maxlen=LOGIN_FAILURES)).append(self.clock())
            self._failures.move_to_end(key)
        while len(self._failures) > MAX_TRACKED:
            self._failures.popitem(last=False)


CONSOLE: web.AppKey[Console] = web.AppKey("console")


class Console:
    def __init__(
        self,
        supervisor: Supervisor,
        users: Path,
        *,
        allow_hosts: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.supervisor = supervisor
        self.allow_hosts = frozenset(host_name(h) for h in allow_hosts)
        self.users_path = users
        self.clock = clock
        self.log = structlog.get_logger("tablectl.console")
        self.sessions: dict[str, Session] = {}
        self.failures = FailedLogins(clock)
        self._users: dict[str, User] = load_users(users)  # a bad file stops `tablectl run` at once
        self._users_stamp = self._stamp()
        self._version = 0
        self._tick = asyncio.Event()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._unlisten: Callable[[], None] | None = None
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
        app.on_startup.append(self._on_startup)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self._unlisten = self.supervisor.on_change(self._changed)

    async def _on_shutdown(self, app: web.Application) -> None:
        # Open SSE streams would hold runner.cleanup() for its whole shutdown timeout: end them.
        self._closing = True
        self._tick.set()
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on ``host:port`` (0: a free port); the address actually bound."""
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = self._runner.addresses[0]
        self.log.info("console_listening", host=bound[0], port=bound[1])
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _changed(self) -> None:
        self._version += 1
        self._tick.set()
        self._tick = asyncio.Event()

    # ------------------------------------------------------------------ guards
    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        host = request.headers.get("Host")
        if host is None or not answers_for(host, self.allow_hosts):
            response: web.StreamResponse = _error(421, "this console answers to its address or allowed names")
            response.headers.update(HEADERS)
            return response
        try:
            response = await handler(request)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            response = _error(e.status, (e.reason or "refused").splitlines()[0])
        except Exception as e:  # a bug: logged by its type, never a traceback to the client
            self.log.error("console_failed", path=request.path, error=type(e).__name__)
            response = _error(500, "internal error")
        if not response.prepared:
            response.headers.update(HEADERS)
        return response

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self.users_path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def users(self) -> dict[str, User]:
        """The users file as it is now (re-read when it changed; a broken edit keeps the last)."""
        stamp = self._stamp()
        if stamp != self._users_stamp:
            try:
                self._users = load_users(self.users_path)
                self._users_stamp = stamp
            except ConfigError as e:
                self.log.error("users_file_refused", error=str(e))
        return self._users

    def _session(self, request: web.Request) -> Session:
        """The request's live session, or 401. A person removed from the users file, or given
        another role, is signed out at their next request."""
        token = request.cookies.get(COOKIE, "")
        session = self.sessions.get(token)
        if session is None:
            raise web.HTTPUnauthorized(reason="not signed in")
        user = self.users().get(session.user)
        if session.expires <= self.clock() or user is None or user.role != session.role:
            self.sessions.pop(token, None)
            raise web.HTTPUnauthorized(reason="not signed in")
        return session

    @staticmethod
    def _same_origin(request: web.Request) -> None:
        """403 unless the browser says the request comes from this origin (or says nothing)."""
        origin = request.headers.get("Origin")
        # The host only: behind a TLS proxy the browser's origin is https:// and ours is http://.
        if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
            raise web.HTTPForbidden(reason="cross-site request refused")
        if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            raise web.HTTPForbidden(reason="cross-site request refused")

    def _csrf(self, request: web.Request, session: Session) -> None:
        self._same_origin(request)
        if not hmac.compare_digest(request.headers.get("X-CSRF-Token", ""), session.csrf):
            raise web.HTTPForbidden(reason="missing or wrong X-CSRF-Token")

    @staticmethod
    async def _json(request: web.Request) -> dict[str, Any]:
        if request.content_type != "application/json":
            raise web.HTTPUnsupportedMediaType(reason="the body must be application/json")
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=request.content_length)
        body = await request.read()  # bounded by client_max_size
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
        keys = [f"addr:{request.remote}"] + ([f"user:{name_key}"] if name_key else [])
        wait = self.failures.retry_after(*keys)
        if wait > 0:
            known = name_key if name_key in self.users() else None
            self.log.warning("login_rate_limited", user=known, remote=request.remote)
            response = _error(429, f"too many failed sign-ins; try again in {int(wait) + 1} s")
            response.headers["Retry-After"] = str(int(wait) + 1)
            return response
        user = self.users().get(name_key) if name_key else None
        ok = False
        if isinstance(password, str) and len(password) <= MAX_PASSWORD:
            # A name that does not exist costs as much as a wrong password (no user probing).
            encoded = user.password if user is not None else _DUMMY_HASH
            ok = await asyncio.to_thread(verify_password, password, encoded) and user is not None
        if not ok or user is None:
            self.failures.failed(*keys)
            # A name nobody has is not logged: it may be a password typed into the wrong field.
            self.log.warning("login_failed", user=user.name if user else None, remote=request.remote)
            return _error(401, "wrong name or password")
        token, now = secrets.token_urlsafe(32), self.clock()
        session = Session(user.name, user.role, secrets.token_urlsafe(32), now + SESSION_S, since=time.time())
        self.sessions = {t: s for t, s in self.sessions.items() if s.expires > now}
        while len(self.sessions) >= MAX_SESSIONS:
            del self.sessions[next(iter(self.sessions))]  # the oldest (dicts keep insertion order)
        self.sessions[token] = session
        self.log.info("login", user=user.name, role=user.role)
        response = web.json_response({"ok": True, "user": user.name, "role": user.role, "csrf": session.csrf})
        response.set_cookie(
            COOKIE,
            token,
            max_age=SESSION_S,
            httponly=True,
            samesite="Strict",
            path="/",
            # Behind a TLS proxy the cookie goes back over https only. (A client that claims https
            # without it only makes its own cookie unusable.)
            secure=request.secure or request.headers.get("X-Forwarded-Proto") == "https",
        )
        self._changed()  # the floor console shows who is signed in
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        session = self._session(request)
        self._csrf(request, session)
        self.sessions.pop(request.cookies.get(COOKIE, ""), None)
        self.log.info("logout", user=session.user)
        response = web.json_response({"ok": True})
        response.del_cookie(COOKIE, path="/")
        self._changed()
        return response

    async def session_info(self, request: web.Request) -> web.StreamResponse:
        session = self._session(request)
        return web.json_response(
            {
                "ok": True,
                "user": session.user,
                "role": session.role,
                "csrf": session.csrf,
                "actions": [
                    a.public()
                    for a in actions.ACTIONS.values()
                    if session.role in a.roles and not a.telemetry
                ],
            }
        )

    def view(self, session: Session) -> dict[str, Any]:
        """The display as this person sees it: the floor also sees who is signed in."""
        sup = self.supervisor
        kinds = {n: k.value for n, k in sup.kinds.items()}
        table = sup.table if sup.jt is not None else None
        snapshot = sup.snapshot()
        ask = snapshot.get("asking")
        worded = turn(ask) if ask is not None else {"who": "", "what": "the table is starting"}
        body = display(snapshot, kinds, worded, table.dealer_name if table is not None else None)
        body["signed_in"] = {"user": session.user, "role": session.role}
        if session.role == actions.FLOOR:
            now = self.clock()
            people = sorted({(s.user, s.role) for s in self.sessions.values() if s.expires > now})
            body["people"] = [{"user": u, "role": r} for u, r in people]
        return body

    async def display(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.view(self._session(request)))

    async def events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the display now and after every change, until sign-out or shutdown."""
        self._session(request)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **HEADERS})
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):  # the browser went away
            await self._stream(request, response)
        return response

    async def _stream(self, request: web.Request, response: web.StreamResponse) -> None:
        version = -1
        while not self._closing:
            try:
                session = self._session(request)
            except web.HTTPUnauthorized:
                await response.write(b"event: signed_out\ndata: {}\n\n")
                break
            if version != self._version:
                version = self._version
                data = json.dumps(self.view(session), separators=(",", ":"))
                await response.write(f"event: display\ndata: {data}\n\n".encode())
                continue
            tick = self._tick
            try:
                await asyncio.wait_for(tick.wait(), HEARTBEAT_S)
            except TimeoutError:
                await response.write(b": still here\n\n")

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
        result = await self.supervisor.command(name, args, session.user, session.role)
        self.log.info("console_action", user=session.user, command=name, ok=bool(result.get("ok")))
        out = {k: result[k] for k in RESULT_KEYS if k in result}
        if "error" in out:
            out["error"] = str(out["error"]).splitlines()[0][:300]
        return web.json_response(out)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"ok": False, "error": message}, status=status)
