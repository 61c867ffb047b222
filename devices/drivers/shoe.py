"""Counting dealing shoe: every card drawn, cards remaining, cover card, batch loaded.

The shoe's counters are checked against each other before its history is read: the draw counter
must move forward, by no more than the shoe's own count of cards went down (or, after a new batch,
by at least what the new batch has lost). A poll where they disagree is held back, not read; the
next poll settles it. Back in agreement with what was trusted before: it was a glitch (one alarm,
nothing unaccounted, and any card drawn meanwhile is read then). Agreeing with the held-back poll:
the shoe was reset (power cycle); its values are the new baseline, and what its own count says
left the shoe unseen is unaccounted for (one alarm). Either way no card is ever read twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.cards import Card, CardError, card
from devices.commands import Command
from devices.drivers.registers import RegisterDriver, Snapshot, moved, ring_word
from devices.errors import FrameDecodeError
from devices.events import (
    BatchLoaded,
    CardDrawn,
    CoverCardReached,
    DeviceEvent,
    DeviceGlitch,
    DrawsMissed,
)
from devices.profiles import DeviceKind

SETTLE_POLLS = 3  # counters that keep disagreeing this many polls: take them as a reset


@dataclass(frozen=True, slots=True)
class Counters:
    draw_seq: int
    remaining: int | None  # None: not known (a journal from before these were kept)
    batch_seq: int | None

    @classmethod
    def of(cls, snap: Snapshot) -> Counters:
        return cls(snap["draw_seq"][0], snap["remaining"][0], snap["batch_seq"][0])


class ShoeDriver(RegisterDriver):
    kind = DeviceKind.SHOE
    commands = ()

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._trusted: Counters | None = None
        self._held: tuple[Counters, str] | None = None  # a poll held back, and why
        self._held_polls = 0
        self._cover = False  # the cover flag as last accepted
        self._cover_pending = False

    def _start(self) -> Counters | None:
        b = self.baseline
        if "draw_seq" not in b:
            return None
        return Counters(b["draw_seq"], b.get("remaining"), b.get("batch_seq"))

    def _disagreement(self, was: Counters, cur: Counters, cur_snap: Snapshot) -> str | None:
        """Why ``cur`` cannot follow ``was``; None when it can."""
        n = moved(was.draw_seq, cur.draw_seq)
        if n is None:
            return f"the draw counter went backwards ({was.draw_seq} to {cur.draw_seq})"
        same_batch = was.batch_seq is None or cur.batch_seq == was.batch_seq
        if was.batch_seq is not None and not same_batch and moved(was.batch_seq, cur.batch_seq or 0) is None:
            return "the batch counter went backwards"
        if same_batch and was.remaining is not None and cur.remaining is not None:
            if was.remaining - (cur.remaining or 0) != n:
                return (
                    f"the draw counter moved by {n} while the shoe's count went from "
                    f"{was.remaining} to {cur.remaining}"
                )
        elif not same_batch and cur.remaining is not None:
            size = cur_snap["batch_size"][0]
            if cur.remaining > size or n < size - cur.remaining:
                return f"the draw counter moved by {n}, fewer than the new batch has lost"
        return None  # a history word that is no card is a broken block (FrameDecodeError), not this

    def _new_seqs(self, last: int, n: int, snap: Snapshot) -> list[int]:
        kept = min(n, len(snap["draw_ring"]))
        return [(last + n - kept + 1 + i) & 0xFFFF for i in range(kept)]

    def _card_at(self, snap: Snapshot, seq: int) -> tuple[Card, bool]:
        rank, suit, back, face_up = self.profile.card_fields(ring_word(snap["draw_ring"], seq))
        try:
            return card(rank, suit, back), face_up
        except CardError:
            raise FrameDecodeError(f"{self.name}: card word is not a playing card") from None

    def settled(self) -> bool:
        return self._held is None and not self._cover_pending

    def diff(self, prev: Snapshot | None, cur: Snapshot) -> list[DeviceEvent]:
        out: list[DeviceEvent] = []
        now = Counters.of(cur)
        trusted = self._trusted if self._trusted is not None else self._start()
        if trusted is None:  # a shoe never seen before: its first poll is the baseline
            self._trusted = now
            return self._cover_events(cur, drawn=0, out=out, first=True)
        why = self._disagreement(trusted, now, cur)
        if why is None:
            if self._held is not None:
                out.append(DeviceGlitch(self.name, "cards", f"{self._held[1]} for one poll"))
            base = trusted
        else:
            held = self._held
            if held is not None and (
                self._disagreement(held[0], now, cur) is None or self._held_polls + 1 >= SETTLE_POLLS
            ):
                # The odd values held: the shoe was reset. Its own count says what left unseen.
                out.append(
                    DeviceGlitch(
                        self.name, "cards", f"{held[1]}: the shoe was reset", remaining=held[0].remaining
                    )
                )
                base = held[0] if self._disagreement(held[0], now, cur) is None else now
            else:
                self._held = (now, why)
                self._held_polls = self._held_polls + 1 if held is not None else 1
                return []  # nothing read from this poll; the cover flag waits too
        n = moved(base.draw_seq, now.draw_seq) or 0
        if base.batch_seq is not None and now.batch_seq != base.batch_seq:
            code = cur["batch_back"][0]
            back = None if code == 0 else self.profile.enum_name("back", code)
            out.append(BatchLoaded(self.name, back, cur["batch_size"][0]))
        ring = len(cur["draw_ring"])
        if n > ring:
            out.append(DrawsMissed(self.name, n - ring))
        seqs = self._new_seqs(base.draw_seq, n, cur)
        remaining = now.remaining or 0
        for i, seq in enumerate(seqs):
            c, face_up = self._card_at(cur, seq)
            left = remaining + (len(seqs) - 1 - i)
            out.append(CardDrawn(self.name, c, face_up, seq, left, now.batch_seq or 0))
        self._cover_events(cur, drawn=n, out=out)
        self._trusted, self._held, self._held_polls = now, None, 0
        return out

    def _cover_events(
        self, cur: Snapshot, drawn: int, out: list[DeviceEvent], first: bool = False
    ) -> list[DeviceEvent]:
        """The cover card counts once it comes out with a card drawn, or holds for two polls: a
        flag that flickers for one poll between draws is not a reshuffle."""
        flag = bool(cur["cover"][0])
        if not flag:
            self._cover = self._cover_pending = False
        elif not self._cover:
            if drawn or self._cover_pending or first:
                self._cover, self._cover_pending = True, False
                out.append(CoverCardReached(self.name, cur["remaining"][0]))
            else:
                self._cover_pending = True
        return out

    async def _send(self, command: Command) -> None:  # pragma: no cover - no commands
        raise AssertionError(command)
