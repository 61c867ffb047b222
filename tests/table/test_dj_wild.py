"""Issue 3, DJ Wild Stud Poker dealt from the hand (687a.9): five cards a box, five to the dealer,
one to the layout and the stub to the discard rack; the stub count at least every 5 rounds unless
the shuffler counted 53 cards; a wrong count voids the round (and removes the deck when the cards
were not misdealt); the Progressive sensors locked by Start Game."""

from __future__ import annotations

import pytest

from controller.table import inputs as I
from controller.table.asking import asking
from controller.table.batches import Place
from controller.table.core import Command
from tests.table.helpers import WILD, Rig, ready

DECK = 53


def _dealt(rig: Rig, boxes: tuple[int, ...] = (1, 3), sensed: tuple[int, ...] = ()) -> None:
    """A round opened on ``boxes``, the Progressive sensors read, Start Game pressed, the hands dealt."""
    rig.feed(I.WildRoundOpened(boxes=boxes))
    for box in sensed:
        rig.feed(I.BetSensed(box=box, present=True))
    rig.feed(I.StartGame())
    rig.feed(I.WildHandsDealt())


def _round(rig: Rig, boxes: tuple[int, ...] = (1, 3), count: int | None = None) -> None:
    """A whole round; the stub counted when ``count`` is given, else put away with "next"."""
    if rig.table.shoe_back is None:
        rig.next_shoe(counted=rig.table.batches[rig.table.batch_in(Place.SHUFFLER)[0]].counted_53)
    _dealt(rig, boxes)
    if count is None:
        rig.feed(I.KeyPressed(key="next"))
    else:
        rig.feed(I.StubCounted(count=count))
    assert not rig.table.in_round


def _dealt_and_count_due(rig: Rig) -> None:
    """The next round dealt from an uncounted deck, and "next" refused: the stub is counted now."""
    rig.next_shoe(counted=False)
    _dealt(rig)
    rig.refuse(I.KeyPressed(key="next"), "687a.9(f)")


def _expected_stub(boxes: int) -> int:
    return DECK - (5 * boxes + 5 + 1)


# ------------------------------------------------------------------ the deal
@pytest.mark.parametrize("boxes", [(1,), (1, 3), (1, 2, 3, 4, 5, 6)])
def test_five_cards_a_box_five_to_the_dealer_one_to_the_layout(boxes: tuple[int, ...]) -> None:
    """687a.9(c), 687a.9(d), 687a.9(e): five cards to each box with Ante and Blind, five to the
    dealer, one card to the layout; the rest (the stub) is put in the discard rack unexposed."""
    rig = ready(WILD)
    assert rig.table.burns_due == 0  # dealt from the hand: no burn card in 687a.9
    _dealt(rig, boxes)
    dealt = 5 * len(boxes) + 5 + 1
    (event,) = [e for e in rig.events if e.kind == "wild_round_dealt"]
    assert event.payload["cards"] == dealt
    assert rig.places("blue") == {Place.LAYOUT: dealt, Place.SHOE: DECK - dealt}
    rig.feed(I.KeyPressed(key="next"))
    assert Place.SHOE not in rig.places("blue")
    assert rig.places("blue") == {Place.DISCARD: DECK}
    assert rig.conserved()


def test_boxes_are_those_of_the_table() -> None:
    """687a.9(c): the boxes dealt are betting positions of the table, at least one."""
    rig = ready(WILD)
    rig.refuse(I.WildRoundOpened(boxes=()), "687a.9(c)")
    rig.refuse(I.WildRoundOpened(boxes=(0,)), "687a.9(c)")
    rig.refuse(I.WildRoundOpened(boxes=(7,)), "687a.9(c)")


def test_nothing_is_dealt_without_a_shuffled_deck_in_hand() -> None:
    """687a.9(a)(2): the shuffled deck is placed in the dealer's hand before a round is dealt."""
    rig = Rig(WILD)
    rig.open_batches()
    rig.refuse(I.WildRoundOpened(boxes=(1,)), "687a.9")
    rig.refuse(I.WildHandsDealt(), "687a.9(c)")


