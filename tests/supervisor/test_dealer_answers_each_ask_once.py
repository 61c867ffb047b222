"""The virtual dealer answers each ask once, by its id, as docs/mqtt.md asks of every client: it
remembers every id it answered, not only the last. A dealer that remembered only the last took
an earlier ask shown again (by a table too old to issue a new id) for a new one, and one that
answered each id once could not tell a re-split's card from the first split's by the id alone
until the table issued a new one (tests/table/test_ask_id.py)."""

from __future__ import annotations

from typing import Any

from controller.supervisor.config import load_table_config
from controller.supervisor.rig import table_file
from sim.clock import VirtualClock
from sim.table import SimTable
from sim.wire_dealer import WireDealer


class _NoTable:
    async def state(self) -> dict[str, Any]:
        return {}


def _dealer() -> WireDealer:
    config = load_table_config(table_file("double-attack"), side="both")
    sim = SimTable(list(config.devices), config.options.spec, seed=3, clock=VirtualClock())
    return WireDealer(sim, _NoTable(), boxes=2)  # type: ignore[arg-type]


def test_every_answered_id_stays_answered() -> None:
    dealer = _dealer()
    first = {"what": "card", "seat": 2, "hand": 0, "id": "3-card-aaa"}
    second = {"what": "decision", "seat": 2, "hand": 0, "id": "3-decision-bbb"}
    dealer._answer(first)
    dealer._answer(second)
    assert not dealer._new_ask(first)  # answered two asks ago: still answered
    assert not dealer._new_ask(second)
    assert dealer._new_ask({**first, "id": "3-card-ccc"})  # the same ask, a new id: a new ask


def test_an_ask_without_an_id_is_told_apart_from_the_last_only() -> None:
    dealer = _dealer()
    ask = {"what": "card", "seat": 1, "hand": 0}
    dealer._answer(ask)
    assert not dealer._new_ask(ask)
    dealer._answer({"what": "decision", "seat": 1, "hand": 0})
    assert dealer._new_ask(ask)  # asked again after another: without ids it can only be new
