"""Doubling for less through the table core, in every chapter: 673a.10(a), 665a.10(a) and
685a.9(a) say the double "may not exceed" its limit, so an amount keyed with the double is taken,
checked against the limit before anything is journalled, and settled exactly."""

from __future__ import annotations

import pytest

from controller.errors import RuleViolation
from controller.game_config import default_options
from controller.rules.requests import MasqueRange
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.asking import asking
from controller.table.core import Table
from tests.core.conftest import Desk, make

DBJ, DA, DU = "double-back-jack", "double-attack", "down-under"


def bet_nets(d: Desk) -> list[tuple[int, int]]:
    """(stake, halves) of each Bet line settled for seat 1 (the Double Down is its own line)."""
    settled = [e for e in d.events if e.kind == "round_settled"][-1].payload["settlements"]
    return [(s["stake"], s["halves"]) for s in settled if s["seat"] == 1 and s["wager"] == "bet"]


def test_673a_10a_double_for_less_is_journalled_and_settled_exactly() -> None:
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("4C 9H 6D KS")  # seat 1: 10 against a 9 up; no peek
    ask = asking(d.table)
    assert ask["what"] == "decision" and ask["double_limit"] == 10
    d.feed(I.KeyPressed(key="double", amount=5))
    decision = [e for e in d.events if e.kind == "decision"][-1]
    assert decision.payload["action"] == "double" and decision.payload["amount"] == 5
    d.draw("7C")  # 17 against the dealer's 19
    assert bet_nets(d) == [(10, -2), (5, -2)]  # the Bet and a double of 5 lost, not of 10
    replayed = Table.replay(default_options(DBJ), d.events)
    assert replayed.fingerprint() == d.table.fingerprint()


def test_665a_10a_double_attack_double_for_the_bet_alone() -> None:
    """The issue's case: Bet 10 + Double Attack 10, doubled for 10, is settled on 10, not 20."""
    d = make(DA)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("6S")
    d.feed(I.WagerPlaced(seat=1, amount=10))
    d.deal("5C 6H JD")
    assert asking(d.table)["double_limit"] == 20
    d.feed(I.KeyPressed(key="double", amount=10))
    d.draw("9C")  # 20
    d.feed(I.KeyPressed(key="stand"))  # 665a.9(a): surrender is still open after a double
    d.draw("8S")  # the dealer's 16 draws 8 and busts
    assert bet_nets(d) == [(10, 2), (10, 2)]


def test_685a_9a_a_double_over_the_bet_is_refused_and_changes_nothing() -> None:
    d = make(DU)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("5C 7H 6D 10S")
    d.feed(I.ReaderReport(light=MasqueRange.LARGE))
    before, events = d.table.fingerprint(), len(d.events)
    with pytest.raises(RuleViolation, match=r"^685a\.9\(a\): seat 1: a double of 15 is more than the 10"):
        d.feed(I.KeyPressed(key="double", amount=15))
    with pytest.raises(RuleViolation, match=r"^685a\.9\(a\): seat 1: a double is for one chip or more"):
        d.feed(I.KeyPressed(key="double", amount=0))
    with pytest.raises(RuleViolation, match=r"^685a\.7\(i\)\(2\): only a double is keyed with an amount"):
        d.feed(I.KeyPressed(key="hit", amount=5))
    assert d.table.fingerprint() == before and len(d.events) == events
    d.feed(I.KeyPressed(key="double"))  # no amount: for the limit
    d.draw("9S")
    assert bet_nets(d) == [(10, 2), (10, 2)]


def test_a_double_for_less_in_chips_of_the_table_unit() -> None:
    """Ruling G3: wagers are in the table's chip unit; a double is a whole number of them."""
    d = make(DBJ, min_chip=5)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("4C 9H 6D KS")
    with pytest.raises(RuleViolation, match=r"^673a\.10\(a\): seat 1: a double is made in chips of 5"):
        d.feed(I.KeyPressed(key="double", amount=7))


def test_the_keyed_amount_reaches_the_core_from_the_keypad_and_the_key_command() -> None:
    """The keypad's ButtonPressed(amount) and the dealer's ``key`` command (``amount``) become the
    same input; with an insurance or Double Attack offer open the amount is that wager's."""
    from controller import actions
    from controller.supervisor.mapping import Translator
    from devices.events import ButtonPressed, Key

    d = make(DA)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("6S")
    tr = Translator()
    assert tr.inputs(ButtonPressed("keypad", Key.DOUBLE, 3, 5), d.table) == [I.WagerPlaced(seat=1, amount=5)]
    d.feed(I.WagerPlaced(seat=1, amount=10))
    d.deal("5C 6H JD")
    assert tr.inputs(ButtonPressed("keypad", Key.DOUBLE, 4, 15), d.table) == [I.KeyPressed("double", 15)]
    assert tr.key_inputs("double", d.table) == [I.KeyPressed("double")]
    assert actions.check("key", {"key": "double", "amount": 15}, "dealer-1", "dealer").name == "key"
    with pytest.raises(actions.BadAction, match=r"^key: argument 'amount' is out of range"):
        actions.check("key", {"key": "double", "amount": 0}, "dealer-1", "dealer")
