"""The floor's way out of each open alarm, as buttons on the alarm itself.

An alarm says what the floor must do (its ``floor_action``, in words); this module turns that
into the console action that does it, offered on the alarm whatever the game's menus hide:

- the reader has failed (673a.13(j), 665a.13(i), 685a.12(i), 687a.9): **reader replaced** only.
  Acknowledging it is refused while the reader is out, so it is not offered; replacing the reader
  acknowledges the alarm and dealing resumes.
- the cards do not add up and the floor is told to void the round if they differ (the 3(b)
  alarms at every blackjack game): **void the round** under the alarm's own section, and
  **acknowledge** for when they agree. Double Back Jack's menu has no void (673a gives the dealer
  none), but this ruling is the floor's, so it is offered here.
- a wrong stub count at DJ Wild (687a.9(h)): **misdealt** / **not misdealt** (``misdeal_determined``).
- the reader's light does not match the hole card at Down Under (685a.12(h)): **call a hand
  dead** (the box picked on the alarm) and **acknowledge** to continue with the decisions made.
- the table's own alarm, which no button ends (the journal that cannot be written, and its disk
  running low: alarm id 0, ``controller/supervisor/journal_outage.py``): **no button**. The core
  never journalled them (the journal is what fails), so it refuses an Acknowledge of them; nothing
  pressed at the table frees a disk. The alarm says what the floor must do (free space, repair the
  disk) and ``ends_by_itself`` says that the table resumes, or the warning goes, by itself.
- every other alarm: **acknowledge**, which the table accepts for each of them (the stall alarms
  too, with the void where they say void the round).

The table's alarms name their way out (``action``, controller/table/alarms.py) where it is not an
acknowledgement; an alarm without the name (journalled before alarms had it, or a stall's) is
recognised by its section and words, and the buttons follow the table's public state, never a
card. ``tests/console/test_alarm_actions.py`` raises each alarm of each game for real and presses
what is offered: a refusal fails it, and so does a place in the code that makes an alarm the test
does not raise (``tests/console/alarm_sites.py`` reads them from the code).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.supervisor.journal_outage import ALARM_ID as JOURNAL_ALARM
from controller.table.sections import sections_of

_STUB = "687a.9(h)"
_READER_LIGHT = "685a.12(h)"


def _button(action: str, label: str, args: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    return {"action": action, "label": label, "args": dict(args), **more}


def ends_by_itself(alarm: Mapping[str, Any], snapshot: Mapping[str, Any]) -> str | None:
    """How an alarm no button clears ends, in the floor's words; None for the others."""
    if alarm.get("id") != JOURNAL_ALARM:
        return None
    if snapshot.get("journal_failed"):
        return "nothing to press here: the table resumes by itself once the journal takes a write"
    return "nothing to press here: the warning goes by itself once the disk has room again"


def for_alarm(alarm: Mapping[str, Any], snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The buttons that deal with ``alarm`` (an open alarm of the public snapshot) now."""
    if ends_by_itself(alarm, snapshot) is not None:
        return []  # the core refuses an Acknowledge of the shell's alarm: offered, it is a lie
    ack = _button("alarm_acknowledged", "acknowledge", {"alarm": alarm["id"]})
    way_out = _way_out(alarm)
    if way_out == "reader_replaced" and snapshot.get("reader_failed"):
        return [_button("reader_replaced", "reader replaced: dealing resumes", {})]
    if way_out == "misdeal_determined":
        return [
            _button("misdeal_determined", "misdealt: void all hands", {"misdealt": True}),
            _button("misdeal_determined", "not misdealt", {"misdealt": False}),
            ack,
        ]
    if way_out == "void_round" and snapshot.get("in_round"):
        void = {"section": str(alarm.get("section"))}
        return [_button("void_round", "they differ: void the round", void, destructive=True), ack]
    if way_out == "hand_called_dead" and snapshot.get("in_round"):
        return [_button("hand_called_dead", "call a hand dead", {}, pick="seat"), ack]
    return [ack]


def _way_out(alarm: Mapping[str, Any]) -> str | None:
    """The floor action the alarm names as its way out (``action``, controller/table/alarms.py).
    An alarm without one (journalled before alarms named it, or a stall of the supervisor's,
    whose words say "void the round") is read from its section and words."""
    if alarm.get("action") is not None:
        return str(alarm["action"])
    section, words = str(alarm.get("section")), str(alarm.get("floor_action", ""))
    if section in sections_of("reader_failed"):
        return "reader_replaced"
    if section == _STUB and "misdealt" in words:
        return "misdeal_determined"
    if section == _READER_LIGHT and "dead" in words:
        return "hand_called_dead"
    return "void_round" if "void the round" in words else None
