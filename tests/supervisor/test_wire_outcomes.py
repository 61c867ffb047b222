"""Every observation has an outcome, over the wire: ``tablectl run`` and ``tablectl sim --dealer``
as separate processes with a broker between them (tests/support/wire_processes.py), the devices'
timing varied by a timing seed, and a person beside the virtual dealer who, on some of the
table's published states, presses a key, puts chips on or off, or draws a card through the
simulator's control port: early, late, twice, out of order. Every device event ``run`` handles
is numbered in its JSON log (``observation``, controller/supervisor/device_events.py), and for
every number the log holds its outcome: applied (``step``), refused with its section
(``refused``), an alarm (``alarm``), taken with nothing to change (``unchanged``), or no input of
the table and why (``observed``). The dealer need not finish: the person may stop the game (a
card drawn unasked is an alarm); what is judged is that nothing it caused went unanswered."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from controller.supervisor.config import load_table_config
from tests.support.wire_processes import Run, Sim, StateWatch, Stuck
from tests.support.wire_soak import STOP_GUARD_S, Plan, prepare

OUTCOMES = frozenset({"step", "refused", "alarm", "observed", "unchanged"})
GUARD_S = 120.0  # failure guard only
ROUNDS = 4
KEYS = ["hit", "stand", "double", "split", "next", "start_game"]


async def _person(sim: Sim, watch: StateWatch, rng: random.Random, done: list[dict[str, Any]]) -> None:
    """On some of the table's states, one thing a person at the table might do."""
    while True:
        watch.changed.clear()
        await watch.changed.wait()
        roll = rng.random()
        if roll < 0.08:
            action: dict[str, Any] = {"action": "key", "key": rng.choice(KEYS)}
        elif roll < 0.14:
            action = {
                "action": "chips",
                "box": rng.randint(1, 3),
                "spot": rng.randint(1, 2),
                "on": rng.random() < 0.5,
            }
        elif roll < 0.16:
            action = {"action": "draw"}
        else:
            continue
        try:
            done.append(await sim.post("action", action) | {"did": action})
        except Stuck as e:  # the simulator would not (an empty shoe, a dealt box): nothing happened
            done.append({"did": action, "refused": str(e)})


@pytest.mark.parametrize("game", ["double-attack", "dj-wild"])
async def test_every_observation_over_the_wire_has_an_outcome(game: str, broker: str, tmp_path: Path) -> None:
    plan = Plan(game=game, seed=3, timing_seed=3)
    config = prepare(plan, tmp_path)
    cfg = load_table_config(config)
    sim = Sim(config, seed=plan.seed, timing_seed=plan.timing_seed, broker_url=broker)
    run = Run(config, tmp_path / "journal.db", broker)
    watch = StateWatch(broker, cfg.site, cfg.table_id)
    await watch.start()
    done: list[dict[str, Any]] = []
    person: asyncio.Task[None] | None = None
    try:
        await sim.start(ROUNDS, GUARD_S)
        await run.start()
        await run.wait_ready(GUARD_S)
        person = asyncio.create_task(_person(sim, watch, random.Random(plan.seed), done))
        # The dealer's rounds, or the dealer stopped by what the person did (a card drawn unasked
        # halts the table; the simulated devices then keep serving, as a table's do for the floor).
        await sim.dealer_ended(GUARD_S)
    finally:
        if person is not None:
            person.cancel()
            await asyncio.gather(person, return_exceptions=True)
        await run.stop(STOP_GUARD_S)
        await sim.stop(STOP_GUARD_S)
        await watch.stop()
    lines: dict[int, list[str]] = {}
    for line in run.lines:
        n = line.get("observation")
        if isinstance(n, int):
            lines.setdefault(n, []).append(str(line.get("event")))
    handled = max(lines, default=0)
    assert handled > 30, f"too few observations to say anything ({handled}); the person did {done}"
    without = [(n, lines.get(n, [])) for n in range(1, handled + 1) if not OUTCOMES & set(lines.get(n, []))]
    assert without == [], "observations without an outcome in run's log"
    failed = [x for x in run.lines if x.get("event") in ("event_failed", "settle_failed")]
    assert failed == []
    assert done, "the person did nothing: the property was not tried"
