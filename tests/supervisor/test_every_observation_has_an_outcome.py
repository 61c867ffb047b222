"""Every observation has an outcome (docs/design.md, "Nothing silent"), as a property: a dealer
who mostly plays by the book but, as a person at a real table might, acts early, late, twice and
out of order (keys pressed at any time, a card drawn unasked, an answer sent for an ask that has
gone, a device read out of turn, time passing), at a table whose devices are simulators on real
sockets read by the supervisor on the virtual clock (controller/supervisor/rig.py). For every
device event the supervisor handles (numbered in its log lines), the log holds its outcome:
applied (``step``), refused with its section (``refused``), an alarm (``alarm``), taken with
nothing to change (``unchanged``) or no input of the table, and why (``observed``); and every
dealer or floor command has its result.

The supervisor runs in this process (not ``tablectl run`` over MQTT): the devices are on the
wire, the people act through the same commands as the console, and the clock is virtual, so a
seed repeats. Each event's log lines carry its number (a context variable the supervisor's
event task binds while it handles the event; the commands run in the dealer's task, outside it).
tests/supervisor/test_wire_outcomes.py holds the same over MQTT, `tablectl run` beside
`tablectl sim`."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import structlog

from controller.games import game_ids
from controller.supervisor.rig import Rig
from devices.events import Key
from devices.profiles import DeviceKind
from sim.actions import ActionRefused
from sim.wire_dealer import TableStopped

# The outcome lines (controller/supervisor/step.py, device_events.py): one of them for every event.
OUTCOMES = frozenset({"step", "refused", "alarm", "observed", "unchanged"})
KEYS = [Key.HIT, Key.STAND, Key.DOUBLE, Key.SPLIT, Key.NEXT, Key.START_GAME]
ROUNDS = 4


class Outcomes:
    """The log lines of each device event the supervisor handles, by the number it logs them
    with (``observation``, controller/supervisor/device_events.py): a structlog processor."""

    def __init__(self) -> None:
        self.lines: dict[int, list[str]] = defaultdict(list)
        self.all: list[str] = []

    def __call__(self, logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        self.all.append(str(event_dict["event"]))
        n = event_dict.get("observation")
        if isinstance(n, int):
            self.lines[n].append(str(event_dict["event"]))
        raise structlog.DropEvent

    def without(self, handled: int) -> list[tuple[int, list[str]]]:
        return [(n, self.lines[n]) for n in range(1, handled + 1) if not OUTCOMES & set(self.lines[n])]


class Person:
    """What the dealer does besides the book, now and then (``link.pace``, before each read)."""

    def __init__(self, rig: Rig, rng: random.Random) -> None:
        self.rig, self.rng = rig, rng
        self.asks: list[str] = []  # ids seen, for answers sent late
        self.commands: list[dict[str, Any]] = []

    async def __call__(self) -> None:
        rig, rng = self.rig, self.rng
        ask = rig.supervisor.snapshot().get("asking") or {}
        if isinstance(ask.get("id"), str):
            self.asks.append(ask["id"])
        hands = rig.dealer.hands
        roll = rng.random()
        try:
            if roll < 0.06:  # early, twice, out of order: any key at any time
                hands.press(rng.choice(KEYS))
            elif roll < 0.09 and hands.has(DeviceKind.SHOE):  # a card drawn unasked
                hands.draw()
            elif roll < 0.14 and self.asks:  # an answer to an ask that may have gone
                old = rng.choice(self.asks)
                await self.command("key", {"key": rng.choice(KEYS).value, "ask": old}, "dealer")
            elif roll < 0.24:  # late: the table's time passes
                rig.clock.advance(rng.uniform(0.0, 20.0))
        except ActionRefused:
            pass  # the device would not (an empty shoe): nothing happened
        if rng.random() < 0.2:  # a device read out of turn, alone
            await rig.supervisor.settle(rng.choice(list(rig.supervisor.drivers)))

    async def command(self, name: str, args: dict[str, Any], role: str) -> dict[str, Any]:
        result = await self.rig.supervisor.command(name, args, f"{role}-1", role)
        self.commands.append(result)
        return result


async def _floor(rig: Rig, person: Person) -> bool:
    """The floor acknowledges every alarm; a round still stopped is voided. False: still stopped."""
    for alarm in rig.supervisor.snapshot()["alarms"]:
        await person.command("alarm_acknowledged", {"alarm": alarm["id"]}, "floor")
    ask = rig.supervisor.snapshot()["asking"]
    if ask.get("what") == "floor" and rig.supervisor.table.in_round:
        section = str(ask.get("section") or f"{rig.supervisor.table.chapter}.13")
        await person.command("void_round", {"section": section, "reason": "the property test"}, "floor")
    return rig.supervisor.snapshot()["asking"].get("what") != "floor"


@pytest.fixture
def outcomes() -> Iterator[Outcomes]:
    """structlog for this test, from before the table starts: context variables merged, then
    each line to the Outcomes."""
    into = Outcomes()
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, into], cache_logger_on_first_use=False
    )
    yield into
    structlog.reset_defaults()


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("game", game_ids())
async def test_every_device_observation_has_an_outcome(
    game: str, seed: int, table_rig: Callable[..., Awaitable[Rig]], outcomes: Outcomes
) -> None:
    rig = await table_rig(game, seed=seed, boxes=3)
    person = Person(rig, random.Random(seed))
    await rig.dealer.open_table()
    rig.link.pace = person
    stops = 0
    for _ in range(ROUNDS):
        try:
            await rig.dealer.play_round()
        except TableStopped:
            stops += 1
            if not await _floor(rig, person) or stops > 2 * ROUNDS:
                break
    rig.link.pace = None
    await rig.supervisor.settle()
    handled = rig.supervisor.device_events.observations
    assert handled > 50, "too few observations to say anything"
    assert outcomes.without(handled) == [], "observations without an outcome"
    assert "event_failed" not in outcomes.all and "settle_failed" not in outcomes.all
    for result in person.commands:  # every answer has its result: done, or refused saying why
        assert result["ok"] or str(result.get("error", "")).strip(), result
    assert {"observed", "refused"} <= set(outcomes.all)  # the person's doings were seen and judged