def test_no_bets_are_asked_for_while_no_deck_is_in_the_dealers_hand() -> None:
    """687a.9(a)(2): between the end of a round (its deck back to the shuffler) and the next deck
    in the dealer's hand, the table asks for that deck, not for bets: Start Game would be refused."""
    rig = ready(WILD, counted=False)
    assert asking(rig.table)["what"] == "bets"
    _round(rig)
    assert rig.table.shoe_back is None
    ask = asking(rig.table)
    assert ask["what"] == "batch" and ask["into"] == "hand" and ask["section"] == "687a.9(a)(2)"
    rig.refuse(I.WildRoundOpened(boxes=(1,)), "687a.9(a)(2)")
    rig.next_shoe(counted=False)
    assert asking(rig.table)["what"] == "bets"


def test_the_stub_is_counted_after_the_deal_only() -> None:
    """687a.9(f): the stub is counted once the cards are dealt."""
    rig = ready(WILD)
    rig.refuse(I.StubCounted(count=37), "687a.9(f)")
    rig.feed(I.WildRoundOpened(boxes=(1,)))
    rig.feed(I.StartGame())
    rig.refuse(I.StubCounted(count=37), "687a.9(f)")


# ------------------------------------------------------------------ the stub count
def test_without_a_53_card_count_the_stub_is_counted_every_5_rounds() -> None:
    """687a.9(f): without a shuffler that counts 53 cards after each shuffle, the dealer counts the
    stub at least once every 5 rounds: the 5th uncounted round may not end with "next"."""
    rig = ready(WILD, counted=False)
    for n in range(1, 5):
        _round(rig)
        assert rig.table.round_no == n
    _dealt_and_count_due(rig)
    step = rig.feed(I.StubCounted(count=_expected_stub(2)))
    (counted,) = [e.payload for e in step.events if e.kind == "stub_counted"]
    assert counted["ok"] is True
    assert "round_settled" in rig.kinds(step)
    assert rig.places("blue") == {Place.DISCARD: DECK}  # 687a.9(g): into the discard rack
    # the count starts again: four more rounds with "next", the fifth is counted
    for _ in range(4):
        _round(rig)
    _dealt_and_count_due(rig)


def test_a_count_in_between_restarts_the_five_rounds() -> None:
    """687a.9(f): "at least once every 5 rounds": a count in round 3 lets rounds 4 to 7 end
    uncounted; round 8 is counted."""
    rig = ready(WILD, counted=False)
    _round(rig)
    _round(rig)
    _round(rig, count=_expected_stub(2))
    for _ in range(4):
        _round(rig)
    _dealt_and_count_due(rig)


def test_a_shuffler_that_counted_53_cards_needs_no_stub_count() -> None:
    """687a.9(f): with a shuffler that counts the cards after each shuffle and shows 53 present,
    the stub goes to the discard rack uncounted, round after round."""
    rig = ready(WILD, counted=True)
    for _ in range(12):
        _round(rig)
    assert rig.table.round_no == 12


def test_a_short_shuffler_count_is_not_a_53_card_count() -> None:
    """687a.9(f): a shuffler count of 52 does not show 53 cards present: the deck is not dealt."""
    rig = Rig(WILD)
    rig.open_batches()
    rig.shuffle("blue", counted=52)
    assert not rig.table.batches["blue"].counted_53
    assert any(e.kind == "alarm_raised" for e in rig.events)
    rig.refuse(I.BatchToShoe(back="blue"), "687a.")


# ------------------------------------------------------------------ a wrong count
def test_a_wrong_count_of_misdealt_cards_voids_the_round_and_returns_the_wagers() -> None:
    """687a.9(h): the count is wrong and the cards were misdealt (53 remain): all hands are void and
    all wagers returned; the deck stays."""
    rig = ready(WILD, counted=False)
    _dealt(rig, (1, 3), sensed=(1,))
    step = rig.feed(I.StubCounted(count=_expected_stub(2) - 1))
    (counted,) = [e.payload for e in step.events if e.kind == "stub_counted"]
    assert counted["ok"] is False
    alarms = [e.payload for e in step.events if e.kind == "alarm_raised"]
    assert alarms and alarms[0]["section"] == "687a.9(h)" and alarms[0]["halts"]
    assert alarms[0]["floor_action"]
    step = rig.feed(I.MisdealDetermined(misdealt=True, by="dealer-1"))
    kinds = rig.kinds(step)
    assert "round_voided" in kinds
    assert "deck_removed" not in kinds
    assert not rig.table.halted
    assert not rig.table.in_round
    assert Place.REMOVED not in rig.places("blue")
    assert rig.conserved()


