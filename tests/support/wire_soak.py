"""The wire soak: one game played by ``tablectl sim --dealer`` beside ``tablectl run``, separate
processes with a real mosquitto, on the shipped table file (moved to free ports), the devices'
timing varied by a seed; then judged from the journal and ``run``'s log.

A plan may add, in this order:

- kill -9 of ``run`` while the dealer plays: the first during the first shuffle of the fresh
  journal, the second at the first burn (DJ Wild: the first bets), the rest at seeded moments; each
  restart after a seeded downtime. Only a ``run`` that is up (it said ``ready``: journal read,
  every device answered) is killed, and a seeded moment counts from then: on a loaded machine
  ``run`` took 5-13 s to start, and kills 2-10 s apart killed five restarts in a row before any
  had read a device (a burn drawn meanwhile waited 45 s for a ``run`` to read it);
- the simulators restarted (every device resets), a fault through the control port (the keypad
  switched off and on again), then one more kill -9 and restart of ``run``. Alarms raised from the
  simulators' stop until ``run`` has journalled every device's reset (a reset is decided over a
  few polls, so the keypad may show online before it is) are a person's doing; any other alarm
  was caused by nobody.

``tests/supervisor/test_wire_soak.py`` runs it shortened in CI; ``bench/wire_soak.py`` runs it
long and prints JSON (figures in docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from controller.journal import Journal
from controller.shipped import table_file
from controller.supervisor.config import load_table_config
from tests.relocated import relocated_table
from tests.support.wire_journal import judge, last_settled_at
from tests.support.wire_processes import Run, Sim, StateWatch, Stuck, progress

READY_GUARD_S = 60.0  # failure guards only: a table that does not move within them is stuck
# A process coming up (`run` ready, `sim` listening) shows nothing until it has imported and read
# its files and devices: on a loaded machine that took 25-29 s of wall time for ~1 s of CPU. This
# only catches a process that never comes up; the table's own stillness is judged while it is up.
START_GUARD_S = 300.0
STOP_GUARD_S = 20.0
PORT_ATTEMPTS = 3
DEALER_DONE = "the dealer finished; its simulators stopped with it"
# A DJ Wild table whose shuffler does not count its cards: the stub is due every 5 rounds
# (687a.9(f)); the table file says so with the shuffler's counts_cards option.
UNCOUNTED = "dj-wild-uncounted"


@dataclass(frozen=True)
class Plan:
    game: str  # a shipped table (config/tables/<game>.toml) or UNCOUNTED
    shoes: int = 2  # blackjack: shoes played out
    rounds: int = 20  # DJ Wild: rounds settled
    seed: int = 1  # the shuffles, the kill moments and the downtimes
    timing_seed: int = 1  # the devices' timing (sim/timing.py)
    kills: int = 0  # kill -9 of run while the dealer plays
    restart_sim: bool = False  # then the simulators restarted, a fault, one more kill
    cycle_s: float | None = 2.0  # the simulated shuffler's cycle (the timing seed scales it)
    idle_guard_s: float = 60.0  # no new state for this long while dealing: stuck
    guard_s: float = READY_GUARD_S  # any other wait of the soak (a process up, a device back)

    @property
    def table(self) -> str:
        return "dj-wild" if self.game == UNCOUNTED else self.game

    @property
    def wild(self) -> bool:
        """DJ Wild's table (dealt from the hand) or another table playing DJ Wild."""
        return self.table == "dj-wild" or _game_of(self.table) == "dj-wild"


@dataclass
class Timeline:
    began: float = field(default_factory=time.time)
    dealt_s: float = 0.0
    kills: list[dict[str, Any]] = field(default_factory=list)
    person: list[tuple[float, float, str]] = field(default_factory=list)  # (from, to, what)
    stuck: str | None = None
    stopped: float = float("inf")  # when the soak gave up (stuck, or the dealer stopped)
    dealer_exit: int | None = None
    dealer_said: str = ""


