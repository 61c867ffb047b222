"""Who is signed in at the console: sessions that outlive a restart of ``tablectl run``.

The cookie carries a random token (256 bits). The server keeps only the token's SHA-256, so the
sessions file (signed, 0600, beside the journal) gives nobody a usable cookie. A session's CSRF
token is derived from its token with the console's key, so it is not stored either. Each session
remembers a fingerprint of its person's password hash: changing the password, or the role, or
removing the person from the users file ends every session they had, at once and after a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from controller.console.users import User, fingerprint

SESSION_S = 12 * 3600  # a shift; then sign in again
MAX_SESSIONS = 256  # at one table; past this the oldest session ends (a bounded dict, not a leak)


@dataclass(slots=True)
class Session:
    user: str
    role: str
    expires: float  # on the console's clock (wall time: it outlives a restart)
    since: float
    password: str  # fingerprint() of the person's hash when they signed in

    def still_for(self, user: User | None, now: float) -> bool:
        """Whether this session still stands for ``user`` (the users file's entry) at ``now``."""
        return (
            user is not None
            and self.expires > now
            and user.role == self.role
            and hmac.compare_digest(fingerprint(user.password), self.password)
        )


def token_id(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class Sessions:
    def __init__(self, key: bytes, clock: Callable[[], float]) -> None:
        self.key = key
        self.clock = clock
        self._by_id: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._by_id.values()))

    def csrf(self, token: str) -> str:
        return hmac.new(self.key, b"csrf:" + token.encode("utf-8", "replace"), hashlib.sha256).hexdigest()

    def new(self, user: User) -> tuple[str, Session]:
        """A new session for ``user``; its token (for the cookie) and the session. Expired
        sessions are dropped, and the oldest when there are ``MAX_SESSIONS``."""
        now = self.clock()
        self._by_id = {i: s for i, s in self._by_id.items() if s.expires > now}
        while len(self._by_id) >= MAX_SESSIONS:
            del self._by_id[next(iter(self._by_id))]  # the oldest (dicts keep insertion order)
        token = secrets.token_urlsafe(32)
        session = Session(user.name, user.role, now + SESSION_S, now, fingerprint(user.password))
        self._by_id[token_id(token)] = session
        return token, session

    def get(self, token: str) -> Session | None:
        return self._by_id.get(token_id(token)) if token else None

    def end(self, token: str) -> bool:
        return self._by_id.pop(token_id(token), None) is not None

    def keep_only(self, users: dict[str, User]) -> int:
        """End every session whose person left, changed role or password, or that expired; how
        many ended."""
        now = self.clock()
        before = len(self._by_id)
        self._by_id = {i: s for i, s in self._by_id.items() if s.still_for(users.get(s.user), now)}
        return before - len(self._by_id)

    def dump(self) -> dict[str, Any]:
        now = self.clock()
        return {i: asdict(s) for i, s in self._by_id.items() if s.expires > now}

    def restore(self, body: Any) -> None:
        """The sessions saved by ``dump`` (malformed entries are skipped)."""
        if not isinstance(body, dict):
            return
        for i, raw in list(body.items())[-MAX_SESSIONS:]:
            try:
                session = Session(**raw)
            except TypeError:
                continue
            if isinstance(session.expires, int | float) and isinstance(session.since, int | float):
                self._by_id[str(i)] = session
