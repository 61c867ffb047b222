"""Every alarm's way out is offered on the alarm, and the table takes it (controller/console/
alarm_actions.py): alarms raised for real on the table core of each game, each button the
display offers on each alarm pressed as the floor, on a table raised afresh for each button. A
refusal (a RuleViolation, or arguments the allow-list refuses) fails the test; so does an alarm
with no button, or one whose buttons leave a halting alarm open."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import structlog

from controller import actions
from controller.console.alarm_actions import for_alarm
from controller.console.display import display, turn
from controller.errors import RuleViolation
from controller.games import blackjack_games
from controller.journal import JournalError
from controller.rules.requests import MasqueRange
from controller.rules.state import SeatWagers
from controller.supervisor.journal_outage import RESERVE_BYTES, JournalOutage
from controller.supervisor.mapping import ShoeLoad
from controller.supervisor.stalls import Presence, stalled
from controller.table import inputs as I
from controller.table.asking import asking
from controller.table.batches import Place
from devices.profiles import DeviceKind
from tests.console.alarm_sites import attributed, sites
from tests.core.conftest import Desk, make
from tests.table.helpers import BJ, DA, DU, WILD, Rig, manual, ready
from tests.table.test_dj_wild import _dealt, _round

BLACKJACK = blackjack_games()
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


def _other_batch_in_the_rack(rig: Rig) -> None:
    """673a.3(b)(5): the next batch loaded and burned from while the used one is still in the
    discard rack: the burn card goes into a rack holding the other batch."""
    rig.play_round((1, 2))
    rig.feed(I.ReshuffleOrdered(by="floor-1"))
    rig.load(rig.table.batch_in(Place.SHUFFLER)[0])
    rig.draw()


def _a_card_the_batch_does_not_hold(rig: Rig) -> None:
    """673a.3(b): a card out of the shoe more often than the batch holds it (a joker: none)."""
    _in_round(rig)
    rig.draw("JK")


def _reader_before_insurance_closed(rig: Rig) -> None:
    """673a.8(b): the hole card into the reader while insurance is still offered (the dealer's
    ace up; at Double Attack the Double Attack offer declined first)."""
    rig.burn()
    rig.open_round((1,))
    cards = ["5C", "AS", "6C", "9D"]  # box 1, the dealer's ace up, box 1, the hole card
    if rig.chapter == "665a":
        cards = ["AS", "5C", "6C", "9D"]  # Double Attack deals the dealer's up card first
    while (ask := asking(rig.table)).get("offer") != "insurance":
        if ask["what"] == "card":
            rig.draw(cards.pop(0))
        else:
            rig.feed(I.KeyPressed(key="next"))  # no Double Attack wager
    light = {"light": MasqueRange.MEDIUM} if rig.chapter == "685a" else {"blackjack": False}
    rig.feed(I.ReaderReport(**light))


def _at_the_reader(rig: Rig) -> Rig:
    """A round of box 1 waiting for the hole card in the reader (the dealer's ace up, 9 under)."""
    rig.burn()
    rig.open_round((1,))
    cards = ["AS", "5C", "6C", "9D"] if rig.chapter == "665a" else ["5C", "AS", "6C", "9D"]
    while asking(rig.table)["what"] != "reader":
        rig.answer(cards)  # offers declined
    return rig


def _reader_answers_wrong(rig: Rig) -> None:
    """673a.13(j), 665a.13(i): a peek reader that says Blackjack over a 9 has malfunctioned."""
    _at_the_reader(rig).feed(I.ReaderReport(blackjack=True))


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
    "the other batch in the discard rack": (BLACKJACK, _other_batch_in_the_rack),
    "a card the batch does not hold": (BLACKJACK, _a_card_the_batch_does_not_hold),
    "the reader used before insurance closed": (BLACKJACK, _reader_before_insurance_closed),
    "the peek reader answers wrong": ((BJ, DA), _reader_answers_wrong),
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

# -- the supervisor's alarms: the waits that cannot end (stalls.py), as StallWatch feeds them --
UP = dict.fromkeys(DeviceKind, Presence.UP)


def _stalled(
    rig: Rig,
    load: ShoeLoad | None = None,
    gone: DeviceKind | None = None,
    not_out: tuple[str, ...] = (),
    held: tuple[str, ...] = (),
) -> Rig:
    devices = {**UP, gone: Presence.GONE} if gone is not None else UP
    stall = stalled(rig.table, load, devices, not_out, held)
    assert stall is not None, asking(rig.table)
    rig.feed(I.Stalled(stall.section, stall.message, stall.floor_action))
    return rig


def _no_shoe_for_a_card(game: str) -> Rig:
    rig = ready(game)
    _in_round(rig)
    return _stalled(rig, gone=DeviceKind.SHOE)


def _no_reader_for_the_hole_card(game: str) -> Rig:
    return _stalled(_at_the_reader(ready(game)), gone=DeviceKind.READER)


def _no_shuffler_for_a_batch(game: str) -> Rig:
    rig = Rig(game)
    rig.open_batches()
    return _stalled(rig, gone=DeviceKind.SHUFFLER)


def _a_batch_the_shuffler_keeps(game: str) -> Rig:
    rig = ready(game, counted=False)
    return _stalled(rig, not_out=(str(rig.table.shoe_back),))


def _a_batch_in_play_back_in_its_slot(game: str) -> Rig:
    """The shuffler restarted or swapped reads the batch the table has out (in the shoe, or the
    deck in the dealer's hand) back in its slot, unshuffled."""
    rig = ready(game, counted=False)
    return _stalled(rig, held=(str(rig.table.shoe_back),))


def _a_load_the_table_did_not_take(game: str) -> Rig:
    return _stalled(ready(game), load=ShoeLoad(ready(game).backs()[1], 312))


def _a_load_before_its_cut(game: str) -> Rig:
    rig = manual()
    rig.feed(I.NewDealer(name="dealer-1"))
    back = rig.backs()[0]
    rig.feed(I.HandShuffled(back=back, dealer="dealer-1"))
    return _stalled(rig, load=ShoeLoad(back, rig.size(back)))


def _no_stub_counter(game: str) -> Rig:
    rig = ready(WILD, counted=False)
    for _ in range(4):
        _round(rig)
    rig.next_shoe(counted=False)
    _dealt(rig)
    return _stalled(rig, gone=DeviceKind.STUB_COUNTER)


STALLS: dict[str, tuple[tuple[str, ...], Callable[[str], Rig | Desk | Shell]]] = {
    "stall: no shoe for a card": (BLACKJACK, _no_shoe_for_a_card),
    "stall: no reader for the hole card": (BLACKJACK, _no_reader_for_the_hole_card),
    "stall: no shuffler for a batch": (GAMES, _no_shuffler_for_a_batch),
    "stall: a batch the shuffler keeps": (GAMES, _a_batch_the_shuffler_keeps),
    "stall: a batch in play back in the shuffler's slot": (GAMES, _a_batch_in_play_back_in_its_slot),
    "stall: a load the table did not take": (BLACKJACK, _a_load_the_table_did_not_take),
    "stall: a load before its cut is recorded": ((BJ,), _a_load_before_its_cut),
    "stall: no stub counter": ((WILD,), _no_stub_counter),
}


# -- the shell's own alarm (journal_outage.py): never journalled, the core does not know it ----
class Shell:
    """A core table with the supervisor's journal outage over it: its published state is the
    core's with the outage put in (``JournalOutage.into``), as the console is sent it."""

    def __init__(self, rig: Rig) -> None:
        async def never(_: float) -> None:
            raise AssertionError("no wait here")

        self.rig, self.table = rig, rig.table
        self.outage = JournalOutage(
            sleep=never, wall=lambda: 0.0, changed=lambda: None, log=structlog.get_logger()
        )

    def feed(self, inp: I.Input) -> None:
        self.rig.feed(inp)

    def snapshot(self) -> dict[str, Any]:
        return self.outage.into(dict(self.table.snapshot()), lambda ask: "ask")


def _journal_failed(game: str) -> Shell:
    shell = Shell(ready(game))
    shell.outage.began(JournalError("disk full"), "card_drawn", "shoe", holding=True)
    return shell


def _journal_disk_low(game: str) -> Shell:
    shell = Shell(ready(game))
    shell.outage.disk_checked((RESERVE_BYTES // 2, RESERVE_BYTES))
    return shell


SHELL = {
    "the journal cannot be written": (GAMES, _journal_failed),
    "the journal's disk low": (GAMES, _journal_disk_low),
}
BUILT = {**BY_HAND, **STALLS, **SHELL}
CASES = [(name, game) for name, (games, _) in SCENARIOS.items() for game in games]
CASES += [("shuffler miscount", game) for game in GAMES]
CASES += [(name, game) for name, (games, _) in BUILT.items() for game in games]


def _raised(name: str, game: str) -> Rig | Desk | Shell:
    if name == "shuffler miscount":
        return _shuffler_miscount(game)
    if name in BUILT:
        return BUILT[name][1](game)  # type: ignore[operator]
    rig = ready(game)
    SCENARIOS[name][1](rig)
    return rig


def _open(rig: Rig | Desk | Shell) -> list[dict[str, Any]]:
    snapshot = rig.snapshot() if isinstance(rig, Shell) else rig.table.snapshot()
    return list(display(snapshot, KINDS, turn(snapshot.get("asking") or {}))["alarms"])


def _press(rig: Rig | Desk | Shell, button: dict[str, Any]) -> None:
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


CLEARS = {"alarm_acknowledged", "reader_replaced", "misdeal_determined"}


@pytest.mark.parametrize(("name", "game"), CASES)
def test_every_button_on_every_alarm_is_taken(name: str, game: str) -> None:
    alarms = _open(_raised(name, game))
    assert alarms, f"{name} at {game} raised no alarm"
    for i, alarm in enumerate(alarms):
        # A button, or (the shell's alarm, which nothing pressed at the table ends) how it ends.
        assert alarm["actions"] or alarm["ends_by_itself"], f"{alarm['message']}: nothing offered"
        if alarm["halts"] and not alarm["ends_by_itself"]:
            assert {b["action"] for b in alarm["actions"]} & CLEARS, f"{alarm['message']}: nothing clears it"
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


def test_the_walk_raises_every_alarm_the_code_can_raise() -> None:
    """Every place in controller/ that makes an alarm (tests/console/alarm_sites.py reads them
    from the code: the core's raise_alarm, the supervisor's stalls and its journal outage) is
    raised by a case above: an alarm added without its case here fails this test."""
    known = sites()
    assert len(known) >= 31  # the reading of the code finds them (31 when this was written)
    raised = [a for name, game in CASES for a in _open(_raised(name, game))]
    one_plural = [
        str(a["message"])
        for a in raised
        if re.search(r"(?<![\d.])1 (cards|keys|reader results)\b", str(a["message"]))
    ]
    assert not one_plural, one_plural  # before: "1 cards left", "1 reader results unaccounted for"
    by_site = attributed(raised, known)
    assert "" not in by_site, f"alarms that match no place in the code: {by_site.get('')}"
    missing = sorted(s.where for s in known if s.where not in by_site)
    assert not missing, f"alarms the walk does not raise (add a case for each): {missing}"


@pytest.mark.parametrize("game", GAMES)
def test_the_journal_outage_offers_what_clears_it_and_no_refused_acknowledge(game: str) -> None:
    """Before: the halting alarm of a journal that cannot be written (alarm id 0, never
    journalled) offered Acknowledge, which the table refuses: it has no alarm 0. Now: no button;
    the floor action says to free space, and the alarm that it ends by itself."""
    shell = _raised("the journal cannot be written", game)
    (alarm,) = [a for a in _open(shell) if a["id"] == 0]
    assert alarm["halts"] and alarm["actions"] == []
    assert "free space on the journal's disk" in alarm["floor_action"]
    assert "resumes by itself" in alarm["ends_by_itself"]
    with pytest.raises(actions.BadAction, match="alarm_acknowledged: argument 'alarm' is out of range"):
        actions.check("alarm_acknowledged", {"alarm": 0}, "flo", actions.FLOOR)  # what it offered
    with pytest.raises(RuleViolation, match="no active alarm 0"):  # and the core knows no alarm 0
        shell.feed(I.AlarmAcknowledged(alarm=0, by="flo"))
    (low,) = _open(_raised("the journal's disk low", game))
    assert not low["halts"] and low["actions"] == [] and "by itself" in low["ends_by_itself"]


@pytest.mark.parametrize(("name", "game", "way_out"), [
    ("cards conflict", BJ, "void_round"), ("reader failed", DA, "reader_replaced"),
    ("the stub miscounted", WILD, "misdeal_determined"), ("the Masque light wrong", DU, "hand_called_dead"),
])  # fmt: skip
def test_the_way_out_is_the_name_the_alarm_carries_not_its_words(name: str, game: str, way_out: str) -> None:
    """The core names an alarm's way out (``action``, controller/table/alarms.py) and the buttons
    follow the name whatever the words say; an alarm journalled before alarms named it is still
    read from its section and words."""
    rig = _raised(name, game)
    snapshot = rig.table.snapshot()
    (alarm,) = [a for a in snapshot["alarms"] if a.get("action") == way_out]
    offered = [b["action"] for b in for_alarm(alarm, snapshot)]
    assert way_out in offered
    reworded = {**alarm, "section": "673a.0", "floor_action": "see the floor supervisor"}
    assert [b["action"] for b in for_alarm(reworded, snapshot)] == offered
    unnamed = {k: v for k, v in alarm.items() if k != "action"}
    assert [b["action"] for b in for_alarm(unnamed, snapshot)] == offered
