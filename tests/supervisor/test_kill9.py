"""kill -9 of ``tablectl run`` mid-round, and a restart that resumes from the journal: the round
finishes once, the journal verifies, and every card drawn is in it exactly once.

The simulators run in the test process (on the real clock, with a short shuffle cycle); the
controller is a subprocess started as an operator would start it, whose JSON log lines on stdout
are the events the test waits on. The test plays the dealer: it reads what the table asks from
the journal (read-only) and acts on the simulators.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.journal import verify_journal
from controller.rules.requests import CardFor, Decision, Offer, ReaderUse, WagerOffer
from controller.shipped import table_file
from controller.strategy import choose
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import ROOT, concrete_config
from controller.table import inputs as I
from controller.table.recorder import JournaledTable
from devices.events import Key
from sim.table import SimTable
from tests.supervisor.conftest import GAMES, journal_kinds, replayed

GUARD_S = 60.0  # failure guard only: a restart under load takes 10 s+
BOXES = (1, 2)


class Controller:
    """``tablectl run`` as a subprocess, and its log lines as they come."""

    def __init__(self, config: Path, journal: Path) -> None:
        self.config, self.journal = config, journal
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[dict[str, Any]] = []
        self.pos = 0

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "controller.cli",
            "run",
            "--config",
            str(self.config),
            "--journal",
            str(self.journal),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        began = len(self.lines)
        await self.until(lambda line: line["event"] == "ready")
        self.pos = began  # what happened while the devices came up is still to be looked at

    async def until(self, want: Any) -> dict[str, Any]:
        try:
            return await self._until(want)
        except TimeoutError:
            seen = "\n".join(json.dumps(x) for x in self.lines[-30:])
            raise AssertionError(f"not seen in {GUARD_S}s; the last lines:\n{seen}") from None

    async def _until(self, want: Any) -> dict[str, Any]:
        """The next line (after the last one matched) that ``want`` accepts."""
        assert self.proc is not None and self.proc.stdout is not None
        while self.pos < len(self.lines):
            self.pos += 1
            if want(self.lines[self.pos - 1]):
                return self.lines[self.pos - 1]
        async with asyncio.timeout(GUARD_S):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    err = await self.proc.stderr.read() if self.proc.stderr else b""
                    raise AssertionError(f"tablectl run ended: {err.decode()[-2000:]}")
                line = json.loads(raw)
                self.lines.append(line)
                assert line["event"] not in ("refused", "event_failed", "driver_crashed"), line
                if want(line):
                    self.pos = len(self.lines)
                    return line

    async def step_from(self, device: str) -> dict[str, Any]:
        return await self.until(lambda line: line["event"] == "step" and line["device"] == device)

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(GUARD_S):
            rest, _ = await self.proc.communicate()
        self.lines += [json.loads(x) for x in rest.splitlines() if x.strip()]
        return self.proc.returncode if self.proc.returncode is not None else -1


def _opened_journal(game: str, path: Path) -> None:
    """The floor verified both batches and the dealer came in (as a previous run journalled)."""
    from tests.support.kill9 import direct_insert

    cfg = load_table_config(table_file(game))
    jt = JournaledTable.open(path, direct_insert(cfg.options), cfg.table_id, now=1_800_000_000.0)
    import time

    for back in jt.table.batches:
        jt.handle(I.DecksOpened(back=back, dealer="dealer-1", floorperson="floor-1"), time.time())
    jt.handle(I.NewDealer(name="dealer-1"), time.time())
    jt.close()


async def _one_blackjack_action(sim: SimTable, ctl: Controller) -> bool:
    """Do what the table asks next; False once the round is over."""
    table = replayed(ctl.journal)
    rnd = table.round
    if rnd is None:
        return False
    req, state = rnd.request, rnd.state
    models = {n: i.model for n, i in sim.devices.items()}
    if isinstance(req, CardFor):
        models["shoe"].draw()
        await ctl.step_from("shoe")
    elif isinstance(req, ReaderUse):
        models["reader"].insert(state.dealer[1])
        await ctl.step_from("reader")
    else:
        if isinstance(req, Decision):
            box = next(b for b in state.boxes if b.seat == req.seat)
            key = Key(choose(box.hands[req.hand], state.dealer[0], req.legal).value)
        elif isinstance(req, WagerOffer):
            key = Key.DOUBLE
        elif isinstance(req, Offer):
            key = Key.NEXT
        else:  # pragma: no cover
            raise AssertionError(req)
        models["keypad"].press(key)
        await ctl.step_from("keypad")
    return True


@pytest.mark.parametrize("game", GAMES)
async def test_kill_9_mid_round_and_resume(game: str, tmp_path: Path) -> None:
    cfg = load_table_config(table_file(game))
    fast = [replace(d, sim={**d.sim, "cycle_s": 0.3}) for d in cfg.devices]
    # A direct-insert shuffler (ruling G13), as in the soak: the kill is the subject here.
    sim = SimTable(fast, cfg.options.spec, seed=5, decks=cfg.options.decks, direct_insert=game != "dj-wild")
    await sim.start()
    journal = tmp_path / "table.db"
    _opened_journal(game, journal)
    ctl = Controller(concrete_config(game, sim, tmp_path / "table.toml"), journal)
    models = {n: i.model for n, i in sim.devices.items()}
    try:
        await ctl.start()
        await ctl.until(lambda line: line["event"] == "step" and "batch_to_shoe" in line["kinds"])
        # The eject follows the journalled step; the other batch going into the shuffler shows it done.
        await ctl.until(lambda line: line["event"] == "step" and "batch_to_shuffler" in line["kinds"])
        if "shoe" in models:
            models["shoe"].draw()  # 673a.7(c): the burn card
            await ctl.step_from("shoe")
        for box in BOXES:
            models["keypad"].place_bet(box, 1)
            models["keypad"].place_bet(box, 2)
        models["keypad"].press(Key.START_GAME)
        if "shoe" in models:
            await ctl.until(lambda line: "round_started" in line.get("kinds", []))
            for _ in range(3):  # three cards dealt and journalled, then the controller dies
                assert await _one_blackjack_action(sim, ctl)
        else:
            await ctl.until(lambda line: "progressive_locked" in line.get("kinds", []))
        await ctl.kill9()
        kinds_at_kill = [k for k, _ in journal_kinds(journal)]

        await ctl.start()  # resumes: the journal is replayed and the table is mid-round again
        assert replayed(journal).in_round
        if "shoe" in models:
            while await _one_blackjack_action(sim, ctl):
                pass
        else:
            models["keypad"].press(Key.NEXT)  # the hands are dealt
            await ctl.step_from("keypad")
            models["keypad"].press(Key.NEXT)  # the stub goes away uncounted
            await ctl.until(lambda line: "round_settled" in line.get("kinds", []))
        assert await ctl.terminate() == 0
        assert any(line["event"] == "journal_closed" for line in ctl.lines)
        assert models["keypad"].locked  # left safe

        result = verify_journal(journal)
        assert result.ok, result.reason
        records = journal_kinds(journal)
        kinds = [k for k, _ in records]
        assert kinds[: len(kinds_at_kill)] == kinds_at_kill  # nothing lost across the kill
        assert kinds.count("round_started") == 1 and kinds.count("round_settled") == 1
        assert "alarm_raised" not in kinds  # the shoe's own count agreed card by card
        if "shoe" in models:
            drawn = sum(k in ("card_dealt", "hole_card_dealt", "card_burned") for k in kinds)
            assert drawn == models["shoe"].draw_seq  # every card once: none lost, none doubled
        else:
            sensed = [p["box"] for k, p in records if k == "bet_sensed"]
            assert sorted(sensed) == list(BOXES)
    finally:
        if ctl.proc is not None and ctl.proc.returncode is None:
            ctl.proc.kill()
            await ctl.proc.wait()
        await sim.stop()
