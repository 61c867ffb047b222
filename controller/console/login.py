"""Signing in and out of the console (``POST /api/login``, ``POST /api/logout``) and the CSRF check
every other POST passes.

Wrong guesses are counted per address (and per name at an address, never per name alone) before
the password is checked, and on disk before the hash is; the checks running and waiting are
bounded per name and in all (controller/console/sign_ins.py), past which a sign-in is answered
503 with nothing counted. A name nobody has costs as much as a wrong password. The session cookie
is HttpOnly, SameSite=Strict, expires, and is Secure under TLS or behind a TLS proxy; once signed
in, a POST carries the session's CSRF token in ``X-CSRF-Token``.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from aiohttp import web

from controller.console.http_rules import error, read_json, same_origin
from controller.console.people import COOKIE, People
from controller.console.sessions import SESSION_S, Session
from controller.console.sign_ins import Busy, PasswordChecks, SignInAttempts, keys
from controller.console.state import SignedFile
from controller.console.users import MAX_PASSWORD, hash_password, verify_password
from controller.ids import USER_NAME, matches

HASHING = 2  # password hashes checked at once (16 MiB and one core each)
HASHING_PER_NAME = 1  # of those, for one name: guesses at one name leave the others a check
# One more, only for a person at their own address (signed in from there before): a queue of
# guesses, from other addresses, cannot keep them waiting.
HASHING_OWN = 1
WAITING_PER_NAME = 8  # checks waiting for one name (and for the own lane); past it, 503
WAITING = 32  # checks waiting in all; past it, 503 with Retry-After (never a lock)
BUSY_RETRY_S = 2
BUSY_LOG_S = 60.0  # sign-ins refused as busy are logged once a minute, with a count
_DUMMY_HASH = hash_password("not anyone's password", salt=b"\0" * 16)


class Login:
    def __init__(
        self, people: People, key: bytes, attempts_path: Path, clock: Callable[[], float], *, tls: bool
    ) -> None:
        """``tls``: the console speaks https itself (the cookie is Secure)."""
        self.people = people
        self.tls = tls
        self.log = structlog.get_logger("tablectl.console")
        self.attempts = SignInAttempts(clock)
        self.file = SignedFile(attempts_path, key, "sign-ins", self.attempts.dump)
        self.checks = PasswordChecks(HASHING, HASHING_PER_NAME, HASHING_OWN, WAITING_PER_NAME, WAITING)
        self._busy_logged: tuple[float, int] = (-BUSY_LOG_S, 0)  # when, and refused since

    def _busy(self) -> None:
        """A sign-in refused as too many wait for a password check: one log line a minute with
        a count, however many (a flood of refusals must not become a flood of log lines)."""
        now = time.monotonic()
        last, count = self._busy_logged
        if now - last < BUSY_LOG_S:
            self._busy_logged = (last, count + 1)
            return
        self.log.warning("login_busy", refused=count + 1)
        self._busy_logged = (now, 0)

    async def login(self, request: web.Request) -> web.StreamResponse:
        same_origin(request)
        doc = await read_json(request)
        name, password = doc.get("user"), doc.get("password")
        name_key = name if matches(USER_NAME, name) else None
        remote = str(request.remote)
        # Counted per address and per name at that address, never per name alone: nobody is
        # locked out by others' guesses. Counted before the hash is checked, in one step: a
        # burst from one address gets LIMIT checks, not one each.
        counts = keys(name_key, remote)
        wait, attempt = self.attempts.reserve(*counts)
        if wait > 0:
            known = name_key if name_key in self.people.users() else None
            self.log.warning("login_rate_limited", user=known, remote=request.remote)
            response = error(429, f"too many failed sign-ins; try again in {int(wait) + 1} s")
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
            response = error(503, f"too many sign-ins at once; try again in {BUSY_RETRY_S} s")
            response.headers["Retry-After"] = str(BUSY_RETRY_S)
            return response
        user = self.people.users().get(name_key) if name_key else None
        ok = False
        try:
            self.file.changed()
            await self.file.save()  # on disk before the hash: a restart does not forget it
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
            return error(401, "wrong name or password")
        self.attempts.release(attempt, *counts)
        self.attempts.trust(user.name, remote)
        self.file.changed()
        sessions = self.people.sessions
        token, _ = sessions.new(user)
        self.people.vouch(request, user.name)
        self.people.file.changed()
        await self.people.file.save()
        await self.file.save()
        self.log.info("login", user=user.name, role=user.role)
        body = {"ok": True, "user": user.name, "role": user.role, "csrf": sessions.csrf(token)}
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
            secure=self.tls or request.secure or request.headers.get("X-Forwarded-Proto") == "https",
        )
        self.people.changed()  # the floor console shows who is signed in
        return response

    def csrf(self, request: web.Request, session: Session) -> None:
        """403 unless the request comes from this origin and carries the session's CSRF token."""
        same_origin(request)
        want = self.people.sessions.csrf(request.cookies.get(COOKIE, ""))
        if not hmac.compare_digest(request.headers.get("X-CSRF-Token", ""), want):
            raise web.HTTPForbidden(reason="missing or wrong X-CSRF-Token")

    async def logout(self, request: web.Request) -> web.StreamResponse:
        session = self.people.session(request)
        self.csrf(request, session)
        self.people.sessions.end(request.cookies.get(COOKIE, ""))
        self.people.file.changed()
        await self.people.file.save()
        self.log.info("logout", user=session.user)
        response = web.json_response({"ok": True})
        response.del_cookie(COOKIE, path="/")
        self.people.changed()
        return response
