"""The product's promise, as two processes and a broker: `tablectl sim --dealer` plays rounds at a
table run by `tablectl run` on the same table file, knowing of it only its public MQTT state, for
every game (DJ Wild dealt from the hand, its stub into the stub counter, 687a.9). That sim/ keeps
to its layer is import-linter's contract (pyproject.toml, run by bin/test)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest

from controller.journal import Journal, verify_journal
from sim.mqtt_link import MqttLink
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


@pytest.mark.parametrize("counts_cards", [True, False])
def test_dj_wild_over_the_wire_counts_every_stub(counts_cards: bool, tmp_path: Path, broker: str) -> None:
    """Issue 21: over the wire the dealer answered the deal twice (asked before and after Start Game
    locked the Progressive wagers) and the second Next put the stub away uncounted: 0 counts. Each
    ask is answered once now, by its id: the stub counted every round, as the demo does, with no
    refusal; also at a table whose shuffler does not count (687a.9(f): the count is then due every
    5 rounds, and 6 rounds pass that point)."""
    rounds = 6
    config = relocated_table("dj-wild", tmp_path)
    text = re.sub(r"(?m)^cycle_s = \d+", "cycle_s = 1", config.read_text(encoding="utf-8"))
    if not counts_cards:
        text = re.sub(r"(?m)^max_cycle_s = (\d+)$", r"max_cycle_s = \1\ncounts_cards = false", text)
        assert "counts_cards = false" in text
    config.write_text(text, encoding="utf-8")
    journal = tmp_path / "j.db"
    sim = tablectl(
        "sim", "--config", config, "--dealer", "--rounds", str(rounds), "--broker", broker, "--seed", "5"
    )
    run = None
    try:
        assert sim.stdout is not None
        for _ in range(3):
            assert " at=" in sim.stdout.readline()
        run = tablectl(
            "run", "--config", config, "--journal", journal, "--broker", broker, "--log-level", "warning"
        )
        _, err = sim.communicate(timeout=GUARD_S)
        assert sim.returncode == 0, err
    finally:
        if sim.poll() is None:
            sim.send_signal(signal.SIGTERM)
            sim.communicate(timeout=GUARD_S)
    assert run is not None
    run.send_signal(signal.SIGTERM)
    out, _ = run.communicate(timeout=GUARD_S)
    assert run.returncode == 0
    refusals = [line for line in out.splitlines() if '"event": "refused"' in line]
    assert refusals == []
    with Journal.open(journal, create=False, readonly=True) as j:
        records = list(j.records())
    counts = [r.payload for r in records if r.kind == "stub_counted"]
    assert len([r for r in records if r.kind == "round_settled"]) == rounds
    assert len(counts) == rounds and all(c["ok"] for c in counts)
    counted = {r.payload["cards_counted"] for r in records if r.kind == "shuffle_completed"}
    assert counted == ({53} if counts_cards else {None})
    assert verify_journal(journal).ok


async def test_the_dealer_acts_only_on_the_current_process_state(broker_port: int) -> None:
    """Issue 21: a dealer that starts after the table restarted on a fresh journal read the previous
    process's retained state (round 40) and acted on it. It takes a state only once the retained
    status names the process that published it."""
    base = "tablectl/s1/t1"

    def retained(topic: str, body: dict[str, Any]) -> None:
        out = paho.Client(paho.CallbackAPIVersion.VERSION2)
        out.connect("127.0.0.1", broker_port)
        out.loop_start()
        out.publish(f"{base}/{topic}", json.dumps(body), qos=1, retain=True).wait_for_publish(GUARD_S)
        out.loop_stop()
        out.disconnect()

    def state(incarnation: str, round_no: int) -> dict[str, Any]:
        ask = {"what": "bets", "round": round_no, "id": f"{round_no}-bets"}
        return {"incarnation": incarnation, "snapshot": {"round": round_no, "asking": ask}}

    retained("state", state("before", 40))  # what the previous process left
    retained("status", {"online": True, "incarnation": "now", "birth": "now-1"})  # the restarted one
    async with MqttLink(f"mqtt://127.0.0.1:{broker_port}", "s1", "t1", idle_timeout_s=GUARD_S) as link:
        first = asyncio.create_task(link.state())
        retained("state", state("now", 0))
        assert (await first)["round"] == 0
        retained("status", {"online": False, "incarnation": "now", "birth": "now-1", "clean": True})
        retained("state", state("again", 1))  # a restart on a fresh journal: its state before its status
        later = asyncio.create_task(link.wait())
        retained("status", {"online": True, "incarnation": "again", "birth": "again-1"})
        assert (await later)["round"] == 1


def test_a_pace_no_person_keeps_is_refused_in_one_line(tmp_path: Path) -> None:
    config = relocated_table("down-under", tmp_path)
    sim = tablectl("sim", "--config", config, "--dealer", "--pace", "-1")
    _, err = sim.communicate(timeout=GUARD_S)
    assert sim.returncode == 2
    assert err.strip() == "tablectl sim: --pace: must be 0 to 60 seconds"