def test_a_wrong_count_is_not_put_away_with_next() -> None:
    """687a.9(h): after a wrong count the hands are void: the round may not be finished as though
    the stub were right ("next" puts the stub away and settles the round)."""
    rig = ready(WILD, counted=False)
    _dealt(rig, (1, 3))
    rig.feed(I.StubCounted(count=_expected_stub(2) - 1))
    assert rig.table.halted
    rig.refuse(I.KeyPressed(key="next"), "687a.9")
    rig.refuse(I.StubCounted(count=_expected_stub(2)), "687a.9")


def test_a_wrong_count_not_misdealt_removes_the_whole_deck() -> None:
    """687a.9(h): the count is wrong and the cards were not misdealt: all hands void, all wagers
    returned and the entire deck removed from the table."""
    rig = ready(WILD, counted=False)
    _dealt(rig, (2,))
    rig.feed(I.StubCounted(count=_expected_stub(1) + 2))
    step = rig.feed(I.MisdealDetermined(misdealt=False, by="dealer-1"))
    kinds = rig.kinds(step)
    assert kinds.index("round_voided") < kinds.index("deck_removed")
    (removed,) = [e.payload for e in step.events if e.kind == "deck_removed"]
    assert removed["back"] == "blue"
    assert rig.places("blue") == {Place.REMOVED: DECK}
    assert rig.table.batches["blue"].location is Place.REMOVED
    assert rig.table.shoe_back is None
    assert not rig.table.halted
    assert rig.conserved()
    # the other deck is dealt next; the removed one is replaced by new decks before it is used
    rig.refuse(I.BatchToShuffler(back="blue"), "687a.")
    rig.load("red")
    _dealt(rig, (2,))
    rig.feed(I.KeyPressed(key="next"))
    rig.feed(I.DecksOpened(back="blue", dealer="dealer-1", floorperson="floor-1"))
    rig.shuffle("blue")


def test_no_ruling_without_a_wrong_count() -> None:
    """687a.9(h): the dealer determines a misdeal only after a count shows the deck incorrect."""
    rig = ready(WILD)
    rig.refuse(I.MisdealDetermined(misdealt=False, by="dealer-1"), "687a.9(h)")
    _dealt(rig)
    rig.refuse(I.MisdealDetermined(misdealt=False, by="dealer-1"), "687a.9(h)")
    rig.feed(I.StubCounted(count=_expected_stub(2)))
    rig.refuse(I.MisdealDetermined(misdealt=True, by="dealer-1"), "687a.9(h)")


def test_after_a_void_for_misdeal_the_next_round_is_not_dealt_from_the_same_stub() -> None:
    """687a.9(a)(2), 687a.9(h): every round is dealt from a deck shuffled for it; after a voided
    round the stub left in the dealer's hand is not dealt again."""
    rig = ready(WILD, counted=False)
    _dealt(rig, (1, 3))
    rig.feed(I.StubCounted(count=_expected_stub(2) - 1))
    rig.feed(I.MisdealDetermined(misdealt=True, by="dealer-1"))
    if rig.attempt(I.WildRoundOpened(boxes=(1,)), "687a.9") is None:
        return  # refused until a freshly shuffled deck is in hand: right
    assert rig.table.shoe_back is None or rig.places("blue").get(Place.SHOE, 0) == DECK, (
        f"round {rig.table.round_no} is dealt from the {rig.places('blue').get(Place.SHOE)}-card stub "
        "of the voided round"
    )


