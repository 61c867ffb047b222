"""Issue 3, batches and cards: two batches of different back colours alternating shoe by shoe,
one batch in the discard rack at a time, the other colour from the shoe, card conservation, the
24-hour deck life and the opening inspection (673a.3, 673a.4; 665a.3; 685a.3)."""

from __future__ import annotations

import pytest

from controller.errors import RuleViolation
from controller.game_config import default_options
from controller.games import blackjack_games
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.batches import Place
from controller.table.core import Table
from controller.table.virtual import cut_and_cover
from tests.table.helpers import BJ, HOUR, T0, Rig, ready

BLACKJACK_GAMES = blackjack_games()


def _played(game: str = BJ, **options: object) -> Rig:
    """A table whose first shoe has been burned and one round played on it."""
    rig = ready(game, **options)
    rig.play_round((1, 2))
    return rig


# ------------------------------------------------------------------ two batches, two colours
@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_the_two_batches_need_different_back_colours(game: str) -> None:
    """673a.3(b)(2), 665a.3(b)(2), 685a.3(b)(2): one batch's backs differ in colour from the other's."""
    options = default_options(game)
    with pytest.raises(RuleViolation) as info:
        Table(options, backs=("blue", "blue"))
    assert str(info.value).startswith(f"{options.spec.chapter}.3(b)(2)")
    table = Table(options, backs=("blue", "red"))
    assert sorted(table.batches) == ["blue", "red"]
    sizes = {b.size for b in table.batches.values()}
    assert sizes == {options.decks * options.spec.cards_per_deck}  # 3(b)(1): equal batches


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_batches_alternate_shoe_by_shoe(game: str) -> None:
    """673a.3(b)(4), 665a.3(b)(4), 685a.3(b)(4): each batch is used for every other dealing shoe."""
    rig = _played(game)
    shoes = [rig.table.shoe_back]
    for _ in range(4):
        rig.feed(I.ReshuffleOrdered(by="floor-1"))
        assert rig.table.shoe_back is None
        used = rig.table.batch_in(Place.DISCARD)[0]
        # the used batch may not go straight back into the shoe, nor into the shuffler that
        # still stores the other batch
        rig.refuse(I.BatchToShoe(back=used), rig.sec("3(b)"))
        rig.refuse(I.BatchToShuffler(back=used), rig.sec("3(b)"))
        shoes.append(rig.next_shoe())
        rig.play_round((1,))
    assert shoes == ["blue", "red", "blue", "red", "blue"]


def test_the_same_batch_is_not_dealt_for_two_shoes_running() -> None:
    """673a.3(b)(3),(4): while one batch is dealt the other is shuffled and stored in the shuffler,
    and each batch is used for every other shoe: the blue batch, just dealt, may not be reshuffled
    and dealt again for the next shoe while the red batch waits unshuffled."""
    rig = Rig(BJ)
    rig.open_batches()
    rig.shuffle("blue")
    rig.load("blue")
    rig.burn()
    wagers = (SeatWagers(seat=1, bet=10),)
    if rig.attempt(I.RoundOpened(wagers=wagers), "673a.3(b)(3)") is None:
        return  # a round refused while red is not stored in the shuffler is right too
    rig.finish_round()
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    refused = False
    for inp in (
        I.BatchToShuffler(back="blue"),
        I.ShuffleStarted(back="blue"),
        I.ShuffleCompleted(back="blue", cards_counted=rig.size()),
        I.BatchToShoe(back="blue"),
    ):
        if rig.attempt(inp, "673a.3(b)") is None:
            refused = True
            break
    assert refused, "the blue batch was dealt for two shoes in a row (673a.3(b)(4))"


