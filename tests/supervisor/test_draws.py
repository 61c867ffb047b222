"""Which of the shoe's draws may be named in an alarm (controller/supervisor/draws.py): each kind
of record a drawn card goes into, and the reveals after it, by draw number, never by value."""

from __future__ import annotations

from controller.supervisor.draws import DrawLedger, draw_of
from controller.table.events import DomainEvent
from controller.table.recorder import Seen


def _e(kind: str, **payload: object) -> DomainEvent:
    return DomainEvent(kind, dict(payload), 0.0)


def test_each_kind_of_draw_and_its_reveal() -> None:
    ledger = DrawLedger()
    ledger.after(1, [_e("card_burned", card="10H")])  # never shown
    ledger.after(2, [_e("card_dealt", card="10H", seat=1)])  # face up
    ledger.after(3, [_e("hole_card_dealt", card="10H", seat=0)])  # until turned
    ledger.after(4, [_e("card_discarded_face_up", card="10H")])  # never
    ledger.after(5, [_e("card_held", card="10H")])  # until exposed or dealt face up
    ledger.after(6, [_e("card_discarded_extra", card="10H")])  # seen by all
    check = tuple((n, "10H") for n in range(1, 7))
    assert ledger.named(check) == ((1, ""), (2, "10H"), (3, ""), (4, ""), (5, ""), (6, "10H"))
    ledger.after(None, [_e("hole_card_turned", hole="10H")])
    ledger.after(None, [_e("card_dealt", card="10H", seat=2, held=True)])  # the held card, dealt
    assert ledger.named(check) == ((1, ""), (2, "10H"), (3, "10H"), (4, ""), (5, "10H"), (6, "10H"))


def test_a_held_card_dealt_as_the_hole_card_stays_hidden_until_turned() -> None:
    ledger = DrawLedger()
    ledger.after(7, [_e("card_held", card="AS")])
    ledger.after(None, [_e("hole_card_dealt", card="AS", seat=0, held=True)])
    assert not ledger.public(7)
    ledger.after(None, [_e("hole_card_exposed", hole="AS")])
    assert ledger.public(7)


def test_a_number_used_again_forgets_what_it_was() -> None:
    ledger = DrawLedger()
    ledger.after(9, [_e("card_dealt", card="2C", seat=1)])
    ledger.before(9)  # a reset shoe counts from the start again: a refused or secret draw now
    ledger.after(9, [_e("card_burned", card="2C")])
    assert not ledger.public(9)
    assert ledger.named(((9, "2C"), (10, "3C"))) == ((9, ""), (10, ""))  # unknown: not public


def test_the_draw_number_is_the_shoes_counter() -> None:
    assert draw_of(Seen("shoe", (("draw_seq", 12), ("remaining", 40)))) == 12
    assert draw_of(Seen("keypad", (("key_seq", 3),))) is None and draw_of(None) is None
