"""The product's promise, as two processes and a broker: `tablectl sim --dealer` plays rounds at a
table run by `tablectl run` on the same table file, knowing of it only its public MQTT state, for
every game (DJ Wild dealt from the hand, its stub into the stub counter, 687a.9). That sim/ keeps
to its layer is import-linter's contract (pyproject.toml, run by bin/test)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from controller.journal import Journal, verify_journal
from tests.relocated import relocated_table
from tests.supervisor.conftest import tablectl

GUARD_S = 120.0  # failure guard only


@pytest.mark.parametrize("game", ["down-under", "double-attack", "dj-wild"])
def test_sim_dealer_plays_rounds_at_a_table_run_beside_it(game: str, tmp_path: Path, broker: str) -> None:
    config = relocated_table(game, tmp_path)
    # A one-second shuffle so that each batch is ready at once (the examples say 20-30 s, and a DJ
    # Wild round needs a fresh shuffle; the failure guard is not a budget to spend on waiting).
    config.write_text(re.sub(r"(?m)^cycle_s = \d+", "cycle_s = 1", config.read_text(encoding="utf-8")))
    journal = tmp_path / "j.db"
    sim = tablectl("sim", "--config", config, "--dealer", "--rounds", "3", "--broker", broker, "--seed", "2")
    run = None
    try:
        assert sim.stdout is not None
        for _ in range(3 if game == "dj-wild" else 4):
            assert " at=" in sim.stdout.readline()  # every simulated device listens
        run = tablectl(
            "run", "--config", config, "--journal", journal, "--broker", broker, "--log-level", "warning"
        )
        _, err = sim.communicate(timeout=GUARD_S)
        assert sim.returncode == 0, err
        assert err.strip().endswith("tablectl sim: dealer: 3 rounds settled")
    finally:
        for proc in (sim, run):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=GUARD_S)
    assert run is not None and run.returncode == 0
    with Journal.open(journal, create=False, readonly=True) as j:
        settled = [r for r in j.records() if r.kind == "round_settled"]
    assert len(settled) == 3
    assert verify_journal(journal).ok