# ------------------------------------------------------------------ one batch in the discard rack
@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_a_round_is_refused_while_the_other_batch_is_in_the_discard_rack(game: str) -> None:
    """673a.3(b)(5), 665a.3(b)(5), 685a.3(b)(5): the cards of only one batch in the discard rack at
    any time; the used batch goes into the shuffler before the next round is dealt."""
    rig = _played(game)
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    used = rig.table.batch_in(Place.DISCARD)[0]
    ready_back = rig.table.batch_in(Place.SHUFFLER)[0]
    rig.load(ready_back)  # the burn card waits: it may not go into the rack holding the used batch
    assert rig.table.batch_in(Place.DISCARD) == [used]
    side = {"bust_it": 10 if rig.options.bust_it else 0, "match_the_dealer": 0}
    rig.refuse(I.RoundOpened(wagers=(SeatWagers(seat=1, bet=10, **side),)), rig.sec("3(b)(5)"))
    rig.shuffle(used)
    rig.burn()
    rig.open_round((1,))
    assert rig.table.round is not None
    assert rig.table.batch_in(Place.DISCARD) == []


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_the_shoe_is_not_emptied_into_a_discard_rack_holding_the_other_batch(game: str) -> None:
    """673a.3(b)(5): only one batch in the discard rack at any given time. With the used batch still
    in the rack, ending the new shoe (floor reshuffle, 673a.5(f)) would put both there."""
    rig = _played(game)
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    rig.load(rig.table.batch_in(Place.SHUFFLER)[0])
    rig.attempt(I.ReshuffleOrdered(by="floor-1"), rig.sec("3(b)(5)"))
    in_rack = [b.back for b in rig.table.batches.values() if b.places[Place.DISCARD] > 0]
    assert len(in_rack) <= 1, f"cards of {in_rack} are all in the discard rack"


# ------------------------------------------------------------------ the other colour from the shoe
@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_a_card_of_the_other_colour_from_the_shoe_halts_dealing(game: str) -> None:
    """673a.3(b)(2), 665a.3(b)(2), 685a.3(b)(2): a red-backed card out of the shoe holding the blue
    batch raises a halting alarm naming what the floor must do; the card is not dealt."""
    rig = ready(game)
    rig.burn()
    rig.open_round((1,))
    request = repr(rig.table.round.request)  # type: ignore[union-attr]
    step = rig.draw("9H", back="red")
    assert "card_dealt" not in rig.kinds(step)
    alarms = [e for e in step.events if e.kind == "alarm_raised"]
    assert len(alarms) == 1
    assert alarms[0].payload["section"] == rig.sec("3(b)(2)")
    assert alarms[0].payload["halts"] is True
    assert alarms[0].payload["floor_action"]
    assert repr(rig.table.round.request) == request  # type: ignore[union-attr]
    assert rig.table.halted
    assert rig.conserved()
    assert rig.table.snapshot()["halted"][0]["section"] == rig.sec("3(b)(2)")


def test_dealing_stays_stopped_after_the_other_colour_until_the_floor_acknowledges() -> None:
    """673a.3(b)(2): the alarm stops dealing: a further card out of the shoe is not dealt to a box
    while the alarm stands; a new round is refused; once acknowledged, dealing resumes."""
    rig = ready(BJ)
    rig.burn()
    rig.open_round((1,))
    rig.draw("9H", back="red")
    alarm = rig.table.halted[0].id
    step = rig.attempt(I.CardDrawn(card=rig.take("5C")), "673a.3(b)(2)")
    if step is not None:
        dealt = [e for e in step.events if e.kind in ("card_dealt", "hole_card_dealt")]
        assert not dealt, "a card was dealt to the layout while dealing is stopped (673a.3(b)(2))"
    rig.feed(I.AlarmAcknowledged(alarm=alarm, by="floor-1"))
    assert not rig.table.halted
    rig.finish_round()


def test_a_new_round_is_refused_while_the_other_colour_alarm_stands() -> None:
    """673a.3(b)(2): after the other batch's colour came out of the shoe between rounds, no round
    is opened until the floor has acknowledged the alarm."""
    rig = ready(BJ)
    rig.burn()
    rig.draw("9H", back="red")
    assert rig.table.halted
    rig.refuse(I.RoundOpened(wagers=(SeatWagers(seat=1, bet=10),)), "673a.3(b)(2)")
    rig.feed(I.AlarmAcknowledged(alarm=rig.table.halted[0].id, by="floor-1"))
    rig.open_round((1,))
    assert rig.table.round is not None


# ------------------------------------------------------------------ card conservation
def test_a_card_drawn_more_often_than_the_batch_holds_it_raises_an_alarm() -> None:
    """673a.3(b) (card conservation): two decks hold two fives of spades; a third one out of the
    shoe is not dealt and raises a halting alarm."""
    rig = ready(BJ, decks=2)
    rig.burn("2C")
    rig.open_round((1,))
    rig.draw("5S")
    rig.draw("5S")
    request = repr(rig.table.round.request)  # type: ignore[union-attr]
    step = rig.draw("5S")
    assert "card_dealt" not in rig.kinds(step)
    alarms = [e.payload for e in step.events if e.kind == "alarm_raised"]
    assert alarms and alarms[0]["section"].startswith("673a.3(b)") and alarms[0]["halts"]
    assert repr(rig.table.round.request) == request  # type: ignore[union-attr]
    assert rig.table.batches["blue"].drawn["5S"] == 2
    assert rig.conserved()


