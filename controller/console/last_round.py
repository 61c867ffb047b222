"""The last round settled, as the dealer display shows it under the layout while the dealer pays.

The layout empties the moment a round ends (the table's state holds only the round in play), but
the dealer settles the wagers after that: the display keeps the last settled round in view. It
comes from the journal's public ``round_settled`` record (every card in it is face up by then),
found from the end of the journal, and read again only when a newer one has been written.
"""

from __future__ import annotations

from typing import Any

from controller.console.display import mark_second_chance
from controller.journal import Journal
from controller.journal.model import Classification

KIND = "round_settled"


class LastRound:
    def __init__(self) -> None:
        self._seq: int | None = None
        self._round: dict[str, Any] | None = None
        self._looked_at = -1  # the journal's last seq when it was last looked at

    def get(self, journal: Journal) -> dict[str, Any] | None:
        """The last settled round's public record (None before the first); a voided round is
        not one (``round_voided`` is its own record)."""
        head = journal.last_seq  # one row: nothing written since, nothing to look for
        if head == self._looked_at:
            return self._round
        self._looked_at = head
        seq = journal.last_seq_of(KIND)
        if seq is not None and seq != self._seq:
            record = next(journal.records(after_seq=seq - 1), None)
            if record is not None and record.kind == KIND and record.classification is Classification.PUBLIC:
                self._seq, self._round = seq, _shown(record.payload)
        return self._round


def _shown(payload: dict[str, Any]) -> dict[str, Any]:
    """What the display shows of the record: the hands, their totals and results (not the
    record's bookkeeping: settlements, device counters, the reader's agreement)."""
    if payload.get("wild"):
        return {"round": payload.get("round"), "wild": True}
    dealer = payload.get("dealer", {})
    return {
        "round": payload.get("round"),
        "dealer": {k: dealer.get(k) for k in ("cards", "total", "blackjack")},
        "boxes": [
            {
                "seat": b.get("seat"),
                "hands": [
                    mark_second_chance({k: h.get(k) for k in ("cards", "total", "result")})
                    for h in b.get("hands", [])
                ],
            }
            for b in payload.get("boxes", [])
        ],
    }
