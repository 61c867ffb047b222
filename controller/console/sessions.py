"""Who is signed in at the console: sessions that outlive a restart of ``tablectl run``.

The cookie carries a random token (256 bits). The server keeps only the token's SHA-256, so the
sessions file (signed, 0600, beside the journal) gives nobody a usable cookie. A session's CSRF
token is derived from its token with the console's key, so it is not stored either. Each session
remembers a fingerprint of its person's password hash: changing the password, or the role, or
removing the person from the users file ends every session they had, at once and after a restart.

Sessions are bounded per person and per role (controller/console/shares.py): a new sign-in past
either ends the oldest session of that person, or of that role, never anyone else's, so a dealer
signing in hundreds of times ends only dealers' sessions and the floor stays signed in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from controller.console.shares import role_share
from controller.console.users import User, fingerprint

SESSION_S = 12 * 3600  # a shift; then sign in again
MAX_SESSIONS = 256  # at one table, each role its share (a bounded dict, not a leak)
MAX_SESSIONS_PER_ACCOUNT = 16  # one person's screens and devices; past it their oldest ends


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
        sessions are dropped; then the person's oldest when they have ``MAX_SESSIONS_PER_ACCOUNT``,
        or their role's oldest when the role has its share of ``MAX_SESSIONS``."""
        now = self.clock()
        self._by_id = {i: s for i, s in self._by_id.items() if s.expires > now}
        self._make_room(lambda s: s.user == user.name, MAX_SESSIONS_PER_ACCOUNT)
        self._make_room(lambda s: s.role == user.role, role_share(MAX_SESSIONS))
        token = secrets.token_urlsafe(32)
        session = Session(user.name, user.role, now + SESSION_S, now, fingerprint(user.password))
        self._by_id[token_id(token)] = session
        return token, session

    def _make_room(self, same: Callable[[Session], bool], cap: int) -> None:
        """End the oldest sessions ``same`` picks until one more fits under ``cap``."""
        theirs = [i for i, s in self._by_id.items() if same(s)]  # oldest first (insertion order)
        for i in theirs[: max(0, len(theirs) - cap + 1)]:
            del self._by_id[i]

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
