"""A foreign-style dealer plays every game: one written from docs/mqtt.md and docs/simulators.md
alone (tests/support/foreign_dealer.py), beside `tablectl run` and `tablectl sim --control` as
separate processes with a real mosquitto. It answers each ask id exactly once for the whole run,
follows only the public MQTT state and acts only through the control port, never on the
simulators' insides. An ask id the table reused within a round (issue 34: a Double Attack
re-split's two card asks carried one id) would stall it; so would a wait the table leaves unsaid.

Double Attack re-splits are rare in a few rounds; the re-split id itself is the table core's
(tests/table, the core's own test of ask ids)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from controller.games import game_ids
from controller.journal import Journal, verify_journal
from sim.mqtt_link import MqttLink
from sim.table_file import read_table_file
from tests.relocated import relocated_table
from tests.support.foreign_dealer import ForeignDealer
from tests.support.wire_processes import Run, Sim

GUARD_S = 240.0  # failure guard only
ROUNDS = 4


@pytest.mark.parametrize("game", game_ids())
async def test_a_foreign_dealer_plays_every_game(game: str, tmp_path: Path, broker: str) -> None:
    config = relocated_table(game, tmp_path)
    config.write_text(re.sub(r"(?m)^cycle_s = \d+", "cycle_s = 1", config.read_text(encoding="utf-8")))
    cfg = read_table_file(config)
    journal = tmp_path / "j.db"
    sim = Sim(config, seed=11, timing_seed=11, broker_url=broker)
    run = Run(config, journal, broker)
    try:
        await sim.start(None, GUARD_S)
        await run.start()
        async with MqttLink(broker, cfg.site, cfg.table_id, idle_timeout_s=GUARD_S) as link:
            dealer = ForeignDealer(link, sim.control, side=cfg.side_wagers)
            async with asyncio.timeout(GUARD_S):
                settled = await dealer.play(ROUNDS)
    finally:
        await run.stop(30)
        await sim.stop(30)
    assert settled == ROUNDS
    refused = [x for x in run.lines if x.get("event") == "refused"]
    alarms = [x for x in run.lines if x.get("event") == "alarm"]
    assert (refused, alarms) == ([], []), (refused, alarms)
    with Journal.open(journal, create=False, readonly=True) as j:
        assert sum(r.kind == "round_settled" for r in j.records()) == ROUNDS
    assert verify_journal(journal).ok
