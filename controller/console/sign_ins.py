"""How many sign-ins were tried recently, per person's name and per source address: at most
``LIMIT`` in any ``WINDOW_S`` for each, counted BEFORE the password hash is checked.

``reserve`` checks and counts in one step, with no ``await`` between (the console's event loop
runs one request at a time between awaits), so 300 attempts sent at once for one name reach the
scrypt check at most ``LIMIT`` times: the rest are refused at once, the right password included,
until the window has passed. A sign-in that succeeds gives its attempt back (``release``), so a
person signing in on several screens is not locked out by doing so. The attempts are kept in a
signed file beside the journal, saved before the hash is checked, so restarting ``tablectl run``
does not open the window again.

The per-name count is what stops a guesser with many addresses, but it would let anyone lock a
named person out by guessing wrong five times. So it does not apply at the person's own
addresses: those they signed in from within ``TRUST_S`` (``trust``, remembered in the same file).
There only the address's own count applies, and an address that has not guessed wrong is never
refused: the floor supervisor at their usual terminal signs in while their name is under attack.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

LIMIT = 5  # attempts per name and per address in WINDOW_S (failures, and those being checked)
WINDOW_S = 300.0
MAX_TRACKED = 10_000  # names and addresses remembered (the oldest forgotten first): bounded memory
TRUST_S = 30 * 86400.0  # an address a person signed in from stays theirs this long after


class SignInAttempts:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._times: collections.OrderedDict[str, collections.deque[float]] = collections.OrderedDict()
        self._trusted: collections.OrderedDict[str, float] = collections.OrderedDict()  # name@address

    def trusted(self, name: str, address: str) -> bool:
        """Whether ``name`` signed in from ``address`` within ``TRUST_S`` (its own address, where
        the per-name count does not apply)."""
        when = self._trusted.get(f"{name}@{address}")
        return when is not None and self.clock() - TRUST_S < when <= self.clock() + WINDOW_S

    def trust(self, name: str, address: str) -> None:
        """``name`` signed in from ``address`` now."""
        key = f"{name}@{address}"
        self._trusted[key] = self.clock()
        self._trusted.move_to_end(key)
        while len(self._trusted) > MAX_TRACKED:
            self._trusted.popitem(last=False)

    def _recent(self, key: str, now: float) -> collections.deque[float] | None:
        times = self._times.get(key)
        while times and (times[0] <= now - WINDOW_S or times[0] > now + WINDOW_S):
            times.popleft()  # out of the window (or from a clock set back: not trusted)
        if times is not None and not times:
            del self._times[key]
            return None
        return times

    def retry_after(self, *keys: str) -> float:
        """Seconds until an attempt may be made for every one of ``keys``; 0 when it may now."""
        now, wait = self.clock(), 0.0
        for key in keys:
            times = self._recent(key, now)
            if times is not None and len(times) >= LIMIT:
                wait = max(wait, times[0] + WINDOW_S - now)
        return wait

    def reserve(self, *keys: str) -> tuple[float, float]:
        """``(0, when)``: an attempt is counted at ``when`` for each of ``keys``; or ``(wait, 0)``:
        nothing is counted, as one of them has had ``LIMIT`` attempts in the window. Synchronous
        on purpose: the check and the count cannot be separated by another request."""
        wait = self.retry_after(*keys)
        if wait > 0:
            return wait, 0.0
        now = self.clock()
        for key in keys:
            self._times.setdefault(key, collections.deque(maxlen=LIMIT)).append(now)
            self._times.move_to_end(key)
        while len(self._times) > MAX_TRACKED:
            self._times.popitem(last=False)
        return 0.0, now

    def release(self, when: float, *keys: str) -> None:
        """Give back the attempt counted at ``when`` for each of ``keys`` (the sign-in succeeded)."""
        for key in keys:
            times = self._times.get(key)
            if times is not None and when in times:
                times.remove(when)
                if not times:
                    del self._times[key]

    def dump(self) -> dict[str, Any]:
        now = self.clock()
        return {
            "attempts": {k: list(t) for k in list(self._times) if (t := self._recent(k, now)) is not None},
            "trusted": {k: t for k, t in self._trusted.items() if t > now - TRUST_S},
        }

    def restore(self, body: Any) -> None:
        """The attempts saved by ``dump`` (malformed entries are skipped; a file of attempts alone,
        as written before addresses were trusted, is read as such)."""
        if not isinstance(body, dict):
            return
        if isinstance(body.get("attempts"), dict):
            trusted = body.get("trusted")
            if isinstance(trusted, dict):
                for key, when in list(trusted.items())[-MAX_TRACKED:]:
                    if isinstance(key, str) and isinstance(when, int | float):
                        self._trusted[key] = float(when)
            body = body["attempts"]
        for key, times in list(body.items())[-MAX_TRACKED:]:
            if isinstance(key, str) and isinstance(times, list):
                good = sorted(float(t) for t in times if isinstance(t, int | float))[-LIMIT:]
                if good:
                    self._times[key] = collections.deque(good, maxlen=LIMIT)
