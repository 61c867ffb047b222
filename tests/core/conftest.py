from __future__ import annotations

from controller.cards import parse_card
from controller.game_config import GameOptions, default_options
from controller.table import inputs as I
from controller.table.core import Step, Table
from controller.table.virtual import cut_and_cover

T0 = 1_800_000_000.0


class Desk:
    """A table with both batches opened and one in the shoe, the burn card gone, ready to deal.
    ``draw`` feeds a card of the batch in the shoe; ``feed`` any input; time moves one second a step."""

    def __init__(self, options: GameOptions) -> None:
        self.table = Table(options)
        self.now = T0
        self.events: list = []
        for back in ("blue", "red"):
            self.feed(I.DecksOpened(back=back, dealer="d1", floorperson="f1"))
        self.feed(I.BatchToShuffler(back="blue"))
        self.feed(I.ShuffleStarted(back="blue"))
        self.feed(I.ShuffleCompleted(back="blue", cards_counted=self.table.batches["blue"].size))
        if self.table.cuts_at_shuffler:  # 673a.5(b)-(d): cut, cover card, then the shoe
            cut_and_cover(self.feed, self.table, "blue", self.table.batches["blue"].size // 3)
        self.feed(I.BatchToShoe(back="blue"))
        self.feed(I.BatchToShuffler(back="red"))
        self.feed(I.ShuffleStarted(back="red"))
        self.feed(I.ShuffleCompleted(back="red", cards_counted=self.table.batches["red"].size))
        self.draw("2C")  # 673a.7(c): the burn card

    def feed(self, inp: I.Input) -> Step:
        self.now += 1
        step = self.table.handle(inp, self.now)
        self.events.extend(step.events)
        return step

    def draw(self, text: str, back: str = "blue", **kw: object) -> Step:
        return self.feed(I.CardDrawn(card=parse_card(text, back), **kw))  # type: ignore[arg-type]

    def deal(self, cards: str) -> list[Step]:
        return [self.draw(c) for c in cards.split()]

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def make(game: str, **options: object) -> Desk:
    opts = default_options(game)
    if options:
        from dataclasses import replace

        opts = replace(opts, rulings=replace(opts.rulings, **options))
    return Desk(opts)
