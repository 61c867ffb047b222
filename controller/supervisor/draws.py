"""Which of the shoe's draws are public at the table now, by draw, never by card value.

A shoe that disowns draws the journal has is a halting alarm naming the draws to check
(controller/table/devices.py); a draw's card may be named in it only once that very draw is face
up at the table. Deciding by value named a hole card whenever a player held a card of the same
rank and suit from another deck of the batch ("check draw 161, draw 168 (10H)" with 10H the hole
card). So the shell keeps, per draw number of the shoe, what the table did with the card: a card
dealt face up (``card_dealt``, ``card_discarded_extra``) is public from its step on; the hole card
(``hole_card_dealt``) once turned or exposed; a card held aside (``card_held``) once exposed or
dealt face up; a burned card or one found face up in the shoe never.

Kept in memory only: after a restart the shoe's driver has not the words of the draws it read
before (it names none of them), so there is nothing to decide for those.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from controller.table.events import DomainEvent
from controller.table.recorder import Seen

KEEP = 1024  # draws remembered: far more than any shoe's history ring names
_FACE_UP = frozenset({"card_dealt", "card_discarded_extra"})
_HIDDEN = frozenset({"hole_card_dealt", "card_held", "card_burned", "card_discarded_face_up"})


class DrawLedger:
    def __init__(self) -> None:
        self._public: OrderedDict[int, bool] = OrderedDict()  # draw number -> public now
        self._hole: int | None = None  # the draw of the round's hole card, until it is shown
        self._held: int | None = None  # the draw of the card held aside, until it is shown

    def public(self, draw: int) -> bool:
        return self._public.get(draw, False)

    def before(self, draw: int | None) -> None:
        """A step for a draw is about to be decided: whatever was known of that number before (a
        reset shoe or a wrapped counter reuses numbers) no longer holds."""
        if draw is not None:
            self._public.pop(draw, None)

    def after(self, draw: int | None, events: Iterable[DomainEvent]) -> None:
        """A step committed: the draw it read (a card drawn's step), if any, and what its events
        show (a hole card turned in a later step, say)."""
        for e in events:
            held = bool(e.payload.get("held"))
            source = self._held if held else draw
            if held:
                self._held = None
            if e.kind in _FACE_UP and source is not None:
                self._set(source, True)
            elif e.kind in _HIDDEN and source is not None:
                self._set(source, False)
                if e.kind == "hole_card_dealt":
                    self._hole = source
                elif e.kind == "card_held":
                    self._held = source
            elif e.kind in ("hole_card_turned", "hole_card_exposed") and self._hole is not None:
                self._set(self._hole, True)
                self._hole = None
            elif e.kind == "held_card_exposed" and self._held is not None:
                self._set(self._held, True)

    def _set(self, draw: int, public: bool) -> None:
        self._public[draw] = public
        self._public.move_to_end(draw)
        while len(self._public) > KEEP:
            self._public.popitem(last=False)

    def named(self, check: tuple[tuple[int, str], ...]) -> tuple[tuple[int, str], ...]:
        """``check`` (draw number, card read) with each card not public by its draw left out."""
        return tuple((draw, card if card and self.public(draw) else "") for draw, card in check)


def draw_of(seen: Seen | None) -> int | None:
    """The shoe's draw number a card drawn was read at (its ``draw_seq`` counter)."""
    if seen is None:
        return None
    return next((v for k, v in seen.counters if k == "draw_seq"), None)
