"""A public record's payload must be its kind's (controller/archive/kinds.py: refusal). For most
kinds that is a matter of its keys alone, so a worker decodes each key set once and remembers the
ones that fitted: these properties hold the remembered answer to the full decode, for every kind,
whatever the values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.archive import kinds
from controller.archive.kinds import BY_KEYS, KINDS, refusal
from controller.journal import Classification
from controller.table.events import EVENT_TYPES, DomainEvent, typed
from controller.table.recorder import SEEN_KEY
from tests.archive.conftest import payload_of

PUBLIC = sorted(k for k, c in KINDS.items() if c is Classification.PUBLIC)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def decoded(kind: str, payload: dict[str, Any]) -> bool:
    fields = {k: v for k, v in payload.items() if k != SEEN_KEY} if kind != "device_seen" else payload
    try:
        typed(DomainEvent(kind, dict(fields), 0.0))
    except (ValueError, TypeError, KeyError):
        return False
    return True


def test_nearly_every_kind_is_checked_by_its_keys() -> None:
    """The two kinds whose decoder is their own (their payload is not their fields one for one)
    are decoded every time."""
    assert set(PUBLIC) - BY_KEYS == {"offer_answered", "round_settled"}


@pytest.mark.parametrize("kind", PUBLIC)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_remembered_answer_is_the_full_decode_s(kind: str, data: st.DataObject) -> None:
    names = sorted(EVENT_TYPES[kind]._names) if kind in EVENT_TYPES else []
    keys = data.draw(st.sets(st.sampled_from([*names, "extra", SEEN_KEY]) if names else st.just("x")))
    if data.draw(st.booleans()):
        keys |= set(payload_of(kind, 3))  # often the whole shape, so the memory is used
    first = {k: data.draw(values) for k in keys}
    again = {k: data.draw(values) for k in keys}  # the same keys, other values
    assert (refusal(kind, "public", first) is None) == decoded(kind, first)
    assert (refusal(kind, "public", again) is None) == decoded(kind, again)
    if kind in BY_KEYS:
        # What the memory rests on: for these kinds the values never decide.
        assert decoded(kind, first) == decoded(kind, again)


def test_a_shape_that_did_not_fit_is_refused_each_time() -> None:
    kinds._FITTED.clear()
    good = payload_of("card_dealt", 2)
    bad = {**good, "extra": 1}
    for _ in range(2):
        assert refusal("card_dealt", "public", bad) == "payload is not that of a 'card_dealt' record"
        assert refusal("card_dealt", "public", good) is None
    assert ("card_dealt", frozenset(bad)) not in kinds._FITTED