def test_every_card_of_a_batch_is_in_exactly_one_place_through_a_shoe() -> None:
    """673a.3(b) (card conservation): through a shoe of rounds and its end, the places of each batch
    add up to the batch, and the burn card and each round's cards reach the discard rack."""
    rig = ready(BJ)
    size = rig.size()
    rig.burn()
    assert rig.places("blue") == {Place.SHOE: size - 1, Place.DISCARD: 1}
    for _ in range(5):
        rig.play_round((1, 2, 3))
        assert rig.conserved()
        assert Place.LAYOUT not in rig.places("blue")
        assert rig.places("blue")[Place.SHOE] == len(rig.stack)
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    assert rig.places("blue") == {Place.DISCARD: size}
    assert rig.places("red") == {Place.SHUFFLER: size}


def test_a_shoe_count_that_does_not_add_up_raises_an_alarm() -> None:
    """673a.3(b) (card conservation): the counting shoe reports the cards left after a draw; a
    count that differs from the table's raises a halting alarm, a matching one does not."""
    rig = ready(BJ)
    rig.burn()
    rig.open_round((1,))
    left = rig.places("blue")[Place.SHOE]
    step = rig.draw(remaining=left - 1)
    assert "alarm_raised" not in rig.kinds(step)
    step = rig.draw(remaining=left - 1)  # one more card out, the same count reported
    alarms = [e.payload for e in step.events if e.kind == "alarm_raised"]
    assert alarms and alarms[0]["section"].startswith("673a.3(b)") and alarms[0]["halts"]
    assert rig.table.halted


def test_a_wrong_shoe_count_on_the_burn_card_raises_an_alarm() -> None:
    """673a.3(b) (card conservation), 673a.7(c): the shoe's count reported with the burn card is a
    count like any other; one that does not add up raises an alarm."""
    rig = ready(BJ)
    left = rig.places("blue")[Place.SHOE]
    step = rig.draw(remaining=left + 5)
    assert "card_burned" in rig.kinds(step)
    alarms = [e.payload for e in step.events if e.kind == "alarm_raised"]
    assert alarms and alarms[0]["section"].startswith("673a.3(b)"), "the wrong count passed unnoticed"


# ------------------------------------------------------------------ 24 hours
def test_a_warning_within_the_last_hour_of_the_decks_life() -> None:
    """673a.3(c): decks opened for use are changed at least once every 24 hours; Tick warns in the
    last hour, once per batch."""
    rig = Rig(BJ)
    rig.feed(I.DecksOpened(back="blue", dealer="d", floorperson="f"), at=T0)
    rig.feed(I.DecksOpened(back="red", dealer="d", floorperson="f"), at=T0 + 2 * HOUR)
    assert rig.kinds(rig.feed(I.Tick(), at=T0 + 23 * HOUR - 1)) == []
    step = rig.feed(I.Tick(), at=T0 + 23 * HOUR + 60)
    assert [(e.kind, e.payload["back"]) for e in step.events] == [("deck_expiry_warning", "blue")]
    assert step.events[0].payload["seconds_left"] == pytest.approx(HOUR - 60)
    assert rig.kinds(rig.feed(I.Tick(), at=T0 + 23 * HOUR + 120)) == []  # warned once
    step = rig.feed(I.Tick(), at=T0 + 25 * HOUR + 1)
    assert [(e.kind, e.payload["back"]) for e in step.events] == [("deck_expiry_warning", "red")]


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_a_new_shoe_is_refused_after_24_hours(game: str) -> None:
    """673a.3(c), 665a.3(c), 685a.3(c): after 24 hours the decks are changed before another shoe."""
    rig = Rig(game)
    rig.feed(I.DecksOpened(back="blue", dealer="d", floorperson="f"), at=T0)
    rig.feed(I.DecksOpened(back="red", dealer="d", floorperson="f"), at=T0)
    rig.shuffle("blue")
    rig.refuse(I.BatchToShoe(back="blue"), rig.sec("3(c)"), at=T0 + 24 * HOUR)
    rig.refuse(I.BatchToShoe(back="blue"), rig.sec("3(c)"), at=T0 + 30 * HOUR)
    # the decks changed: a new shoe again
    rig.feed(I.DecksOpened(back="blue", dealer="d", floorperson="f"), at=T0 + 30 * HOUR)
    rig.shuffle("blue")
    rig.load("blue")
    assert rig.table.shoe_back == "blue"