@functools.cache  # asked at every change of the table's state; parsing the table file each time was
# half of the soak's CPU in this process (a shipped table's file does not change during a run)
def _game_of(table: str) -> str:
    return load_table_config(table_file(table), side="both").options.game.value


def prepare(plan: Plan, folder: Path) -> Path:
    """The table file in ``folder``: free ports, the simulated cycle, and for UNCOUNTED the
    shuffler's ``counts_cards = false`` (ConfigError when this build has no such option)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = relocated_table(plan.table, folder)
    text = config.read_text(encoding="utf-8")
    if plan.cycle_s is not None:
        text = re.sub(r"(?m)^cycle_s = [\d.]+", f"cycle_s = {plan.cycle_s:g}", text)
    if plan.game == UNCOUNTED:
        text = text.replace("[devices.shuffler]\n", "[devices.shuffler]\ncounts_cards = false\n", 1)
        # A table of its own on the broker: beside the shipped DJ Wild table, with the same id, each
        # dealer would read the other table's state.
        text = re.sub(r'(?m)^id = "([^"]+)"$', r'id = "\1-uncounted"', text, count=1)
    config.write_text(text, encoding="utf-8")
    load_table_config(config)  # refused here, in one line, rather than by run in its log
    return config


async def soak(plan: Plan, broker_url: str, folder: Path) -> dict[str, Any]:
    try:
        config = prepare(plan, folder)
    except ConfigError as e:
        return {"game": plan.game, "ran": False, "why_not": str(e)}
    cfg = load_table_config(config)
    journal = folder / "journal.db"
    sim = Sim(config, seed=plan.seed, timing_seed=plan.timing_seed, broker_url=broker_url)
    watch = StateWatch(broker_url, cfg.site, cfg.table_id)
    line = Timeline()
    await watch.start()
    run = Run(config, journal, broker_url)
    watch.paused = lambda: not run.ready.is_set()  # the table's stillness counts while run is up
    run.on_ready = watch.resumed
    try:
        for attempt in range(PORT_ATTEMPTS):
            try:
                await sim.start(plan.rounds if plan.wild else 1_000_000, START_GUARD_S)
                break
            except Stuck as e:
                # A free port picked for the table file was taken before the simulator bound it
                # (the machine runs other tests): move the table to other ports and start again.
                if "address already in use" not in str(e) or attempt == PORT_ATTEMPTS - 1:
                    raise
                await sim.stop(STOP_GUARD_S)
                sim.config = run.config = prepare(plan, folder)
        await run.start()
        await _deal(plan, run, sim, watch, line)
        if plan.restart_sim:
            await _people(plan, run, sim, watch, line)
    except Exception as e:  # Stuck, or anything else: the processes are stopped and it is said
        line.stuck = str(e) if isinstance(e, Stuck) else f"{type(e).__name__}: {e}"
        line.stopped = min(line.stopped, time.time())
    finally:
        await run.stop(STOP_GUARD_S)  # the table first: devices that go away are no alarm of the soak's
        await sim.stop(STOP_GUARD_S)
        await watch.stop()
    # run's log beside its journal, for whoever chases a finding (the soak's folder is kept or not)
    log = "".join(json.dumps(x) + "\n" for x in run.lines)
    await asyncio.to_thread((folder / "run.jsonl").write_text, log, "utf-8")
    sim_log = "".join(x + "\n" for x in sim.stderr)
    await asyncio.to_thread((folder / "sim.stderr").write_text, sim_log, "utf-8")
    return judge(plan, journal, run.lines, line)


async def _deal(plan: Plan, run: Run, sim: Sim, watch: StateWatch, line: Timeline) -> None:
    """The dealer plays until the shoes are out (DJ Wild: the rounds settled), run killed on the way."""
    began = time.monotonic()
    killer = asyncio.create_task(_kills(plan, run, watch, line))
    assert sim.proc is not None
    exited = asyncio.create_task(sim.dealer_ended(None))
    try:
        moved = time.monotonic()  # the last time the game moved (a device's health is no move)
        last = progress(watch.snap)
        while not (not plan.wild and len(watch.batches_in_play) > plan.shoes) and not exited.done():
            watch.changed.clear()
            changed = asyncio.create_task(watch.changed.wait())
            waits = {changed, exited} | (set() if killer.done() else {killer})
            await asyncio.wait(waits, timeout=plan.idle_guard_s, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            if killer.done() and not killer.cancelled() and killer.exception() is not None:
                raise killer.exception()  # type: ignore[misc]
            if watch.snap.get("round") is not None and progress(watch.snap) != last:
                moved, last = time.monotonic(), progress(watch.snap)
                line.dealt_s = moved - began  # a game that stops is timed to its last move
            elif watch.paused():
                moved = time.monotonic()  # run is starting: a table that is not up is not still
            elif time.monotonic() - max(moved, watch.moved_at) > plan.idle_guard_s:
                raise Stuck(f"the game did not move for {plan.idle_guard_s:g}s; state: {_where(watch)}")
        line.dealt_s = time.monotonic() - began
    finally:
        killer.cancel()
        await asyncio.gather(killer, return_exceptions=True)
        if run.proc is not None and run.proc.returncode is not None:
            await run.start()  # killed as the dealing ended: up again for what follows
    if exited.done():
        done_at = min(sim.dealer_done_at, time.time())
        line.dealer_said = sim.dealer_said
        # Its rounds settled, the process ends by itself (0); a dealer the table stopped leaves the
        # devices serving (exit 1 once stopped, in the finally of soak()).
        settled = sim.dealer_said.endswith("rounds settled") or sim.proc.returncode is not None
        line.dealer_exit = await sim.wait(STOP_GUARD_S) if settled else 1
        if line.dealer_exit != 0 or not plan.wild:
            line.stopped = done_at  # the devices went with the dealer: what run says next is no finding
            raise Stuck(f"the dealer stopped (exit {line.dealer_exit}): {line.dealer_said}")
        # DJ Wild's dealer is done: the simulators stopped with it, a person's doing (until what
        # follows, if anything, closes the window). The window opens at the dealer's last settled
        # round in the journal: the dealer says its line and closes its devices right after it, and
        # on a loaded machine this process read that line seconds after `run` had journalled the
        # keypad's link going down (a 687a.9(b) alarm then counted as nobody's).
        settled_at = await asyncio.to_thread(last_settled_at, run.journal)
        line.person.append((min(done_at, settled_at), float("inf"), DEALER_DONE))


def _where(watch: StateWatch) -> str:
    keys = ("round", "in_round", "batch_in_shoe", "halted", "asking")
    return str({k: watch.snap.get(k) for k in keys})


async def _kills(plan: Plan, run: Run, watch: StateWatch, line: Timeline) -> None:
    """kill -9 of run: the first while the first batch shuffles, the second at the first burn (DJ
    Wild: the first bets), then at seeded moments; each restarted after a seeded downtime."""
    rng = random.Random(f"kills/{plan.seed}")
    first = "bets" if plan.wild else "burn"
    for n in range(plan.kills):
        if n == 0:
            await watch.until(lambda s: _shuffling(s), "the first shuffle", plan.guard_s)
            await asyncio.sleep(rng.uniform(0.0, 0.5))
            moment = "first shuffle"
        elif n == 1:
            await watch.until(lambda s: _asked(s) == first, f"the first {first}", plan.guard_s)
            await asyncio.sleep(rng.uniform(0.0, 0.15))
            moment = f"first {first}"
        else:
            await run.wait_ready(START_GUARD_S)  # the seeded moment counts from when run is up
            await asyncio.sleep(rng.uniform(2.0, 10.0))
            moment = "random"
        down_s = rng.uniform(0.1, 1.5)
        await run.wait_ready(START_GUARD_S)  # a run killed before it is up tells nothing of the table
        await _kill(run, watch, line, moment, down_s)
        await asyncio.sleep(down_s)  # the table is down this long: the dealer may act meanwhile
        await run.start()


async def _kill(run: Run, watch: StateWatch, line: Timeline, moment: str, down_s: float) -> None:
    """kill -9 of run, said in the timeline with how long it took to start and had been up."""
    now = time.time()
    start_s = None if run.ready_at is None else round(run.ready_at - run.started_at, 2)
    up_s = None if run.ready_at is None else round(now - run.ready_at, 2)
    await run.kill9()
    line.kills.append({"moment": moment, "at_s": round(now - line.began, 2), "asking": _asked(watch.snap),
                       "down_s": round(down_s, 2), "start_s": start_s, "up_s": up_s})  # fmt: skip


# The counters a reset sets back to 0 and the driver decides on (the shuffler's cycle is a new
# baseline at the next cycle; a stub counter's counts are frames, not a polled counter).
RESET_COUNTERS = ("draw_seq", "key_seq", "insert_seq")


def _resets_read(journal: Path) -> bool:
    """Whether the journal has every device's event counters back at 0 (the simulators restarted,
    nobody at the table since): run has read every device's reset."""
    with Journal.open(journal, create=False, readonly=True) as j:
        counters: dict[str, dict[str, int]] = {}
        for r in j.records():
            seen = r.payload if r.kind == "device_seen" else r.payload.get("device_seen")
            if isinstance(seen, dict) and isinstance(seen.get("counters"), dict):
                counters.setdefault(str(seen.get("device")), {}).update(seen["counters"])
    return all(c.get(k, 0) == 0 for c in counters.values() for k in RESET_COUNTERS)


