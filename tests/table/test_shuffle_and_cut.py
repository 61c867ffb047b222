"""Issue 3, shuffle, cut and shoe: the automated shuffle into the shoe, shuffler faults (673a.13(k),
(l)), the manual procedure and its cut (673a.5(b)-(e)), the burn card (673a.7(c)), the cover card
(673a.7(d)), the floor's reshuffle (673a.5(f)) and no gaming activity (673a.5(g))."""

from __future__ import annotations

import pytest

from controller.games import blackjack_games
from controller.rules.requests import DEALER, CardFor
from controller.table import inputs as I
from controller.table.batches import Place, ShufflerState
from controller.table.core import Command
from tests.table.helpers import BJ, Rig, manual, ready

BLACKJACK_GAMES = blackjack_games()


def _deal_until(rig: Rig, seat: int, face_up: bool | None = None) -> None:
    """Deal cards from the stack until the round asks for a card for ``seat``."""
    for _ in range(40):
        req = rig.table.round.request  # type: ignore[union-attr]
        if isinstance(req, CardFor) and req.seat == seat and (face_up is None or req.face_up == face_up):
            return
        rig.answer()
    raise AssertionError(f"the round never asked for a card for seat {seat}")


def _shoe_ended_by_cover(rig: Rig, seats: tuple[int, ...], on: int) -> None:
    """A round in which the cover card comes out just before the first card for ``on``."""
    while rig.table.burns_due:
        rig.draw()
    rig.open_round(seats)
    _deal_until(rig, on)
    rig.feed(I.CoverCardReached())
    rig.finish_round()
    assert rig.table.shoe_back is None


def _manual_in_shoe(seats: tuple[int, ...] = (1, 2, 3)) -> Rig:
    """A manual table (no automated shuffler) with the blue batch cut, in the shoe and burned."""
    rig = manual()
    rig.hand_shuffle_and_cut("blue")
    rig.load("blue")
    rig.burn()
    return rig


