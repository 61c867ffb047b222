"""Sign-ins: how many wrong guesses each address made recently, and how many password checks run
at once.

**Wrong guesses are counted per address, never per name alone.** ``keys(name, address)`` gives
the counts an attempt is charged to: the address's own (``addr:``), whatever names it tries, and
the name at that address (``at:``). At most ``LIMIT`` in any ``WINDOW_S`` for each; an address
past either is refused (429) until the window has passed, the right password included. An
address that has not guessed is never refused, however many other addresses are guessing the
same name: a person at a terminal nobody guessed from signs in while their name is under attack.
(A count per name would stop a guesser with many addresses, but it lets anyone lock a named
person out with five wrong guesses, again and again; guessing from many addresses is bounded
instead by each address's 5 in 5 minutes and by passwords zxcvbn judges "safely unguessable",
about 10^10 guesses, and its cost by ``PasswordChecks``.)

``reserve`` checks and counts in one step, with no ``await`` between (the console's event loop
runs one request at a time between awaits), so 300 attempts sent at once from one address reach
the scrypt check at most ``LIMIT`` times. A sign-in that succeeds gives its attempt back
(``release``), so a person signing in on several screens is not locked out by doing so. The
attempts are kept in a signed file beside the journal, saved before the hash is checked, so
restarting ``tablectl run`` does not open the window again.

``trust`` remembers the addresses a person signed in from (``TRUST_S``, in the same file): there
their password check has a lane of its own (``PasswordChecks``), so a queue of checks for others
never keeps them waiting.

**Password checks are bounded, never by a lock.** ``PasswordChecks`` runs at most ``at_once``
scrypt checks, at most ``per_name`` of them for one name, and lets at most ``waiting_per_name``
wait for one name and ``waiting`` in all; past those an attempt is answered 503 with
``Retry-After`` (nothing counted: the person tries again in a moment). A burst of guesses at one
name from 300 addresses thus costs one core at any moment and leaves the others' sign-ins their
own check; the right password from a new address waits its turn among the guesses.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

LIMIT = 5  # attempts per address, and per name at one address, in WINDOW_S (failures, and checks under way)
WINDOW_S = 300.0
MAX_TRACKED = 10_000  # counts and addresses remembered (the oldest forgotten first): bounded memory
TRUST_S = 30 * 86400.0  # an address a person signed in from stays theirs this long after
_KINDS = ("addr:", "at:")  # the counts kept (a file from before may hold others: not read)


def keys(name: str | None, address: str) -> tuple[str, ...]:
    """The counts an attempt at ``name`` (None: not a possible name) from ``address`` is charged
    to: the address's, and the name's at that address."""
    return (f"addr:{address}",) + ((f"at:{name}@{address}",) if name is not None else ())


class SignInAttempts:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._times: collections.OrderedDict[str, collections.deque[float]] = collections.OrderedDict()
        self._trusted: collections.OrderedDict[str, float] = collections.OrderedDict()  # name@address

    def trusted(self, name: str, address: str) -> bool:
        """Whether ``name`` signed in from ``address`` within ``TRUST_S`` (its own address, where
        the password check has a lane of its own)."""
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
        """Give back the attempt counted at ``when`` for each of ``keys`` (the sign-in succeeded,
        or its password was never checked)."""
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
        """The attempts saved by ``dump`` (malformed entries are skipped, and counts of a kind no
        longer kept: a file from before holds counts per name, which lock nobody now)."""
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
            if isinstance(key, str) and key.startswith(_KINDS) and isinstance(times, list):
                good = sorted(float(t) for t in times if isinstance(t, int | float))[-LIMIT:]
                if good:
                    self._times[key] = collections.deque(good, maxlen=LIMIT)


class Busy(Exception):
    """Too many password checks are waiting: try again in a moment (503, never a lock)."""


class _Lane:
    """The checks for one name: ``slots`` of them at once; ``admitted`` checking or waiting."""

    def __init__(self, slots: int) -> None:
        self.slots = asyncio.Semaphore(slots)
        self.admitted = 0


class Turn:
    """One admitted password check: ``async with`` it waits for a free check and holds it;
    ``leave()`` (also when it was never entered) gives the admission back."""

    def __init__(
        self, checks: PasswordChecks, lane_key: str, lane: _Lane, everyone: asyncio.Semaphore | None
    ) -> None:
        self._checks, self._key, self._lane, self._all = checks, lane_key, lane, everyone
        self._left = False

    async def __aenter__(self) -> None:
        await self._lane.slots.acquire()
        if self._all is not None:
            try:
                await self._all.acquire()
            except BaseException:
                self._lane.slots.release()
                raise

    async def __aexit__(self, *exc: object) -> None:
        if self._all is not None:
            self._all.release()
        self._lane.slots.release()
        self.leave()

    def leave(self) -> None:
        if self._left:
            return
        self._left = True
        self._lane.admitted -= 1
        if self._all is not None:
            self._checks.admitted -= 1
        if self._lane.admitted == 0 and self._checks.lanes.get(self._key) is self._lane:
            del self._checks.lanes[self._key]


class PasswordChecks:
    """How many password checks run and wait at once (module docstring), and one more lane
    (``own`` at once, outside ``at_once``) for people at their own address. Used on one event
    loop; ``admit`` is synchronous, so the bounds hold however many requests arrive together."""

    def __init__(self, at_once: int, per_name: int, own: int, waiting_per_name: int, waiting: int) -> None:
        self.at_once, self.per_name, self.own = at_once, per_name, own
        self.waiting_per_name, self.waiting = waiting_per_name, waiting
        self._all: asyncio.Semaphore | None = None  # made on the loop that uses it
        self.lanes: dict[str, _Lane] = {}  # per name, and "" for everyone at their own address
        self.admitted = 0  # in the names' lanes (not the own lane), checking or waiting
        self.refused = 0

    def admit(self, name: str, own: bool) -> Turn:
        """A turn for a check of ``name``'s password (``own``: at the person's own address, on
        the lane kept for them); Busy, and nothing held, when too many wait already."""
        key, slots = ("", self.own) if own else (f"name:{name}", self.per_name)
        lane = self.lanes.get(key) or _Lane(slots)
        full = not own and self.admitted >= self.at_once + self.waiting
        if full or lane.admitted >= slots + self.waiting_per_name:
            self.refused += 1
            raise Busy
        self.lanes[key] = lane
        lane.admitted += 1
        everyone = None
        if not own:
            self.admitted += 1
            if self._all is None:
                self._all = asyncio.Semaphore(self.at_once)
            everyone = self._all
        return Turn(self, key, lane, everyone)
