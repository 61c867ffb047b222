"""Shoe driver against the simulated shoe, dealing a real shuffled batch from the sim shuffler."""

from __future__ import annotations

from collections import Counter

from controller.games import GAMES, GameId
from devices.drivers.shoe import SETTLE_POLLS
from devices.events import (
    BatchLoaded,
    CardDrawn,
    CoverCardReached,
    DeviceGlitch,
    DrawsMissed,
    Slot,
)
from sim.models import ShufflerModel
from tests.devices.conftest import Rig, drain, of_type, poll_until


async def _load_shoe(rig: Rig, slot: Slot = Slot.A) -> None:
    shuffler: ShufflerModel = rig.model("shuffler")
    shuffler.start(slot)
    rig.clock.advance(shuffler.cycle_s)
    shuffler.update()
    rig.table.eject_direct(slot)


async def test_a_full_shoe_is_a_permutation_of_the_batch(rig: Rig) -> None:
    shoe = rig.driver("shoe")
    await shoe.poll_once()
    await _load_shoe(rig)
    loaded, _ = await poll_until(shoe, BatchLoaded)
    assert (loaded.back, loaded.cards) == ("red", 312)
    model = rig.model("shoe")
    drawn: list[CardDrawn] = []
    covers: list[CoverCardReached] = []
    while model.remaining:
        for _ in range(min(5, model.remaining)):
            model.draw()
        await shoe.poll_once()
        events = drain(shoe)
        drawn += of_type(events, CardDrawn)
        covers += of_type(events, CoverCardReached)
    batch = GAMES[GameId.DOUBLE_BACK_JACK].batch(6, "red")
    assert Counter(d.card for d in drawn) == Counter(batch)
    assert [d.card for d in drawn] != batch  # shuffled, not in deck order
    assert [d.sequence for d in drawn] == list(range(1, 313))
    assert [d.remaining for d in drawn] == list(range(311, -1, -1))
    assert not any(d.face_up for d in drawn)
    assert len(covers) == 1 and covers[0].remaining <= 312 // 4


async def test_the_same_seed_deals_the_same_order_and_another_does_not(rig_factory) -> None:  # type: ignore[no-untyped-def]
    orders = []
    for seed in (5, 5, 6):
        rig: Rig = await rig_factory(seed=seed)
        await _load_shoe(rig)
        orders.append([rig.model("shoe").draw().card for _ in range(20)])
    assert orders[0] == orders[1] != orders[2]


async def test_more_draws_than_the_ring_holds_are_reported_missed(rig: Rig) -> None:
    shoe = rig.driver("shoe")
    await _load_shoe(rig)
    await shoe.poll_once()
    drain(shoe)
    for _ in range(11):
        rig.model("shoe").draw()
    await shoe.poll_once()
    events = drain(shoe)
    assert [e.count for e in of_type(events, DrawsMissed)] == [3]
    assert [e.sequence for e in of_type(events, CardDrawn)] == list(range(4, 12))


async def test_foreign_card_and_face_up_card_are_reported_as_dealt(rig: Rig) -> None:
    faults = rig.model("shuffler").faults
    faults.foreign_card = True
    faults.face_up_card = True
    shoe = rig.driver("shoe")
    await _load_shoe(rig)
    await shoe.poll_once()
    drawn: list[CardDrawn] = []
    model = rig.model("shoe")
    while model.remaining:
        for _ in range(min(8, model.remaining)):
            model.draw()
        await shoe.poll_once()
        drawn += of_type(drain(shoe), CardDrawn)
    assert [d.back for d in drawn].count("blue") == 1
    assert sum(d.face_up for d in drawn) == 1


async def test_batches_alternate_between_the_two_slots(rig: Rig) -> None:
    shoe = rig.driver("shoe")
    await shoe.poll_once()
    await _load_shoe(rig, Slot.A)
    await _load_shoe(rig, Slot.B)
    await shoe.poll_once()
    assert of_type(drain(shoe), BatchLoaded)[-1].back == "blue"
    # The red batch went back into slot A for its next shuffle.
    assert rig.model("shuffler").slots[Slot.A].state.value == "idle"
    assert len(rig.model("shuffler").slots[Slot.A].cards) == 312


async def test_a_shoe_that_resets_is_one_glitch_and_read_on_from_zero(rig: Rig) -> None:
    """Issue 11: a power cycle that holds for SETTLE_POLLS polls (counter and history back to
    zero, the cards still in it) is one DeviceGlitch naming the reset, with the shoe's own count
    to settle the table's and its counters to journal (issue 21: not raised again at a restart);
    no card from before the reset is read again, the first one after it is read."""
    shoe = rig.driver("shoe")
    await _load_shoe(rig)
    await shoe.poll_once()
    model = rig.model("shoe")
    for _ in range(5):
        model.draw()
    await shoe.poll_once()
    drain(shoe)
    model.draw()  # drawn just before the power went: never seen by the driver
    model.draw_seq, model.ring = 0, [None] * len(model.ring)  # the power cycle
    for _ in range(SETTLE_POLLS - 1):
        await shoe.poll_once()
        assert drain(shoe) == []  # held back: a glitch or a reset, not yet known
    await shoe.poll_once()
    glitches = of_type(events := drain(shoe), DeviceGlitch)
    assert len(glitches) == 1 and "reset" in glitches[0].reason and glitches[0].remaining == model.remaining
    assert not glitches[0].halts and dict(glitches[0].counters)["draw_seq"] == 0  # journalled with it
    assert not of_type(events, CardDrawn)
    after = model.draw()
    await shoe.poll_once()
    drawn = of_type(drain(shoe), CardDrawn)
    assert [(d.card, d.sequence) for d in drawn] == [(after.card, 1)]
    assert shoe.health.value == "online"


async def test_a_shoe_that_clears_its_history_with_a_new_batch_disowns_nothing(rig: Rig) -> None:
    """Issue 21: a draw already read is a conflict only when the shoe's history holds another card
    there in the same batch; a shoe that forgets its history when a batch comes in (the device
    docs do not say it keeps it) disowns nothing."""
    shoe = rig.driver("shoe")
    await _load_shoe(rig)
    await shoe.poll_once()
    model = rig.model("shoe")
    for _ in range(3):
        model.draw()
    await shoe.poll_once()
    drain(shoe)
    model.ring = [None] * len(model.ring)  # this shoe forgets its history ...
    await _load_shoe(rig, Slot.B)  # ... when the next batch comes in
    for _ in range(SETTLE_POLLS):
        await shoe.poll_once()
    events = drain(shoe)
    assert not of_type(events, DeviceGlitch) and [e.back for e in of_type(events, BatchLoaded)] == ["blue"]
