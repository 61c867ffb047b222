"""Counting dealing shoe: every card drawn, cards remaining, cover card, batch loaded.

The shoe's counters are checked against each other before its history is read: the draw counter
must move forward, by no more than the shoe's own count of cards went down (or, after a new batch,
by at least what the new batch has lost), and its history must still hold, at every draw already
read, the card that was read there. A poll that disagrees is held back, not read, for up to
SETTLE_POLLS polls (a glitch is shorter):

- back in agreement with what was read within them: a glitch, one alarm, nothing unaccounted,
  and any card drawn meanwhile is read then;
- still disagreeing after them, it is decided once, with one alarm whose counters are journalled
  (a restart does not raise it again): a power cycle (counter near zero, history empty) is a
  reset, and what the shoe's own count says left it unseen is unaccounted for; a shoe that
  disowns a draw already journalled (a forged or stale poll was read) is a conflict, one halting
  alarm naming the cards to check, never a silent choice of which side is right.

Either way no card is ever read twice, and the cards drawn during the settle window are read.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.cards import Card, CardError, card
from devices.commands import Command
from devices.drivers.registers import RegisterDriver, Snapshot, moved
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
from devices.rings import ring_word

SETTLE_POLLS = 3  # polls a disagreement must hold before it is decided (a glitch is shorter)
CHECK_NAMED = 5  # at most this many cards named in one conflict (the alarm says how many more)


@dataclass(frozen=True, slots=True)
class Counters:
    draw_seq: int
    remaining: int | None  # None: not known (a journal from before these were kept)
    batch_seq: int | None

    @classmethod
    def of(cls, snap: Snapshot) -> Counters:
        return cls(snap["draw_seq"][0], snap["remaining"][0], snap["batch_seq"][0])

    def items(self) -> tuple[tuple[str, int], ...]:
        pairs = (("draw_seq", self.draw_seq), ("remaining", self.remaining), ("batch_seq", self.batch_seq))
        return tuple((k, v) for k, v in pairs if v is not None)


class ShoeDriver(RegisterDriver):
    kind = DeviceKind.SHOE
    commands = ()

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._trusted: Counters | None = None
        # Polls held back (their counters disagree with what was read): the first of the run
        # that follow each other, why, and how many.
        self._held: tuple[Counters, str] | None = None
        self._held_last: Counters | None = None
        self._held_polls = 0
        # The card word read at each draw still in the shoe's history: a later poll whose history
        # holds another card there (or whose counter says that draw never happened) disowns a
        # card that was journalled, which is a conflict for the floor, not a glitch.
        self._read: dict[int, tuple[int, int | None]] = {}  # draw -> (card word, batch_seq)
        self._cover = False  # the cover flag as last accepted
        self._cover_pending = False
        # The draw counter's width as the profile declares it (16, or 32 for a u32): draw numbers
        # wrap only past it, in the events and the journal alike.
        self._bits = self.profile.reg("draw_seq").bits
        self._mask = (1 << self._bits) - 1
        self._batch_bits = self.profile.reg("batch_seq").bits

    def _draws(self, last: int, cur: int) -> int | None:
        return moved(last, cur, self._bits)

    def _beyond(self, seq: int, draw_seq: int) -> bool:
        """Whether draw ``seq`` is past a shoe whose draw counter says ``draw_seq``."""
        return (self._draws(draw_seq, seq) or 0) > 0

    def counters(self, snap: Snapshot) -> dict[str, int]:
        return dict(Counters.of(snap).items())

    def _start(self) -> Counters | None:
        b = self.baseline
        if "draw_seq" not in b:
            return None
        return Counters(b["draw_seq"], b.get("remaining"), b.get("batch_seq"))

    def _disagreement(self, was: Counters, cur: Counters, cur_snap: Snapshot) -> str | None:
        """Why ``cur`` cannot follow ``was``; None when it can."""
        n = self._draws(was.draw_seq, cur.draw_seq)
        if n is None:
            return f"the draw counter went backwards ({was.draw_seq} to {cur.draw_seq})"
        same_batch = was.batch_seq is None or cur.batch_seq == was.batch_seq
        if (
            was.batch_seq is not None
            and not same_batch
            and moved(was.batch_seq, cur.batch_seq or 0, self._batch_bits) is None
        ):
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

    def _disowned(self, cur: Counters, snap: Snapshot) -> list[int]:
        """The draws read (and so journalled) that this poll contradicts: past its draw counter,
        or with another card in its history at that draw (same batch: a shoe may clear its history
        when a batch comes in, and an empty entry contradicts nothing)."""
        ring = snap["draw_ring"]
        out = []
        for seq, (word, batch) in sorted(self._read.items()):
            in_history = (self._draws(seq, cur.draw_seq) or 0) < len(ring) and batch == cur.batch_seq
            now = ring_word(ring, seq)
            if self._beyond(seq, cur.draw_seq) or (in_history and now and now != word):
                out.append(seq)
        return out

    def _was_reset(self, cur: Counters, snap: Snapshot) -> bool:
        """A power cycle: the draw counter back near zero and the history beyond it empty."""
        ring = snap["draw_ring"]
        return cur.draw_seq < len(ring) and not any(ring[cur.draw_seq :])

    def _why(self, was: Counters, cur: Counters, snap: Snapshot) -> str | None:
        why = self._disagreement(was, cur, snap)
        if why is None and self._disowned(cur, snap):
            why = "the shoe's history holds another card at a draw already read"
        return why

    def _new_seqs(self, last: int, n: int, snap: Snapshot) -> list[int]:
        kept = min(n, len(snap["draw_ring"]))
        return [(last + n - kept + 1 + i) & self._mask for i in range(kept)]

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
        why = self._why(trusted, now, cur)
        if why is None:
            if self._held is not None:
                # Back in line with what was read: the odd polls were a glitch, nothing read
                # from them, nothing unaccounted for; any card drawn meanwhile is read now.
                polls = "one poll" if self._held_polls == 1 else f"{self._held_polls} polls"
                out.append(DeviceGlitch(self.name, "cards", f"{self._held[1]} for {polls}"))
            base = trusted
        else:
            held, last = self._held, self._held_last
            if held is None or last is None or self._disagreement(last, now, cur) is not None:
                held, self._held_polls = (now, why), 0  # a new run of odd polls starts here
            self._held, self._held_last = held, now
            self._held_polls += 1
            if self._held_polls < SETTLE_POLLS:
                return []  # nothing read from this poll; the cover flag waits too
            out.append(self._decided(held, now, cur))
            base = held[0]  # the device's own values since the run began: cards since are read
        n = self._draws(base.draw_seq, now.draw_seq) or 0
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
            self._read[seq] = (ring_word(cur["draw_ring"], seq), now.batch_seq)
        for old in [s for s in self._read if (self._draws(s, now.draw_seq) or 0) >= ring]:
            del self._read[old]  # out of the shoe's history: nothing left to compare it with
        self._cover_events(cur, drawn=n, out=out)
        self._trusted, self._held, self._held_last, self._held_polls = now, None, None, 0
        return out

    def _decided(self, held: tuple[Counters, str], now: Counters, cur: Snapshot) -> DeviceGlitch:
        """The shoe has said something else than what was read for SETTLE_POLLS polls: one
        alarm, with its counters journalled so that a restart does not raise it again. A
        power cycle (history gone) is a reset: the shoe's own count says what left it unseen. A
        shoe whose history disowns draws already journalled (a forged or stale poll that was
        read) is a conflict: one halting alarm naming the cards to check, never a silent choice
        of which side is right. Anything else (a counter that moved past what its count says)
        halts too: the floor counts the shoe."""
        base, why = held
        counters = base.items()  # read on from here: the cards drawn since come after it
        if self._was_reset(now, cur):
            self._read.clear()
            return DeviceGlitch(
                self.name, "cards", f"{why}: the shoe was reset", remaining=base.remaining, counters=counters
            )
        disowned = self._disowned(base, cur)
        count = len(disowned)
        trusted = self._trusted or self._start()
        if not disowned and trusted is not None and self._beyond(trusted.draw_seq, base.draw_seq):
            # Read before a restart: the cards are in the journal, the driver has not their words.
            count = (trusted.draw_seq - base.draw_seq) & self._mask
            disowned = [(base.draw_seq + 1 + i) & self._mask for i in range(min(count, CHECK_NAMED))]
        check = []
        for seq in disowned[:CHECK_NAMED]:
            read = self._read.get(seq)
            check.append((seq, str(self._card_word(read[0])) if read is not None else ""))
        for seq in disowned:
            self._read.pop(seq, None)
        if not count:
            return DeviceGlitch(
                self.name, "cards", why, remaining=base.remaining, counters=counters, halts=True
            )
        more = f" (the first {CHECK_NAMED} named)" if count > CHECK_NAMED else ""
        draws = "a draw" if count == 1 else f"{count} draws"
        return DeviceGlitch(
            self.name, "cards", f"{why}; the shoe disowns {draws} the journal has{more}",
            counters=counters, halts=True, check=tuple(check),
        )  # fmt: skip

    def _card_word(self, word: int) -> Card | str:
        rank, suit, back, _ = self.profile.card_fields(word)
        try:
            return card(rank, suit, back)
        except CardError:
            return "?"

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
