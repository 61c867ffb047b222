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
from sim.control import ControlPort
from sim.models import DealtCard
from sim.table import SimTable
from tests.devices.conftest import GUARD_S, ROOT
from tests.relocated import relocated_table

CHECK_GUARD_S = 120.0  # a failing test only; a passing run takes a few seconds


# The simulator answers from this test's own process: beside a loaded machine's other work it
# took longer than the reference devices' 0.3 s (a keypad's command.reads_0 step failed at load
# 15). The check's steps are about what a device answers, not how fast; the silent-unit steps wait
# this long each.
REPLY_LIMIT_S = 1.0


def _table(game: str, folder: Path) -> Path:
    """The shipped table, relocated, with a short shuffle cycle so a check does not wait 30 s, and
    a reply limit for a simulator that shares a loaded test process."""
    path = relocated_table(game, folder)
    text = re.sub(r"(?m)^cycle_s = \d+$", "cycle_s = 0.2", path.read_text(encoding="utf-8"))
    text = re.sub(r"(?m)^timeout_s = [\d.]+$", f"timeout_s = {REPLY_LIMIT_S}", text)
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
    game: str,
    device: str,
    folder: Path,
    *,
    break_it: Callable[[Any], None] | None = None,
    control: bool = False,
) -> tuple[int, dict[str, Any], list[str]]:
    """With ``control``, the simulator's control port is served and passed as --sim-control."""
    path = _table(game, folder)
    sim = SimTable.from_file(path, seed=7, at_configured=True)
    if break_it is not None:
        break_it(sim.devices[device].model)
    await sim.start()
    port = ControlPort(sim)
    asked: list[str] = []
    try:
        steps = await _steps(sim, device)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        extra = []
        if control:
            host, number = await port.start()
            extra = ["--sim-control", f"http://{host}:{number}/"]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "controller.cli", "device", "check", "--config", str(path),
            "--device", device, "--json", "--step-timeout", str(GUARD_S), "--out-of-order", *extra,
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
        await port.stop()
        await sim.stop()
    return rc, json.loads(out), asked


def _by_id(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {r["id"]: r for r in doc["results"]}


# What is not checked against a healthy simulator without its control port: only what a real
# device is put into by hand (a jam, a device fault, a failed reader), each saying so. With the
# control port (--sim-control) every row is checked in one run.
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
PHYSICAL = {"shuffler": ["load_slot_a"], "shoe": ["load_shoe", "draw_card"], "reader": ["reader_card"],
            "keypad": ["start_game", "chip_1_1"], "stub": ["stub_37"]}  # fmt: skip


@pytest.mark.parametrize(("game", "device", "unchecked"), SHIPPED, ids=[f"{g}-{d}" for g, d, _ in SHIPPED])
async def test_every_shipped_simulator_passes(
    game: str, device: str, unchecked: list[str], tmp_path: Path
) -> None:
    rc, doc, asked = await run_check(game, device, tmp_path)
    failed = [r for r in doc["results"] if r["status"] == "fail"]
    assert (rc, failed) == (0, []), doc
    results = _by_id(doc)
    assert doc["passed"] is True and len(results) >= 5
    # Whatever is not checked says why: only what a real device is put into by hand.
    skipped = sorted(r["id"] for r in doc["results"] if r["status"] == "not checked")
    why = [results[i]["why"] for i in skipped]
    assert skipped == unchecked and all("by hand" in w for w in why), (skipped, why)
    assert asked == PHYSICAL[device]


@pytest.mark.parametrize(
    ("game", "device"), [("double-back-jack", "shuffler"), ("double-back-jack", "reader")]
)
async def test_with_the_control_port_every_row_is_checked_in_one_run(
    game: str, device: str, tmp_path: Path
) -> None:
    """Issue: step.jam could never be checked, and covering every shuffler row took four runs with
    the device put into each state by hand. Through the simulator's control port the check jams
    the shuffle, faults the shuffler and fails the reader itself, and mends what it caused."""
    rc, doc, asked = await run_check(game, device, tmp_path, control=True)
    failed = [r for r in doc["results"] if r["status"] != "pass"]
    assert (rc, failed) == (0, []), doc
    ids = set(_by_id(doc))
    assert {"state.15", "state.18", "step.jam"} <= ids if device == "shuffler" else "state.06" in ids
    assert set(asked) == set(PHYSICAL[device])


async def test_a_keypad_that_does_not_latch_fails_the_latch(tmp_path: Path) -> None:
    """Issue: a keypad that did not latch at Start Game passed 22/22 though the shipped profile
    says latches_on_start_game (the driver trusts the latch: 687a.9(b))."""
    rc, doc, _ = await run_check(
        "double-back-jack", "keypad", tmp_path, break_it=lambda m: setattr(m, "latches", False)
    )
    latch = _by_id(doc)["step.latch"]
    assert (rc, latch["status"], latch["came"]) == (1, "fail", "locked 0"), doc


async def test_a_failed_reader_is_judged_by_its_page(tmp_path: Path) -> None:
    """Issue: a failed reader (health 21) failed step.insert although it behaves as reader.md
    says: an insertion counts and gives no result while the reader is failed."""
    rc, doc, _ = await run_check(
        "double-back-jack", "reader", tmp_path, break_it=lambda m: setattr(m.faults, "dead", True)
    )
    insert = _by_id(doc)["step.insert"]
    assert (insert["status"], "failed reader" in insert["requirement"]) == ("pass", True), doc
    assert rc == 0 and doc["passed"] is True, doc


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