# ------------------------------------------------------------------ the Progressive
def test_start_game_locks_the_sensors_lights_the_wagers_and_collects_them() -> None:
    """687a.9(b): the dealer presses Start Game: the sensors are locked, the Progressive wagers
    placed are lit and collected."""
    rig = ready(WILD)
    rig.feed(I.WildRoundOpened(boxes=(1, 2, 3)))
    rig.feed(I.BetSensed(box=1, present=True))
    rig.feed(I.BetSensed(box=3, present=True))
    rig.feed(I.BetSensed(box=2, present=True))
    rig.feed(I.BetSensed(box=2, present=False))  # taken back before Start Game
    step = rig.feed(I.StartGame())
    payloads = {e.kind: e.payload for e in step.events}
    assert payloads["progressive_locked"]["boxes"] == [1, 3]
    assert payloads["progressive_collected"]["boxes"] == [1, 3]
    assert Command("keypad", "lock_sensors") in step.commands
    lit = sorted(c.args[0] for c in step.commands if c.action == "set_light" and c.args[1])
    assert lit == [1, 3]
    locks = [i for i, c in enumerate(step.commands) if c.action == "lock_sensors"]
    lights = [i for i, c in enumerate(step.commands) if c.action == "set_light"]
    assert locks and all(locks[0] < i for i in lights)  # locked before lit
    rig.refuse(I.StartGame(), "687a.9(b)")


def test_cards_are_not_dealt_before_start_game_locks_the_progressive() -> None:
    """687a.9(b): the Progressive wagers are locked by Start Game before the cards are dealt."""
    rig = ready(WILD)
    rig.refuse(I.StartGame(), "687a.9(b)")  # no round
    rig.feed(I.WildRoundOpened(boxes=(1,)))
    rig.feed(I.BetSensed(box=1, present=True))
    rig.refuse(I.WildHandsDealt(), "687a.9(b)")
    rig.feed(I.StartGame())
    rig.feed(I.WildHandsDealt())


def test_a_wager_sensed_after_the_lock_is_past_posting() -> None:
    """687a.9(b): a Progressive wager that appears after Start Game is not taken: it raises a
    past-posting alarm and the wager is neither lit nor collected."""
    rig = ready(WILD)
    rig.feed(I.WildRoundOpened(boxes=(1, 2)))
    rig.feed(I.BetSensed(box=1, present=True))
    rig.feed(I.StartGame())
    step = rig.feed(I.BetSensed(box=2, present=True))
    assert "bet_sensed" not in rig.kinds(step)
    alarms = [e.payload for e in step.events if e.kind == "alarm_raised"]
    assert len(alarms) == 1 and alarms[0]["section"] == "687a.9(b)"
    assert "past" in alarms[0]["floor_action"] + alarms[0]["message"]
    assert not any(c.action == "set_light" for c in step.commands)
    assert rig.table.wild is not None and sorted(rig.table.wild.sensed) == [1]
    # a collected wager is not taken back by lifting it off the sensor
    step = rig.feed(I.BetSensed(box=1, present=False))
    assert "bet_sensed" not in rig.kinds(step)
    assert sorted(rig.table.wild.sensed) == [1]
    rig.feed(I.WildHandsDealt())
    rig.feed(I.KeyPressed(key="next"))


def test_keys_other_than_next_mean_nothing_in_a_dj_wild_round() -> None:
    """687a.9: the blackjack decision keys are refused at a DJ Wild table."""
    rig = ready(WILD)
    rig.feed(I.WildRoundOpened(boxes=(1,)))
    rig.refuse(I.KeyPressed(key="next"), "687a.9")  # not dealt yet
    rig.feed(I.StartGame())
    rig.feed(I.WildHandsDealt())
    rig.refuse(I.KeyPressed(key="hit"), "687a.9")
    rig.refuse(I.WildRoundOpened(boxes=(2,)), "687a.9")  # this round is not finished
    rig.refuse(I.RoundOpened(wagers=()), "687a.9")


def test_the_public_state_puts_the_dealt_deck_in_the_dealers_hand() -> None:
    """687a.9(a)(2): once the shuffled deck is taken for dealing it is in the dealer's hand, and
    the public state says so (not "shoe": a DJ Wild table has none)."""
    rig = ready(WILD)
    if rig.table.shoe_back is None:
        rig.next_shoe(counted=True)
    back = rig.table.shoe_back
    assert back is not None
    assert rig.table.snapshot()["batches"][back]["location"] == "hand"
    _dealt(rig)
    assert rig.table.snapshot()["batches"][back]["location"] == "hand"
    assert all(b["location"] != "shoe" for b in rig.table.snapshot()["batches"].values())