def test_a_shoe_loaded_just_inside_24_hours_is_accepted() -> None:
    """673a.3(c): one second before the 24 hours are up the decks may still start a shoe."""
    rig = Rig(BJ)
    rig.feed(I.DecksOpened(back="blue", dealer="d", floorperson="f"), at=T0)
    rig.feed(I.DecksOpened(back="red", dealer="d", floorperson="f"), at=T0)
    rig.shuffle("blue")
    cut_and_cover(lambda inp: rig.feed(inp, at=T0 + 24 * HOUR - 4), rig.table, "blue", rig.size() // 3)
    rig.feed(I.BatchToShoe(back="blue"), at=T0 + 24 * HOUR - 1)
    assert rig.table.shoe_back == "blue"


def test_the_stored_batch_is_refused_at_the_shoe_change_after_24_hours() -> None:
    """673a.3(c): at a shoe change a day later the stored batch is refused until its decks are
    changed; new decks are inspected, shuffled and dealt."""
    rig = _played(BJ)
    rig.feed(I.ReshuffleOrdered(by="floor-1"), at=T0 + 24 * HOUR + 10)
    rig.refuse(I.BatchToShoe(back="red"), "673a.3(c)")
    rig.feed(I.DecksOpened(back="red", dealer="dealer-2", floorperson="floor-2"))
    rig.shuffle("red")
    rig.load("red")
    rig.refuse(I.BatchToShoe(back="blue"), "673a.7(d)")
    rig.feed(I.DecksOpened(back="blue", dealer="dealer-2", floorperson="floor-2"))
    rig.shuffle("blue")
    rig.burn()
    rig.play_round((1,))
    assert rig.table.shoe_back == "red"


# ------------------------------------------------------------------ opening the table
@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_the_inspection_is_verified_by_the_floorperson(game: str) -> None:
    """673a.4(a), 665a.4(a), 685a.4(a): the dealer inspects the decks received and the floorperson
    assigned to the table verifies the inspection; without a floorperson the opening is refused."""
    rig = Rig(game)
    rig.refuse(I.DecksOpened(back="blue", dealer="dealer-1"), rig.sec("4(a)"))
    rig.refuse(I.DecksOpened(back="blue", dealer="dealer-1", floorperson=""), rig.sec("4(a)"))
    step = rig.feed(I.DecksOpened(back="blue", dealer="dealer-1", floorperson="floor-1"))
    (event,) = step.events
    assert event.kind == "decks_opened"
    assert event.payload["dealer"] == "dealer-1" and event.payload["floorperson"] == "floor-1"
    assert rig.table.batches["blue"].inspected


@pytest.mark.parametrize("game", BLACKJACK_GAMES)
def test_preinspected_decks_need_no_verified_inspection(game: str) -> None:
    """673a.4(e), 665a.4(f), 685a.4(e): decks received preinspected and preshuffled skip the
    inspection subsections."""
    rig = Rig(game)
    step = rig.feed(I.DecksOpened(back="blue", dealer="dealer-1", preinspected=True))
    (event,) = step.events
    assert event.kind == "decks_opened" and event.payload["preinspected"] is True
    assert event.payload["floorperson"] is None


def test_decks_in_the_shoe_are_not_replaced_mid_shoe() -> None:
    """673a.4: decks are received and inspected between shoes, not into the batch being dealt."""
    rig = ready(BJ)
    rig.refuse(I.DecksOpened(back="blue", dealer="d", floorperson="f"), "673a.4")


def test_an_unknown_back_colour_is_refused() -> None:
    """673a.3(b)(2): the table has exactly its two batches' colours."""
    rig = ready(BJ)
    rig.refuse(I.BatchToShuffler(back="green"), "673a.3(b)(2)")
    rig.refuse(I.DecksOpened(back="green", dealer="d", floorperson="f"), "673a.3(b)(2)")


def test_a_round_cannot_be_dealt_before_a_batch_is_in_the_shoe() -> None:
    """673a.7(a): every card is dealt from the dealing shoe."""
    rig = Rig(BJ)
    rig.open_batches()
    rig.refuse(I.RoundOpened(wagers=(SeatWagers(seat=1, bet=10),)), "673a.7(a)")
    rig.refuse(I.CardDrawn(card=rig.take("AS", "blue")), "673a.7(a)")
