"""The cut and shuffle procedure of 665a.5 and 685a.5, which reads as 673a.5 does (the Double Back
Jack cases are in test_shuffle_and_cut.py): by hand at a table without a shuffler, the cut at
least ten cards from either end, the cover card at least a quarter in from the bottom, a recut on
the floor's order, the burn card, and after a floor-ordered reshuffle the cut from the far right."""

from __future__ import annotations

import pytest

from controller.table import inputs as I
from tests.table.helpers import DA, DU, Rig


@pytest.mark.parametrize("game", [DA, DU])
def test_the_cut_and_the_cover_card_in_665a_and_685a(game: str) -> None:
    """665a.5(a)-(f), 685a.5(a)-(f), 665a.7(c), 685a.7(c)."""
    rig = Rig(game, automated_shuffler=False)
    rig.open_batches()
    rig.feed(I.NewDealer(name="dealer-1"))
    sec = rig.sec
    rig.refuse(I.BatchToShoe(back="blue"), sec("5(d)"))  # not shuffled and cut
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))  # 5(a)
    n = rig.size()  # 384 cards in 665a (eight decks of 48), 312 in 685a (six of 52)
    assert n == {DA: 8 * 48, DU: 6 * 52}[game]
    for at in (9, n - 9):
        rig.refuse(I.CutMade(at=at, by=0), sec("5(d)"))
    rig.feed(I.CutMade(at=10, by=0))  # 5(b): no player is offered it yet; the dealer cuts
    rig.feed(I.RecutOrdered(by="floor-1"))  # 5(e)
    rig.feed(I.CutMade(at=n - 10, by=0))
    quarter = -(-n // 4)  # 96 in 665a, 78 in 685a
    rig.refuse(I.CoverCardPlaced(from_bottom=quarter - 1), sec("5(d)"))
    rig.feed(I.CoverCardPlaced(from_bottom=quarter))
    rig.load("blue")
    rig.burn()  # 7(c)
    rig.play_round((2, 5))
    rig.feed(I.ReshuffleOrdered(by="floor-1"))  # 5(f)
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    assert rig.offered() == [5, 2]  # 5(c)(4): from the player farthest to the dealer's right
    rig.refuse(I.CutMade(at=20, by=2), sec("5(c)"))
    rig.feed(I.CutRefused(seat=5))
    rig.feed(I.CutMade(at=20, by=2))
    assert rig.conserved()
