"""The cut and the cover card (673a.5(d)) and the simulator's shoe procedure (673a.7(c),(d))."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import standard_deck
from controller.errors import RuleViolation
from controller.shoe import Shoe, cut, min_cover_from_bottom, shuffled_shoe


def test_673a_5d_cut_moves_the_cards_above_to_the_bottom() -> None:
    stack = standard_deck() * 2
    out = cut(stack, 30)
    assert out[:74] == stack[30:] and out[74:] == stack[:30]
    with pytest.raises(RuleViolation, match=r"^673a\.5\(d\)"):
        cut(stack, 9)
    with pytest.raises(RuleViolation, match=r"^673a\.5\(d\)"):
        cut(stack, len(stack) - 9)


def test_673a_5d_cover_card_at_least_a_quarter_from_the_bottom() -> None:
    """673a.5(d) placement; 673a.7(d): the cover card is reached with the cards behind it left."""
    assert min_cover_from_bottom(312) == 78
    assert min_cover_from_bottom(313) == 79
    with pytest.raises(RuleViolation, match=r"^673a\.5\(d\)"):
        Shoe.load(standard_deck() * 6, 77)
    shoe = Shoe.load(standard_deck() * 6, 78)
    while not shoe.cover_reached:
        shoe.draw()
    assert shoe.remaining == 78 and shoe.dealt == 312 - 78


@given(st.integers(min_value=0, max_value=2**32), st.sampled_from([1, 2, 4, 6, 8]))
def test_shuffled_shoe_is_a_permutation_with_a_legal_cover(seed: int, decks: int) -> None:
    batch = standard_deck() * decks
    shoe = shuffled_shoe(batch, random.Random(seed))
    assert sorted(map(str, shoe.cards)) == sorted(map(str, batch))
    assert min_cover_from_bottom(len(batch)) <= shoe.behind_cover
    assert shoe.behind_cover <= len(batch) * 0.30 + 1
