"""Every alarm's way out is offered on the alarm, and the table takes it (controller/console/
alarm_actions.py): alarms raised for real on the table core of each game, each button the
display offers on each alarm pressed as the floor, on a table raised afresh for each button. A
refusal (a RuleViolation, or arguments the allow-list refuses) fails the test; so does an alarm
with no button, or one whose buttons leave a halting alarm open."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.console.alarm_actions import for_alarm
from controller.console.display import display, turn
from controller.rules.requests import MasqueRange
from controller.rules.state import SeatWagers
from controller.supervisor import actions
from controller.table import inputs as I
from tests.core.conftest import Desk, make
from tests.table.helpers import BJ, DA, DU, WILD, Rig, ready

BLACKJACK = (BJ, DA, DU)
GAMES = (*BLACKJACK, WILD)
KINDS = {"shuffler": "shuffler", "shoe": "shoe", "reader": "reader", "keypad": "keypad"}


def _in_round(rig: Rig) -> None:
    rig.burn()
    rig.open_round((1, 2))


def _reader_failed(rig: Rig) -> None:
    rig.feed(I.ReaderFailed(code=3))


def _reader_failed_in_round(rig: Rig) -> None:
    _in_round(rig)
    rig.feed(I.ReaderFailed(code=3))


def _shoe_failed(rig: Rig) -> None:
    rig.feed(I.DeviceFailed(device="shoe", reason="no answer"))


def _keypad_failed(rig: Rig) -> None:
    rig.feed(I.DeviceFailed(device="keypad", reason="no answer"))


def _cards_conflict(rig: Rig) -> None:
    """The shoe's history contradicts the journal mid-round: the 3(b) alarm that says 'void the
    round in play if they differ' (the one Double Back Jack's menu hid the void from)."""
    _in_round(rig)
    rig.feed(
        I.DeviceGap(
            device="shoe",
            what="cards",
            reason="the shoe's history disagrees",
            unaccounted=0,
            halts=True,
            check=((4, ""),),
        )
    )


def _keys_lost(rig: Rig) -> None:
    rig.feed(I.DeviceGap(device="keypad", what="keys", reason="the key counter reset", unaccounted=2))


def _reader_results_lost(rig: Rig) -> None:
    rig.feed(
        I.DeviceGap(device="reader", what="reader results", reason="the reader restarted", unaccounted=1)
    )


def _stub_counts_lost(rig: Rig) -> None:
    rig.feed(I.DeviceGap(device="stub", what="stub counts", reason="counts nobody asked for", unaccounted=0))


def _foreign_card(rig: Rig) -> None:
    """673a.3(b)(2): a card of the other batch's colour out of the shoe (halting)."""
    _in_round(rig)
    other = next(b for b in rig.backs() if b != rig.table.shoe_back)
    rig.draw("AS", back=other)


def _drawn_while_halted(rig: Rig) -> None:
    """A card out of the shoe while dealing is stopped: held aside (its own alarm)."""
    _in_round(rig)
    rig.feed(I.ReaderFailed(code=3))
    rig.draw()


def _reader_out_of_turn(rig: Rig) -> None:
    """The hole card into the reader before the round asks for it (673a.13(i), 665a.13(h),
    685a.12(h))."""
    _in_round(rig)
    rig.feed(I.ReaderReport(blackjack=False))


def _second_card_out_of_turn(rig: Rig) -> None:
    """Between rounds, two cards out of the shoe: the first is held, the second halts."""
    rig.burn()
    rig.draw()
    rig.draw()


def _shoe_count_differs(rig: Rig) -> None:
    _in_round(rig)
    rig.draw(remaining=1)


def _wild_dealt(rig: Rig) -> None:
    rig.feed(I.WildRoundOpened(boxes=(1, 3)))
    rig.feed(I.BetSensed(box=1, present=True))
    rig.feed(I.StartGame())
    rig.feed(I.WildHandsDealt())


def _stub_miscounted(rig: Rig) -> None:
    """687a.9(h): the stub holds one card too few (53 - 2 boxes x 5 - 5 - 1 = 37 expected)."""
    _wild_dealt(rig)
    rig.feed(I.StubCounted(count=36))


def _past_posting(rig: Rig) -> None:
    """687a.9(b): a Progressive wager sensed after Start Game."""
    rig.feed(I.WildRoundOpened(boxes=(1, 2)))
    rig.feed(I.StartGame())
    rig.feed(I.BetSensed(box=2, present=True))


def _cover_card_too_deep(rig: Rig) -> None:
    """673a.5(d): the cover card came out with 1 card behind it."""
    rig.feed(I.CoverCardReached(remaining=1))


def _shuffler_jammed(rig: Rig) -> None:
    rig.feed(I.ShuffleFailed(back=rig.backs()[1], reason="jam"))


def _shuffler_miscount(game: str) -> Rig:
    rig = Rig(game)
    rig.open_batches()
    rig.feed(I.NewDealer(name="dealer-1"))
    rig.shuffle(rig.backs()[0], 10)  # the shuffler counted 10 cards of a whole batch
    return rig


