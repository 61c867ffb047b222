"""Two batches of cards and where every card of each one is.

673a.3(b), 665a.3(b), 685a.3(b): two batches with the same number of decks and different back
colours; one is shuffled and stored in the shuffler while the other is dealt; they alternate shoe
by shoe; only one batch is in the discard rack at a time. Conservation: every card of a batch is
in exactly one place, and the count of each place is kept so a card that appears too often, or a
count that does not add up, is noticed at once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum


class Place(StrEnum):
    NEW = "new"  # received and inspected at the table, not yet in play
    SHUFFLER = "shuffler"
    SHOE = "shoe"
    LAYOUT = "layout"  # on a box or in the dealer's hand this round
    DISCARD = "discard"
    REMOVED = "removed"  # out of play (a deck removed from the table, 687a.9(h))


class ShufflerState(StrEnum):
    UNSHUFFLED = "unshuffled"
    SHUFFLING = "shuffling"
    READY = "ready"
    JAMMED = "jammed"  # 673a.13(k): must be reshuffled


@dataclass(slots=True)
class Batch:
    back: str
    composition: Counter[str]  # card text -> copies in the batch
    opened_at: float | None = None
    inspected: bool = False
    location: Place = Place.NEW  # where the batch as a whole is (its cards' home)
    shuffler: ShufflerState = ShufflerState.UNSHUFFLED
    counted_53: bool = False  # 687a.9(f): the shuffler counted the whole deck after this shuffle
    places: Counter[Place] = field(default_factory=Counter)
    drawn: Counter[str] = field(default_factory=Counter)  # cards out of the shoe since it was loaded

    def __post_init__(self) -> None:
        if not self.places:
            self.places[self.location] = self.size

    @property
    def size(self) -> int:
        return sum(self.composition.values())

    def gather(self, place: Place) -> None:
        """Every card of the batch is now in ``place`` (loaded into the shuffler, into the shoe)."""
        self.places = Counter({place: self.size})
        self.location = place
        self.drawn.clear()

    def move(self, n: int, src: Place, dst: Place) -> None:
        self.places[src] -= n
        self.places[dst] += n

    def conserved(self) -> bool:
        return sum(self.places.values()) == self.size and all(v >= 0 for v in self.places.values())

    def can_draw(self, card_text: str) -> bool:
        """False when this card has already come out of the shoe as often as the batch holds it."""
        return self.drawn[card_text] < self.composition.get(card_text, 0)
