"""Issue 11, "Tests that prove it": kill -9 of ``tablectl run`` at seeded random moments over a
full shoe (mid-draw, mid-commit, and with the dealer drawing and pressing keys while it is down),
with a restart after each. Zero lost cards, zero phantom cards, no halting alarm that no person
caused, the journal verifies, and the broker saw every journal event's sequence number. The
harness is ``tests/support/kill9.py``; ``bench/kill9_soak.py`` runs it 100 times."""

from __future__ import annotations

from pathlib import Path

from tests.support.kill9 import run_once

KILLS = 12  # one full shoe with a restart every ~20 actions: ~20 s on two cores


async def test_kill_9_at_random_moments_over_a_full_shoe(tmp_path: Path) -> None:
    result = await run_once(seed=11, kills=KILLS, workdir=tmp_path)
    assert result.kills == KILLS and set(result.kills_by_kind) == {"mid-draw", "mid-commit", "downtime"}
    assert result.cards_drawn > 200  # a whole shoe, to the cover card
    assert result.lost_cards == 0 and result.unaccounted_cards == 0
    assert result.phantom_cards == 0
    assert result.halting_alarms == []
    assert result.journal_verifies
    assert result.mqtt_contiguous and result.mqtt_events == result.journal_records
