"""`tablectl device check` against every shipped simulator (everything checked passes) and
against a deliberately broken simulator of each kind (the broken requirement fails, named).

The check runs as its own process, as a device maker runs it; the simulators run here, on real
sockets and ptys at the table file's (relocated) addresses. When the check asks the person at
the device for a physical step (one `ask <step>:` line on its stderr), the test does it on the
simulator, as a person would at the device."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.cards import parse_card
from devices.events import Key, Slot
from sim.models import DealtCard
from sim.table import SimTable
from tests.devices.conftest import GUARD_S, ROOT
from tests.relocated import relocated_table

CHECK_GUARD_S = 120.0  # a failing test only; a passing run takes a few seconds


def _table(game: str, folder: Path) -> Path:
    """The shipped table, relocated, with a short shuffle cycle so a check does not wait 30 s."""
    path = relocated_table(game, folder)
    text = re.sub(r"(?m)^cycle_s = \d+$", "cycle_s = 0.2", path.read_text(encoding="utf-8"))
    path.write_text(text, encoding="utf-8")
    return path


async def _steps(sim: SimTable, device: str) -> dict[str, Callable[[], Any]]:
    info = sim.devices[device]
    m = info.model

    def load_shoe() -> None:
        cards = sim.game.batch(sim.decks, "red")
        m.load([DealtCard(c) for c in cards], "red")

    async def stub() -> None:
        assert info.frame_sim is not None
        await info.frame_sim.count(37)

    return {
        "load_slot_a": lambda: m.load(Slot.A, sim.game.batch(m.slots[Slot.A].decks, m.slots[Slot.A].back)),
        "load_shoe": load_shoe,
        "draw_card": lambda: m.draw(),
        "reader_card": lambda: m.insert(parse_card("KS")),
        "start_game": lambda: m.press(Key.START_GAME),
        "chip_1_1": lambda: m.place_bet(1, 1),
        "stub_37": stub,
    }


async def run_check(
    game: str, device: str, folder: Path, *, break_it: Callable[[Any], None] | None = None
) -> tuple[int, dict[str, Any], list[str]]:
    path = _table(game, folder)
    sim = SimTable.from_file(path, seed=7, at_configured=True)
    if break_it is not None:
        break_it(sim.devices[device].model)
    await sim.start()
    asked: list[str] = []
    try:
        steps = await _steps(sim, device)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "controller.cli", "device", "check", "--config", str(path),
            "--device", device, "--json", "--step-timeout", str(GUARD_S), "--out-of-order",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=ROOT,
        )  # fmt: skip
        assert proc.stderr is not None and proc.stdout is not None
        async with asyncio.timeout(CHECK_GUARD_S):
            while line := (await proc.stderr.readline()).decode():
                m = re.match(r"ask (\w+):", line)
                if m is None:
                    continue
                asked.append(m.group(1))
                done = steps[m.group(1)]()
                if asyncio.iscoroutine(done):
                    await done
            out = await proc.stdout.read()
            rc = await proc.wait()
    finally:
        await sim.stop()
    return rc, json.loads(out), asked


def _by_id(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {r["id"]: r for r in doc["results"]}


# What is not checked against a healthy simulator: only what cannot be caused safely from outside
# (a jam, a device fault, a failed reader), each with its reason.
SHIPPED = [
    (
        "double-back-jack",
        "shuffler",
        ["state.15", "state.16", "state.17", "state.18", "state.19", "step.jam"],
    ),
    ("double-back-jack", "shoe", []),
    ("double-back-jack", "reader", ["state.06"]),
    ("down-under", "reader", ["state.06"]),
    ("double-back-jack", "keypad", []),
    ("dj-wild", "stub", []),
]


@pytest.mark.parametrize(("game", "device", "unchecked"), SHIPPED, ids=[f"{g}-{d}" for g, d, _ in SHIPPED])
async def test_every_shipped_simulator_passes(
    game: str, device: str, unchecked: list[str], tmp_path: Path
) -> None:
    rc, doc, asked = await run_check(game, device, tmp_path)
    failed = [r for r in doc["results"] if r["status"] == "fail"]
    assert (rc, failed) == (0, []), doc
    results = _by_id(doc)
    assert doc["passed"] is True and len(results) >= 5
    # Whatever is not checked says why, and is only what cannot be done safely from outside.
    skipped = sorted(r["id"] for r in doc["results"] if r["status"] == "not checked")
    why = [results[i]["why"] for i in skipped]
    assert skipped == unchecked and all("cannot be caused" in w or "on purpose" in w for w in why), skipped
    physical = {"shuffler": ["load_slot_a"], "shoe": ["load_shoe", "draw_card"], "reader": ["reader_card"],
                "keypad": ["start_game", "chip_1_1"], "stub": ["stub_37"]}  # fmt: skip
    assert asked == physical[device]


BROKEN = [
    # (game, device, the broken behaviour, the requirement that must fail)
    (
        "double-back-jack",
        "shuffler",
        lambda m: setattr(m.faults, "ejects_unshuffled", True),
        "A idle: eject_to_shoe",
    ),
    ("double-back-jack", "shoe", lambda m: setattr(m.faults, "ring_lags", True), "step.draw"),
    ("double-back-jack", "reader", lambda m: setattr(m.faults, "reset_keeps_up_card", True), "reset"),
    ("double-back-jack", "keypad", lambda m: setattr(m.faults, "any_light_value", True), "set_light 1 1 2"),
    ("dj-wild", "stub", lambda m: setattr(m.faults, "verifies_only_53", True), "step.stub"),
]


@pytest.mark.parametrize(("game", "device", "break_it", "names"), BROKEN, ids=[d for _, d, _, _ in BROKEN])
async def test_a_broken_simulator_fails_the_requirement_it_breaks(
    game: str, device: str, break_it: Callable[[Any], None], names: str, tmp_path: Path
) -> None:
    rc, doc, _ = await run_check(game, device, tmp_path, break_it=break_it)
    failed = [r for r in doc["results"] if r["status"] == "fail"]
    assert rc == 1 and doc["passed"] is False
    assert any(names in r["id"] or names in r["requirement"] for r in failed), failed
    assert all(r.get("expected") and r.get("came") for r in failed)