# ------------------------------------------------------------------ automated shuffle
def test_a_direct_insert_shuffler_puts_the_stack_straight_into_the_shoe() -> None:
    """673a.5(a), ruling G13: a shuffler declared to insert the stack directly into the dealing
    shoe: no cut is offered; the shuffler is told to eject the shuffled batch into the shoe."""
    rig = Rig(BJ, direct_insert_shuffler=True)
    rig.open_batches()
    rig.shuffle("blue")
    assert rig.table.batches["blue"].shuffler is ShufflerState.READY
    step = rig.load("blue")
    assert rig.kinds(step) == ["batch_to_shoe"]
    assert Command("shuffler", "eject_to_shoe", ("blue",)) in step.commands
    assert "cut_offered" not in rig.kinds()
    assert rig.table.cut is None
    assert rig.places("blue") == {Place.SHOE: rig.size()}


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_at_a_batch_shuffler_the_stack_comes_out_and_is_cut_before_the_shoe(game: str) -> None:
    """673a.5(a)-(d) at the shipped default (a batch shuffler): the dealer takes the shuffled
    stack out (the shuffler ejects it), the cut is offered, the cut position and the cover card
    are checked, and only then does the stack go in the shoe; nothing is ejected twice."""
    rig = Rig(game)
    sec = rig.sec
    rig.open_batches()
    rig.shuffle("blue")
    n = rig.size()
    rig.refuse(I.BatchToShoe(back="blue"), sec("5(d)"))  # not cut yet
    step = rig.feed(I.StackFromShuffler(back="blue"))
    assert rig.kinds(step) == ["cut_offered"]
    assert step.commands == [Command("shuffler", "eject_to_shoe", ("blue",))]
    rig.refuse(I.StackFromShuffler(back="blue"), sec("5(b)"))  # it is out already
    rig.refuse(I.CoverCardPlaced(from_bottom=n // 3), sec("5(d)"))  # the cut comes first
    rig.refuse(I.CutMade(at=9, by=0), sec("5(d)"))  # ten cards from either end
    rig.refuse(I.CutMade(at=n - 9, by=0), sec("5(d)"))
    rig.feed(I.CutMade(at=n // 2, by=0))  # no player yet: the dealer cuts (5(b))
    rig.refuse(I.BatchToShoe(back="blue"), sec("5(d)"))  # no cover card yet
    rig.refuse(I.CoverCardPlaced(from_bottom=-(-n // 4) - 1), sec("5(d)"))  # under 1/4 from the bottom
    rig.feed(I.CoverCardPlaced(from_bottom=-(-n // 4)))
    step = rig.feed(I.BatchToShoe(back="blue"))
    assert rig.kinds(step) == ["batch_to_shoe"] and not step.commands  # out already: no eject
    assert rig.table.cut is None and rig.places("blue") == {Place.SHOE: n}


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_at_a_batch_shuffler_the_cut_goes_to_the_seat_the_cover_card_came_out_on(game: str) -> None:
    """673a.5(c)(2): the player on whose box the cover card appeared is offered the next cut; he
    refuses, the dealer cuts; the floor orders a recut (5(e)), made by the last cutter."""
    rig = ready(game)
    sec = rig.sec
    _shoe_ended_by_cover(rig, (1, 2, 3), on=2)
    stored = rig.table.batch_in(Place.SHUFFLER)[0]
    rig.feed(I.StackFromShuffler(back=stored))
    assert rig.table.cut is not None and rig.table.cut.offer_order == [2]
    rig.refuse(I.CutMade(at=40, by=1), sec("5(c)"))
    rig.feed(I.CutRefused(seat=2))
    rig.feed(I.CutMade(at=40, by=0))
    rig.feed(I.RecutOrdered(by="floor-1"))  # 5(e): before the cards go in the shoe
    rig.refuse(I.CoverCardPlaced(from_bottom=rig.size() // 3), sec("5(d)"))
    rig.feed(I.CutMade(at=50, by=0))
    rig.feed(I.CoverCardPlaced(from_bottom=rig.size() // 3))
    rig.feed(I.BatchToShoe(back=stored))
    assert rig.table.shoe_back == stored


@pytest.mark.parametrize(
    ("game", "why"), [(g, w) for g in BLACKJACK_GAMES for w in ("floor", "idle", "dealer")]
)
def test_at_a_batch_shuffler_the_cut_goes_to_the_far_right(game: str, why: str) -> None:
    """673a.5(c)(3),(4): the cover card on the dealer's hand, or a reshuffle the floor ordered:
    the player farthest to the dealer's right first; 5(g): after no gaming activity the first
    player to arrive (else the dealer, 5(b))."""
    rig = ready(game)
    while rig.table.burns_due:
        rig.draw()
    rig.open_round((2, 4))
    if why == "dealer":
        _deal_until(rig, DEALER)
        rig.feed(I.CoverCardReached())
        rig.finish_round()
    else:
        rig.finish_round()
        rig.feed(I.ReshuffleOrdered(by="floor-1") if why == "floor" else I.NoGamingActivity(by="floor-1"))
    stored = rig.table.batch_in(Place.SHUFFLER)[0]
    rig.feed(I.StackFromShuffler(back=stored))
    assert rig.table.cut is not None
    assert rig.table.cut.offer_order == ([] if why == "idle" else [4, 2])


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_a_cover_card_placed_too_deep_is_an_alarm_naming_5d(game: str) -> None:
    """673a.5(d): the counting shoe's count when the cover card comes out is the cards that were
    behind it: fewer than 1/4 of the batch (or other than recorded) raises an alarm for the floor."""
    rig = ready(game)
    n = rig.size()
    while rig.table.burns_due:
        rig.draw()
    rig.open_round((1,))
    rig.feed(I.CoverCardReached(remaining=-(-n // 4) - 3))
    alarm = [e for e in rig.events if e.kind == "alarm_raised"][-1].payload
    assert alarm["section"] == rig.sec("5(d)") and "too deep" in alarm["message"] and not alarm["halts"]


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_a_cover_card_that_came_out_early_is_called_early_not_too_deep(game: str) -> None:
    """673a.5(d): more cards behind the cover card than its recorded placement means it came out
    before its place; the alarm says so rather than "too deep" (which sends the floor to look for
    the opposite fault)."""
    rig = ready(game)
    placed = -(-rig.size() // 4) + 5  # where the helper's dealer placed it
    while rig.table.burns_due:
        rig.draw()
    rig.open_round((1,))
    rig.feed(I.CoverCardReached(remaining=placed + 7))
    alarm = [e for e in rig.events if e.kind == "alarm_raised"][-1].payload
    assert alarm["section"] == rig.sec("5(d)") and not alarm["halts"]
    assert "came out early" in alarm["message"] and "too deep" not in alarm["message"]
    assert (
        f"{placed + 7} cards were behind it, but it was recorded {placed} from the bottom" in alarm["message"]
    )


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_a_cover_card_where_it_was_recorded_raises_nothing(game: str) -> None:
    rig = ready(game)
    placed = -(-rig.size() // 4) + 5  # where the helper's dealer placed it
    while rig.table.burns_due:
        rig.draw()
    rig.open_round((1,))
    rig.feed(I.CoverCardReached(remaining=placed))
    assert "alarm_raised" not in rig.kinds() and rig.table.cover_reached


def test_an_unshuffled_batch_does_not_go_into_the_shoe() -> None:
    """673a.5(a), 673a.3(b)(3): the batch is shuffled in the device before it is dealt."""
    rig = Rig(BJ)
    rig.open_batches()
    rig.feed(I.BatchToShuffler(back="blue"))
    rig.refuse(I.BatchToShoe(back="blue"), "673a.")
    rig.feed(I.ShuffleStarted(back="blue"))
    rig.refuse(I.BatchToShoe(back="blue"), "673a.")  # still shuffling


# ------------------------------------------------------------------ shuffler faults
@pytest.mark.parametrize("reason", ["jam", "stopped during the shuffle", "incomplete cycle"])
def test_a_jam_or_incomplete_cycle_means_the_batch_is_reshuffled(reason: str) -> None:
    """673a.13(k): the device jams, stops or fails to complete a cycle: the cards are reshuffled
    before the batch goes into the shoe."""
    rig = Rig(BJ)
    rig.open_batches()
    rig.feed(I.BatchToShuffler(back="blue"))
    rig.feed(I.ShuffleStarted(back="blue"))
    step = rig.feed(I.ShuffleFailed(back="blue", reason=reason))
    assert rig.kinds(step)[0] == "shuffle_failed"
    alarms = [e.payload for e in step.events if e.kind == "alarm_raised"]
    assert alarms and alarms[0]["section"] == "673a.13(k)" and alarms[0]["floor_action"]
    assert Command("shuffler", "clear_fault") in step.commands
    assert rig.table.batches["blue"].shuffler is ShufflerState.JAMMED
    rig.refuse(I.BatchToShoe(back="blue"), "673a.13(k)")
    rig.feed(I.ShuffleStarted(back="blue"))
    rig.refuse(I.BatchToShoe(back="blue"), "673a.")  # not until the new shuffle completes
    rig.feed(I.ShuffleCompleted(back="blue", cards_counted=rig.size()))
    rig.load("blue")
    assert rig.table.shoe_back == "blue"


def test_a_shuffle_that_counts_short_is_reshuffled() -> None:
    """673a.13(k): a cycle that did not pass every card (the count is short) is not a shuffle."""
    rig = Rig(BJ)
    rig.open_batches()
    rig.feed(I.BatchToShuffler(back="blue"))
    rig.feed(I.ShuffleStarted(back="blue"))
    step = rig.feed(I.ShuffleCompleted(back="blue", cards_counted=rig.size() - 3))
    assert "alarm_raised" in rig.kinds(step)
    rig.refuse(I.BatchToShoe(back="blue"), "673a.13(k)")


def test_a_stored_batch_that_jammed_is_reshuffled_before_the_next_shoe() -> None:
    """673a.13(k): the stored batch jammed while the other was dealt; at the shoe change it is
    refused until reshuffled."""
    rig = Rig(BJ)
    rig.open_batches()
    rig.shuffle("blue")
    rig.load("blue")
    rig.feed(I.BatchToShuffler(back="red"))
    rig.feed(I.ShuffleStarted(back="red"))
    rig.feed(I.ShuffleFailed(back="red", reason="jam"))
    rig.burn()
    rig.play_round((1,))
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    rig.refuse(I.BatchToShoe(back="red"), "673a.13(k)")
    rig.feed(I.ShuffleStarted(back="red"))
    rig.feed(I.ShuffleCompleted(back="red", cards_counted=rig.size("red")))
    rig.load("red")


def test_shuffling_by_hand_is_refused_until_the_shuffler_is_marked_out_of_order() -> None:
    """673a.13(l): another method of shuffling only after the device is marked out of order."""
    rig = ready(BJ)
    rig.burn()
    rig.play_round((1,))
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    rig.refuse(I.HandShuffled(back="blue", dealer="dealer-1"), "673a.13(l)")
    rig.refuse(I.HandShuffled(back="red", dealer="dealer-1"), "673a.13(l)")
    step = rig.feed(I.ShufflerOutOfOrder(by="floor-1"))
    assert Command("shuffler", "mark_out_of_order") in step.commands
    rig.refuse(I.ShufflerOutOfOrder(by="floor-1"), "673a.13(l)")
    rig.refuse(I.BatchToShuffler(back="blue"), "673a.13(l)")
    rig.refuse(I.ShuffleStarted(back="red"), "673a.13(l)")
    step = rig.feed(I.HandShuffled(back="red", dealer="dealer-1"))
    assert "cut_offered" in rig.kinds(step)


def test_after_the_shuffler_is_out_of_order_the_manual_procedure_deals_shoe_after_shoe() -> None:
    """673a.13(l), 673a.5(b)-(d): with the device marked out of order the table goes on: each
    shoe is shuffled by hand, cut, the cover card placed, loaded, burned and dealt."""
    rig = ready(BJ)
    rig.burn()
    rig.play_round((1, 2))
    rig.feed(I.ShufflerOutOfOrder(by="floor-1"))
    rig.play_round((1, 2))  # the shoe being dealt is finished
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    for back in ("red", "blue", "red"):
        rig.refuse(I.BatchToShoe(back=back), "673a.5(d)")  # not before the cut
        rig.hand_shuffle_and_cut(back, at=30, by=0, from_bottom=100)
        step = rig.load(back)
        assert Command("shuffler", "eject_to_shoe", (back,)) not in step.commands
        rig.burn()
        rig.play_round((1, 2))
        rig.feed(I.ReshuffleOrdered(by="floor-1"))
        assert rig.conserved()


def test_the_shuffler_restored_takes_over_again() -> None:
    """673a.13(l): once the device is back in order, shuffling by hand is refused again."""
    rig = ready(BJ)
    rig.burn()
    rig.play_round((1,))
    rig.feed(I.ShufflerOutOfOrder(by="floor-1"))
    rig.refuse(I.ShufflerOutOfOrder(by="floor-2"), "673a.13(l)")
    rig.feed(I.ShufflerRestored(by="tech-1"))
    rig.refuse(I.ShufflerRestored(by="tech-1"), "673a.13(l)")
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    rig.refuse(I.HandShuffled(back="blue", dealer="dealer-1"), "673a.13(l)")


# ------------------------------------------------------------------ the manual table and the cut
def test_a_table_without_a_shuffler_shuffles_by_hand_and_cuts() -> None:
    """673a.5(a),(b),(d), 673a.7(a): a table configured without an automated shuffler shuffles by
    hand, the stack is cut, the cover card placed and then the stack goes into the shoe."""
    rig = manual()
    rig.refuse(I.BatchToShoe(back="blue"), "673a.5(d)")  # not shuffled and cut
    step = rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    assert rig.kinds(step)[-1] == "cut_offered"
    rig.refuse(I.BatchToShoe(back="blue"), "673a.5(d)")  # not cut
    rig.feed(I.CutMade(at=20, by=0))
    rig.refuse(I.BatchToShoe(back="blue"), "673a.5(d)")  # no cover card yet
    rig.feed(I.CoverCardPlaced(from_bottom=13))
    step = rig.load("blue")
    assert rig.kinds(step) == ["batch_to_shoe"]
    assert rig.table.cut is None
    rig.burn()
    rig.play_round((1, 2))
    assert rig.conserved()


def test_the_first_cut_when_the_game_begins() -> None:
    """673a.5(c)(1): when the game is just beginning the cut goes to the first player to arrive.
    The core is not told who that is: its first offer list is empty, so the dealer cuts (b)."""
    rig = manual()
    step = rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    offered = [e.payload for e in step.events if e.kind == "cut_offered"]
    assert offered and offered[0]["reason"] == "first"
    assert rig.offered() == []
    rig.refuse(I.CutRefused(seat=1), "673a.5(c)")
    rig.feed(I.CutMade(at=26, by=0))


def test_the_cut_goes_to_the_player_where_the_cover_card_appeared() -> None:
    """673a.5(c)(2): the player on whose betting area the cover card appeared in the last round."""
    rig = _manual_in_shoe()
    _shoe_ended_by_cover(rig, (1, 2, 3), on=2)
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    assert rig.offered()[0] == 2
    rig.refuse(I.CutMade(at=20, by=3), "673a.5(c)")
    rig.refuse(I.CutRefused(seat=3), "673a.5(c)")
    rig.feed(I.CutMade(at=20, by=2))


def test_cover_on_the_dealers_hand_the_cut_rotates_counterclockwise_from_the_far_right() -> None:
    """673a.5(c)(3), 673a.5(b): the cover card appeared on the dealer's hand: the player farthest
    to the dealer's right first (the highest seat: the deal starts at the dealer's left, seat 1),
    then counterclockwise; when every player refuses the dealer cuts."""
    rig = _manual_in_shoe()
    _shoe_ended_by_cover(rig, (1, 2, 3), on=DEALER)
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    assert rig.offered() == [3, 2, 1]
    rig.refuse(I.CutRefused(seat=1), "673a.5(c)")
    rig.refuse(I.CutMade(at=20, by=2), "673a.5(c)")
    rig.refuse(I.CutMade(at=20, by=0), "673a.5(c)")
    rig.feed(I.CutRefused(seat=3))
    assert rig.offered() == [2, 1]
    rig.feed(I.CutRefused(seat=2))
    rig.feed(I.CutRefused(seat=1))
    assert rig.offered() == []
    rig.refuse(I.CutMade(at=20, by=1), "673a.5(c)")
    rig.feed(I.CutMade(at=20, by=0))  # the dealer


def test_a_floor_ordered_reshuffle_offers_the_cut_from_the_far_right() -> None:
    """673a.5(c)(4): a reshuffle at the floorperson's direction: the player farthest to the dealer's
    right, then counterclockwise."""
    rig = _manual_in_shoe()
    rig.play_round((2, 5))
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    assert rig.offered() == [5, 2]
    rig.feed(I.CutRefused(seat=5))
    rig.feed(I.CutMade(at=15, by=2))


def test_the_cut_at_least_ten_cards_from_either_end() -> None:
    """673a.5(d): the cover card goes into the stack at least ten cards from the top or bottom."""
    rig = manual(decks=1)
    n = rig.size()
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    for at in (0, 9, n - 9, n):
        rig.refuse(I.CutMade(at=at, by=0), "673a.5(d)")
    rig.feed(I.CutMade(at=10, by=0))
    rig.feed(I.RecutOrdered(by="floor-1"))
    rig.feed(I.CutMade(at=n - 10, by=0))


@pytest.mark.parametrize("decks", [1, 6])
def test_the_cover_card_at_least_a_quarter_in_from_the_bottom(decks: int) -> None:
    """673a.5(d): after the cut the cover card goes at least 1/4 of the way in from the bottom."""
    rig = manual(decks=decks)
    n = rig.size()
    quarter = -(-n // 4)
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    rig.refuse(I.CoverCardPlaced(from_bottom=quarter), "673a.5(d)")  # not cut yet
    rig.feed(I.CutMade(at=n // 2, by=0))
    for bad in (0, 1, quarter - 1):
        rig.refuse(I.CoverCardPlaced(from_bottom=bad), "673a.5(d)")
    rig.feed(I.CoverCardPlaced(from_bottom=quarter))
    rig.load("blue")


def test_a_recut_on_the_floors_order() -> None:
    """673a.5(e): after the cut and before the shoe, the floorperson may require a recut, by the
    player who last cut; until then the stack does not go into the shoe."""
    rig = _manual_in_shoe()
    _shoe_ended_by_cover(rig, (1, 2, 3), on=DEALER)
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    rig.refuse(I.RecutOrdered(by="floor-1"), "673a.5(e)")  # nothing cut yet
    rig.feed(I.CutMade(at=20, by=3))
    rig.feed(I.CoverCardPlaced(from_bottom=13))
    step = rig.feed(I.RecutOrdered(by="floor-1"))
    assert rig.kinds(step) == ["recut_ordered"]
    rig.refuse(I.BatchToShoe(back="blue"), "673a.5(d)")
    rig.refuse(I.CoverCardPlaced(from_bottom=13), "673a.5(d)")
    rig.feed(I.CutMade(at=30, by=3))  # the player who last cut
    rig.feed(I.CoverCardPlaced(from_bottom=14))
    rig.load("blue")


def test_a_recut_by_the_next_person_entitled_to_cut() -> None:
    """673a.5(e): the recut is made by the player who last cut or by the next person entitled to
    cut under (c): the last cutter declining, the next one cuts."""
    rig = _manual_in_shoe()
    _shoe_ended_by_cover(rig, (1, 2, 3), on=DEALER)
    rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    rig.feed(I.CutMade(at=20, by=3))
    rig.feed(I.RecutOrdered(by="floor-1"))
    rig.feed(I.CutRefused(seat=3))
    rig.feed(I.CutMade(at=25, by=2))


def test_no_recut_once_the_stack_is_in_the_shoe() -> None:
    """673a.5(e): the recut is ordered before the cards are placed in the dealing shoe."""
    rig = _manual_in_shoe()
    rig.refuse(I.RecutOrdered(by="floor-1"), "673a.5(e)")


# ------------------------------------------------------------------ the burn card
@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_one_card_is_burned_after_each_batch_is_placed_in_the_shoe(game: str) -> None:
    """673a.7(c), 665a.7(c), 685a.7(c): after each full batch goes into the shoe the first card goes
    to the discard rack, not to a player, even when the round was opened before it."""
    rig = ready(game)
    assert rig.table.burns_due == 1
    rig.open_round((1,))
    step = rig.draw()
    assert rig.kinds(step) == ["card_burned"]
    assert rig.places(rig.table.shoe_back or "") == {Place.SHOE: rig.size() - 1, Place.DISCARD: 1}
    step = rig.draw()
    assert rig.kinds(step)[0] == "card_dealt"  # the second card out is dealt (665a: dealer's up card)
    rig.finish_round()
    # the next batch placed in the shoe burns one card again
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    rig.next_shoe()
    rig.burn()


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_each_new_dealer_burns_one_card(game: str) -> None:
    """673a.7(c), 665a.7(c), 685a.7(c): each new dealer removes one card to the discard rack before
    dealing any cards to the players; a dealer is not changed in the middle of a round."""
    rig = ready(game)
    rig.burn()
    rig.play_round((1,))
    assert rig.table.burns_due == 0
    rig.feed(I.NewDealer(name="dealer-2"))
    assert rig.table.burns_due == 1
    rig.open_round((1,))
    assert rig.kinds(rig.draw()) == ["card_burned"]
    rig.refuse(I.NewDealer(name="dealer-3"), rig.sec("7(c)"))
    rig.finish_round()
    rig.feed(I.NewDealer(name="dealer-3"))
    rig.feed(I.NewDealer(name="dealer-4"))
    assert rig.table.burns_due == 2
    rig.burn()
    rig.burn()
    rig.play_round((1,))


# ------------------------------------------------------------------ the cover card
@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_the_cover_card_the_round_is_finished_then_the_batch_is_reshuffled(game: str) -> None:
    """673a.7(d), 665a.7(d), 685a.7(d): the cover card appears during play: the round is completed,
    then the cards left in the shoe go to the discard rack and the batch is reshuffled."""
    rig = ready(game)
    rig.burn()
    rig.open_round((1, 2))
    _deal_until(rig, 2)
    step = rig.feed(I.CoverCardReached())
    assert "shoe_ended" not in rig.kinds(step)
    assert rig.table.round is not None and rig.table.shoe_back == "blue"
    n_before = len(rig.events)
    rig.finish_round()
    kinds = rig.kinds()[n_before:]
    assert kinds.index("round_settled") < kinds.index("shoe_ended")
    assert rig.table.shoe_back is None
    assert rig.places("blue") == {Place.DISCARD: rig.size()}  # nothing left behind in the shoe
    rig.refuse(I.CardDrawn(card=rig.take("5H", "blue")), rig.sec("7(a)"))
    rig.next_shoe()
    rig.play_round((1,))


def test_the_cover_card_as_the_first_card_of_a_round_the_round_is_completed() -> None:
    """673a.7(d): the cover card appears as the first card in the shoe at the beginning of a round:
    it is put aside and the round is completed; then the batch is reshuffled."""
    rig = ready(BJ)
    rig.burn()
    rig.play_round((1,))
    rig.feed(I.CoverCardReached())
    rig.open_round((1,))
    rig.finish_round()
    assert rig.table.shoe_back is None
    assert rig.places("blue") == {Place.DISCARD: rig.size()}


def test_the_cover_card_is_not_reported_with_no_batch_in_the_shoe() -> None:
    """673a.7(d): the cover card is in the shoe's batch; with the shoe empty there is none."""
    rig = Rig(BJ)
    rig.open_batches()
    rig.refuse(I.CoverCardReached(), "673a.7(d)")


# ------------------------------------------------------------------ reshuffles ordered by the floor
def test_a_floorperson_may_order_a_reshuffle_after_any_round() -> None:
    """673a.5(f): ordered during a round, the round is completed first; between rounds the shoe
    ends at once. Either way the cards go to the discard rack and the batch is reshuffled."""
    rig = ready(BJ)
    rig.burn()
    rig.open_round((1,))
    rig.answer()
    step = rig.feed(I.ReshuffleOrdered(by="floor-1"))
    assert rig.kinds(step) == ["reshuffle_ordered"]
    assert rig.table.shoe_back == "blue"
    rig.finish_round()
    assert rig.table.shoe_back is None
    assert rig.places("blue") == {Place.DISCARD: rig.size()}
    rig.refuse(I.ReshuffleOrdered(by="floor-1"), "673a.5(f)")  # nothing in the shoe
    rig.next_shoe()
    rig.play_round((1,))
    step = rig.feed(I.ReshuffleOrdered(by="floor-1"))
    assert rig.kinds(step) == ["reshuffle_ordered", "shoe_ended"]
    assert rig.places("red") == {Place.DISCARD: rig.size("red")}


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_no_gaming_activity_the_shoe_and_the_discards_are_reshuffled(game: str) -> None:
    """673a.5(g), 665a.5(g), 685a.5(g): no gaming activity at an open table: the cards come out of
    the shoe and the discard rack and are reshuffled (with the device: into the shuffler, and the
    stored batch is the one dealt next). Not while a round is being played."""
    rig = ready(game)
    rig.burn()
    rig.open_round((1,))
    rig.refuse(I.NoGamingActivity(by="floor-1"), rig.sec("5(g)"))
    rig.finish_round()
    step = rig.feed(I.NoGamingActivity(by="floor-1"))
    assert "shoe_ended" in rig.kinds(step)
    assert rig.table.shoe_back is None
    assert rig.places("blue") == {Place.DISCARD: rig.size()}
    assert rig.next_shoe() == "red"
    rig.play_round((1,))


def test_no_gaming_activity_at_a_manual_table_the_cut_is_offered_again() -> None:
    """673a.5(g)(1): without a shuffler the cards are washed, shuffled and cut again: the cut goes
    back to the first player arriving (673a.5(c)(1))."""
    rig = _manual_in_shoe()
    rig.play_round((1,))
    rig.feed(I.NoGamingActivity(by="floor-1"))
    step = rig.feed(I.HandShuffled(back="blue", dealer="dealer-1"))
    offered = [e.payload for e in step.events if e.kind == "cut_offered"]
    assert offered and offered[0]["reason"] == "first"


def test_a_refused_input_names_its_section_for_a_cut_out_of_place() -> None:
    """673a.5(b): nothing to cut: no cut is being offered."""
    rig = ready(BJ)
    rig.refuse(I.CutMade(at=20, by=0), "673a.5")
    rig.refuse(I.CutRefused(seat=1), "673a.5")
    rig.refuse(I.CoverCardPlaced(from_bottom=100), "673a.5")
    rig.refuse(I.RecutOrdered(by="floor-1"), "673a.5")