SCENARIOS: dict[str, tuple[tuple[str, ...], Callable[[Rig], None]]] = {
    "reader failed": (BLACKJACK, _reader_failed),
    "reader failed in a round": (BLACKJACK, _reader_failed_in_round),
    "shoe failed": (BLACKJACK, _shoe_failed),
    "keypad failed": (GAMES, _keypad_failed),
    "cards conflict": (BLACKJACK, _cards_conflict),
    "keys lost": (BLACKJACK, _keys_lost),
    "reader results lost": (BLACKJACK, _reader_results_lost),
    "stub counts lost": ((WILD,), _stub_counts_lost),
    "a card of the other batch": (BLACKJACK, _foreign_card),
    "a card drawn while dealing is stopped": (BLACKJACK, _drawn_while_halted),
    "shuffler jammed": (GAMES, _shuffler_jammed),
    "the reader used out of turn": (BLACKJACK, _reader_out_of_turn),
    "a second card out of turn": (BLACKJACK, _second_card_out_of_turn),
    "the shoe's count differs": (BLACKJACK, _shoe_count_differs),
    "the stub miscounted": ((WILD,), _stub_miscounted),
    "a Progressive wager after Start Game": ((WILD,), _past_posting),
    "the cover card too deep": (BLACKJACK, _cover_card_too_deep),
}


def _wrong_masque_light(game: str) -> Desk:
    """685a.12(h): the hole card is a K (Large) and the reader lights Small."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("9S 7H 8D KC")
    d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    return d


def _reader_shows_the_hole_card(game: str) -> Desk:
    """665a.13(h)(1): the hole card into a reader that shows it, out of turn: the round is void."""
    d = make(game, reader_reveals_hole_card=True)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("7H")
    d.feed(I.KeyPressed(key="next"))  # no Double Attack wager
    d.deal("9S 8D 4C")
    d.feed(I.ReaderReport(blackjack=False))
    return d


# Raised on a table set up by hand (tests/core's Desk) where the round must hold given cards.
BY_HAND = {
    "the Masque light wrong": ((DU,), _wrong_masque_light),
    "the reader shows the hole card": ((DA,), _reader_shows_the_hole_card),
}
CASES = [(name, game) for name, (games, _) in SCENARIOS.items() for game in games]
CASES += [("shuffler miscount", game) for game in GAMES]
CASES += [(name, game) for name, (games, _) in BY_HAND.items() for game in games]


def _raised(name: str, game: str) -> Rig | Desk:
    if name == "shuffler miscount":
        return _shuffler_miscount(game)
    if name in BY_HAND:
        return BY_HAND[name][1](game)
    rig = ready(game)
    SCENARIOS[name][1](rig)
    return rig


def _open(rig: Rig | Desk) -> list[dict[str, Any]]:
    snapshot = rig.table.snapshot()
    return list(display(snapshot, KINDS, turn(snapshot.get("asking") or {}))["alarms"])


def _press(rig: Rig | Desk, button: dict[str, Any]) -> None:
    """The button as the page sends it (a box picked, a reason given), checked by the one
    allow-list as the floor's, and fed to the table: a refusal raises."""
    args = dict(button["args"])
    if button.get("pick") == "seat":
        args["seat"] = 1
    if button.get("destructive"):
        args["reason"] = "the cards differ from the journal"
    action = actions.check(button["action"], args, "flo", actions.FLOOR)
    assert action.build is not None, action.name
    for inp in action.build(args, "flo"):
        rig.feed(inp)


@pytest.mark.parametrize(("name", "game"), CASES)
def test_every_button_on_every_alarm_is_taken(name: str, game: str) -> None:
    alarms = _open(_raised(name, game))
    assert alarms, f"{name} at {game} raised no alarm"
    for i, alarm in enumerate(alarms):
        assert alarm["actions"], f"{alarm['message']}: nothing offered"
        for j in range(len(alarm["actions"])):
            rig = _raised(name, game)  # afresh for each button
            button = _open(rig)[i]["actions"][j]
            _press(rig, button)  # a RuleViolation here is a button the table refuses
            if alarm["halts"] and button["action"] in ("alarm_acknowledged", "reader_replaced"):
                assert all(a["id"] != alarm["id"] for a in _open(rig)), "the halting alarm stays"


@pytest.mark.parametrize("game", BLACKJACK)
def test_a_failed_reader_offers_reader_replaced_and_no_acknowledge(game: str) -> None:
    """Before: Acknowledge was offered and the table refused it (673a.13(j)); the action that
    clears the alarm was in a collapsed menu."""
    (alarm,) = _open(_raised("reader failed", game))
    assert [b["action"] for b in alarm["actions"]] == ["reader_replaced"]


@pytest.mark.parametrize("game", BLACKJACK)
def test_the_alarm_that_says_void_it_offers_the_void(game: str) -> None:
    """Before: at Double Back Jack the 673a.3(b) alarm said "void it if they differ" while
    void_round was hidden for the game."""
    (alarm,) = _open(_raised("cards conflict", game))
    offered = {b["action"]: b for b in alarm["actions"]}
    assert "void the round in play if they differ" in alarm["floor_action"]
    assert offered["void_round"]["args"] == {"section": alarm["section"]}
    assert "alarm_acknowledged" in offered


def test_a_wrong_stub_count_offers_the_misdeal_ruling() -> None:
    snapshot = {
        "alarms": [
            {
                "id": 4,
                "section": "687a.9(h)",
                "message": "the stub holds 30 cards, not 31",
                "floor_action": "determine whether the cards were misdealt; all hands are void "
                "and wagers returned",
            }
        ]
    }
    buttons = for_alarm(snapshot["alarms"][0], snapshot)
    assert [(b["action"], b["args"]) for b in buttons] == [
        ("misdeal_determined", {"misdealt": True}),
        ("misdeal_determined", {"misdealt": False}),
        ("alarm_acknowledged", {"alarm": 4}),
    ]
