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

This module serves: the routes, the pages, the guard every request passes and the console's
loop. Each concern behind the routes is a module of its own: who is signed in
(``people.py``), signing in and out and the CSRF check (``login.py``), the display and its live
streams (``streams.py``); what every handler shares is ``http_rules.py``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog
from aiohttp import web

from controller import actions
from controller.addresses import answers_for, host_name
from controller.connection_caps import CappedSite, ConnectionCaps, counted
from controller.console import http_rules
from controller.console.http_rules import MAX_BODY, error, read_json
from controller.console.login import Login
from controller.console.people import People, file_stamp
from controller.console.state import StateRefused, load_key, state_paths
from controller.console.streams import Streams
from controller.console.table_link import LocalTable, TableLink, journal_of
from controller.console.users import load_users
from controller.errors import ConfigError
from controller.supervisor.supervisor import Supervisor

IDLE_S = 15.0  # a connection sends a whole request within this of opening or of its last answer
HANDSHAKE_S = 10.0  # a TLS handshake completes within this
MAX_PER_SOURCE = 64  # open connections from one address (a browser opens 6 or so; a proxy more)
MAX_CONNECTIONS = 2048  # open connections in all (at the cap, one nobody vouched for makes room)
MAX_CONNECTIONS_PER_ACCOUNT = 32  # one signed-in person's connections kept at the cap
REFUSAL_LOG_S = 60.0  # refused connections are logged once a minute per address, with a count
MAX_REFUSAL_SOURCES = 1024
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
        self.clock = clock
        self.tls = tls
        self.headers = {**HEADERS, **({"Strict-Transport-Security": HSTS} if tls is not None else {})}
        self.log = structlog.get_logger("tablectl.console")
        known = load_users(users)  # a bad or missing file stops `run` at once
        stamp = file_stamp(users)
        key_path, sessions_path, attempts_path = state_paths(journal_of(self.table, state))
        try:
            key = load_key(key_path)
        except StateRefused as e:
            raise ConfigError(str(e)) from None
        self._refusals: collections.OrderedDict[str, tuple[float, int]] = collections.OrderedDict()
        self.caps = ConnectionCaps(
            MAX_PER_SOURCE, MAX_CONNECTIONS, self._refused, per_account=MAX_CONNECTIONS_PER_ACCOUNT
        )
        self.people = People(users, known, stamp, key, sessions_path, clock, self.caps, self._wake)
        self.login = Login(self.people, key, attempts_path, clock, tls=tls is not None)
        self.streams = Streams(self.table, self.people, clock, self.headers)
        for file, restore in (
            (self.people.file, self.people.sessions.restore),
            (self.login.file, self.login.attempts.restore),
        ):
            try:
                restore(file.load())
            except StateRefused as e:  # start without them: everyone signs in again
                self.log.error("console_state_refused", error=str(e))
        self.people.keep_only_users()
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
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
        r.add_post("/api/login", self.login.login)
        r.add_post("/api/logout", self.login.logout)
        r.add_get("/api/session", self.people.info)
        r.add_get("/api/display", self.streams.display)
        r.add_get("/api/events", self.streams.events)
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
        self.streams.open()
        self._runner = web.AppRunner(
            self.app,
            access_log=None,
            shutdown_timeout=2.0,
            keepalive_timeout=IDLE_S,
            lingering_time=http_rules.BODY_S,  # an unread body is drained at most this long, then closed
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
        await self.people.file.save()
        await self.login.file.save()

    async def _on_shutdown(self, app: web.Application) -> None:
        # Open SSE streams would hold runner.cleanup() for its whole shutdown timeout: end them.
        self.streams.close()

    def _wake_threadsafe(self) -> None:
        """From the table's loop, after every change: a wake-up of the console's loop."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the console's loop is closing
                loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        """On the console's loop: every stream looks at the display again."""
        self.streams.wake()

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

    # ------------------------------------------------------------------ guards
    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        host = request.headers.get("Host")
        if host is None or not answers_for(host, self.allow_hosts):
            response: web.StreamResponse = error(421, "this console answers to its address or allowed names")
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
            response = error(e.status, (e.reason or "refused").splitlines()[0])
        except Exception as e:  # a bug: logged by its type, never a traceback to the client
            self.log.error("console_failed", path=request.path, error=type(e).__name__)
            response = error(500, "internal error")
        finally:
            if conn is not None:
                self.caps.busy(conn, False)
        if not response.prepared:
            response.headers.update(self.headers)
            if response.status == 408:
                response.force_close()  # the rest of a body that never came is not waited for
        return response

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

    # ------------------------------------------------------------------ the table's actions
    async def action(self, request: web.Request) -> web.StreamResponse:
        session = self.people.session(request)
        self.login.csrf(request, session)
        name = request.match_info["name"]
        action = actions.ACTIONS.get(name)
        if action is None:
            return error(404, "unknown command (allowed: " + ", ".join(sorted(actions.ACTIONS)) + ")")
        if session.role not in action.roles:
            self.log.warning("console_action_forbidden", user=session.user, role=session.role, command=name)
            return error(403, f"{name}: the {session.role} role may not do this")
        args = await read_json(request)
        result = await self.table.command(name, args, session.user, session.role)
        self.log.info("console_action", user=session.user, command=name, ok=bool(result.get("ok")))
        out = {k: result[k] for k in RESULT_KEYS if k in result}
        if "error" in out:
            out["error"] = str(out["error"]).splitlines()[0][:300]
        return web.json_response(out)
