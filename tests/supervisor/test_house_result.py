"""The demo summary's house figures, read back against the journal they come from: a wager that
broke even reads 0.0, never -0.0 (the double-attack demo said ``"house_edge": -0.0``)."""

from __future__ import annotations

import json
from pathlib import Path

from controller.appliance.demo import house_result
from controller.journal import Journal


def _settled(j: Journal, *settlements: tuple[str, int, int]) -> None:
    """One round_settled record: (wager, stake, halves the player won per unit staked)."""
    payload = {"settlements": [{"wager": w, "stake": s, "halves": h} for w, s, h in settlements]}
    j.append("round_settled", payload, "public", 1_800_000_000.0)


def test_a_wager_that_broke_even_reads_zero_not_minus_zero(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as j:
        _settled(j, ("bet", 10, 2), ("insurance", 5, 0))  # bet won 1:1; insurance pushed
        _settled(j, ("bet", 10, -2), ("insurance", 5, 0))  # bet lost; insurance pushed
    house = house_result(tmp_path / "j.db")
    text = json.dumps(house)
    assert "-0.0" not in text, text
    assert house["insurance"] == {
        "settled": 2, "staked": 10.0, "house_net": 0.0, "house_edge": 0.0, "house_edge_stderr": 0.0
    }  # fmt: skip
    # The bet: +10 then -10 for the players, 20 staked: the house is even on it too.
    assert house["bet"]["house_net"] == 0.0 and house["bet"]["staked"] == 20.0


def test_the_house_figures_add_up_from_the_journal(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as j:
        _settled(j, ("bet", 10, -2))  # the player lost 10
        _settled(j, ("bet", 20, 3))  # the player won 3:2 on 20, i.e. 30
        _settled(j, ("bet", 10, -2))
    bet = house_result(tmp_path / "j.db")["bet"]
    assert bet["settled"] == 3 and bet["staked"] == 40.0
    assert bet["house_net"] == 10 - 30 + 10  # what the players lost minus what they won
    assert bet["house_edge"] == round(-10 / 40, 4)
