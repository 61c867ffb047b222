"""Shoe changes over the wire (issue 21): `tablectl run` and `tablectl sim --dealer` as separate
processes with a real mosquitto, on the shipped table files of Double Attack and Down Under, the
shoe polled every 50 ms as shipped and the shuffler more slowly, so the shoe is mostly read first.
At each shoe change the used batch goes back into its shuffler slot at the moment the new batch
goes into the shoe: put there by the dealer after the cut, or by a direct-insert shuffler (ruling
G13) that takes the used batch back at the moment of the eject, as docs/simulators.md says ours
does. The controller must take the burn and the Start Game that follow in the order they
happened, however the polls fall: no alarm, no refused key. The floor orders a reshuffle in
every other round (673a.5(f)), so a few rounds make a few shoe changes. The test follows the
table's public state over MQTT, as a floor console does, and stops at the first alarm."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.shipped import table_file
from controller.supervisor.rig import ROOT
from sim.mqtt_link import MqttLink
from tests.relocated import relocated_table
from tests.supervisor.conftest import tablectl

GUARD_S = 120.0  # failure guard only
ROUNDS = 7
SHUFFLER_POLL_S = 0.3
IDLE_S = 10.0  # a table that publishes nothing new this long has stopped (failure guard only)
SITE = "example-floor"
TABLE_IDS = {"double-attack": "dab-01", "down-under": "dub-01"}


def run_logged(config: Path, journal: Path, broker: str, log: Path) -> subprocess.Popen[str]:
    """`tablectl run` with its JSON log lines in a file (nobody has to keep reading a pipe)."""
    out = log.open("w", encoding="utf-8")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "run", "--config", str(config), "--journal",
             str(journal), "--broker", broker],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    finally:
        out.close()


async def order_reshuffles(link: MqttLink) -> tuple[int, list[Any]]:
    """The floor's part: a reshuffle ordered in every other round, until the dealer is done.
    Returns the shoe changes seen and the open alarms (none, or what failed)."""
    snap = await link.state()
    shoes: list[str] = []
    ordered_at = -2
    while True:
        if snap.get("alarms"):
            return len(shoes) - 1, list(snap["alarms"])
        back = snap.get("batch_in_shoe")
        if back is not None and (not shoes or shoes[-1] != back):
            shoes.append(str(back))
        played = int(snap.get("round", 0))
        if not snap.get("in_round") and played >= ROUNDS:
            return len(shoes) - 1, []
        if snap.get("in_round") and played >= ordered_at + 2 and played < ROUNDS:
            # During a round: the shoe ends when it is settled, and the next is dealt from the
            # other batch; ordered between rounds, it would race the dealer's next Start Game.
            ordered_at = played
            await link.floor("reshuffle_ordered", {})
        snap = await link.wait()


def table_at_the_wire(game: str, direct_insert: bool, tmp_path: Path) -> Path:
    """The shipped table, relocated, with a one-second shuffle (each used batch is ready again by
    the next reshuffle) and the shuffler read more slowly than shipped (100 ms), so that the shoe
    is mostly read first; ``direct_insert``: the shuffler loads the shoe itself (ruling G13)."""
    config = relocated_table(game, tmp_path)
    text = re.sub(r"(?m)^cycle_s = \d+", "cycle_s = 1", config.read_text(encoding="utf-8"))
    assert "poll_interval_s = 0.05" in text  # the shoe as shipped
    text = text.replace(
        "[devices.shuffler]\n", f"[devices.shuffler]\npoll_interval_s = {SHUFFLER_POLL_S}\n", 1
    )
    if direct_insert:
        game_file = table_file(game).parent / f"../games/{game}.toml"
        direct = tmp_path / f"{game}-game.toml"
        direct.write_text(
            game_file.read_text(encoding="utf-8").replace(
                "direct_insert_shuffler = false", "direct_insert_shuffler = true"
            ),
            encoding="utf-8",
        )
        text = text.replace(f'game = "../games/{game}.toml"', f'game = "{direct}"')
    config.write_text(text, encoding="utf-8")
    return config


@pytest.mark.parametrize(
    ("game", "direct_insert"), [("double-attack", False), ("down-under", False), ("double-attack", True)]
)
async def test_shoe_changes_over_the_wire_raise_nothing(
    game: str, direct_insert: bool, tmp_path: Path, broker: str
) -> None:
    config = table_at_the_wire(game, direct_insert, tmp_path)
    # The dealer would play on: `run` is stopped once ROUNDS have settled, while its devices are up.
    sim = tablectl(
        "sim", "--config", config, "--dealer", "--rounds", str(ROUNDS * 10), "--broker", broker, "--seed", "4"
    )
    run = None
    log = tmp_path / "run.log"
    try:
        assert sim.stdout is not None
        for _ in range(4):
            assert " at=" in sim.stdout.readline()  # every simulated device listens
        async with (
            asyncio.timeout(GUARD_S),
            MqttLink(broker, SITE, TABLE_IDS[game], idle_timeout_s=IDLE_S) as link,
        ):
            run = run_logged(config, tmp_path / "j.db", broker, log)
            changes, alarms = await order_reshuffles(link)
        assert alarms == []
        assert changes >= 2
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=GUARD_S) == 0
        assert sim.poll() is None, sim.communicate(timeout=GUARD_S)  # the dealer never stopped
    finally:
        for proc in (run, sim):  # `run` first: devices that go away are alarms
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=GUARD_S)
    lines = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.startswith("{")]
    said = [(x["event"], x.get("section"), x.get("message") or x.get("error")) for x in lines]
    assert [x for x in said if x[0] in ("alarm", "refused")] == []
    windows = [x for x in lines if x["event"] == "settle_window"]
    assert all(w["by"] == "shuffler_read" for w in windows), windows