def _asked(snap: dict[str, Any]) -> str | None:
    ask = snap.get("asking")
    return str(ask.get("what")) if isinstance(ask, dict) else None


def _shuffling(snap: dict[str, Any]) -> bool:
    batches = snap.get("batches") or {}
    return any(isinstance(b, dict) and b.get("shuffler") == "shuffling" for b in batches.values())


def _all_online(snap: dict[str, Any]) -> bool:
    devices = snap.get("devices") or {}
    return bool(devices) and all(h == "online" for h in devices.values())


async def _people(plan: Plan, run: Run, sim: Sim, watch: StateWatch, line: Timeline) -> None:
    """The simulators restarted and the keypad switched off and on: a person's doing; then run
    killed and restarted once more, which must raise nothing."""
    began = time.time()
    if line.person and line.person[-1][2] == DEALER_DONE:
        began = line.person.pop()[0]  # the simulators already stopped with the dealer
    await sim.stop(STOP_GUARD_S)
    await sim.start(None, START_GUARD_S)
    await watch.until(_all_online, "every device back after the simulators restarted", plan.guard_s)
    await sim.post("fault", {"fault": "power_off", "device": "keypad"})
    await watch.until(lambda s: (s.get("devices") or {}).get("keypad") not in (None, "online"),
                      "the keypad seen off", plan.guard_s)  # fmt: skip
    await sim.post("fault", {"fault": "power_on", "device": "keypad"})
    await watch.until(_all_online, "the keypad back", plan.guard_s)
    await run.wait_ready(START_GUARD_S)  # whatever run was doing: it has read every device
    # A device back online may still have its reset held back for a second look (a glitch is
    # shorter than the settle window, devices/drivers/registers.py): the person's doing ends once
    # run has decided every reset and journalled its counters, each alarm raised once.
    await watch.until(lambda s: _resets_read(run.journal), "every device's reset journalled", plan.guard_s)
    line.person.append((began, time.time(), "simulators restarted; keypad switched off and on"))
    await _kill(run, watch, line, "after the simulators restarted", 0.0)
    seen = watch.count
    await run.start()
    await run.wait_ready(START_GUARD_S)
    # The restarted table publishes its state once it has read every device and reconciled.
    await watch.until(
        lambda s: watch.count > seen and _all_online(s), "the state after the restart", plan.guard_s
    )
