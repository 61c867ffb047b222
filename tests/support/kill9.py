"""kill -9 of ``tablectl run`` at random (seeded) moments over a full shoe, and what survived.

The appliance runs as a subprocess, as systemd starts it, against simulators in this process and
a broker of its own; a dealer plays the table on the simulators. The dealer decides from the
journal (read-only) with its own actions not yet journalled played on top, through the same pure
table core, so it knows what the table will ask next even while the appliance is dead. The kills
come at seeded moments of three kinds:

- ``mid-draw``: a card is drawn and the appliance killed at once (polled, perhaps not committed);
- ``mid-commit``: an action, then the kill a random few milliseconds later (the commit, the
  device commands after it, the follow-ups);
- ``downtime``: the kill, then the dealer goes on drawing cards and pressing keys on the devices
  while the appliance is down (what a restart must pick up from the devices' histories).

After the shoe is played out the appliance is stopped cleanly and the run is judged: every card
the shoe gave is in the journal exactly once (none lost, none invented), no halting alarm that no
person caused, the journal verifies, and the events reached the broker with no gap in their
sequence. ``tests/supervisor/test_kill9_soak.py`` runs this in CI; ``bench/kill9_soak.py`` runs it
many times and prints JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import aiomqtt

from controller.appliance.demo import broker
from controller.errors import RuleViolation
from controller.game_config import GameOptions
from controller.games import GameId
from controller.journal import Journal, verify_journal
from controller.rules.requests import CardFor, Decision, Offer, ReaderUse, WagerOffer
from controller.strategy import choose
from controller.supervisor.config import load_table_config
from controller.supervisor.mapping import Translator
from controller.supervisor.rig import ROOT, concrete_config, table_file
from controller.table import inputs as I
from controller.table.core import Table
from controller.table.recorder import JournaledTable, domain_events, options_of
from devices.events import Key
from sim.table import SimTable

GUARD_S = 30.0  # no single wait of the harness takes longer than this; it fails loudly instead
BOXES = (1, 2)
CARD_KINDS = ("card_dealt", "hole_card_dealt", "card_burned", "card_held", "card_discarded_face_up",
              "card_discarded_extra")  # fmt: skip
KILL_KINDS = ("mid-draw", "mid-commit", "downtime")


@dataclass
class Result:
    seed: int
    game: str
    kills: int = 0
    kills_by_kind: dict[str, int] = field(default_factory=dict)
    cards_drawn: int = 0
    lost_cards: int = 0
    phantom_cards: int = 0
    unaccounted_cards: int = 0
    halting_alarms: list[str] = field(default_factory=list)
    other_alarms: list[str] = field(default_factory=list)
    journal_verifies: bool = False
    journal_records: int = 0
    mqtt_events: int = 0
    mqtt_contiguous: bool = False
    rounds: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            not self.lost_cards and not self.phantom_cards and not self.halting_alarms
            and self.journal_verifies and self.mqtt_contiguous
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


class Appliance:
    """``tablectl run`` as a subprocess; its JSON log lines wake whoever waits on progress."""

    def __init__(self, config: Path, journal: Path, broker_url: str) -> None:
        self.config, self.journal, self.broker_url = config, journal, broker_url
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[dict[str, Any]] = []
        self._news = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self.ready = False

    async def start(self, wait_ready: bool = True) -> None:
        self.ready = False
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "controller.cli", "run", "--config", str(self.config),
            "--journal", str(self.journal), "--broker", self.broker_url, cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read(self.proc))
        if wait_ready:
            await self.wait(lambda: self.ready, "the appliance to be ready")

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while raw := await proc.stdout.readline():
            with contextlib.suppress(ValueError):
                line = json.loads(raw)
                self.lines.append(line)
                if line.get("event") == "ready":
                    self.ready = True
            self._news.set()
        self._news.set()

    async def wait(self, cond: Callable[[], bool], what: str) -> None:
        """Until ``cond()``: checked on every log line, and every 50 ms for what logs nothing (a
        simulator's own state)."""
        deadline = time.monotonic() + GUARD_S
        while not cond():
            if self.proc is not None and self.proc.returncode is not None and not self.ready:
                raise AssertionError(f"tablectl run ended while waiting for {what}")
            if time.monotonic() > deadline:
                tail = "\n".join(json.dumps(x) for x in self.lines[-20:])
                raise AssertionError(f"waited {GUARD_S}s for {what}; the last lines:\n{tail}")
            self._news.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await self._news.wait()

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()
        if self._reader is not None:
            await self._reader
        self.ready = False

    async def stop(self) -> int:
        assert self.proc is not None
        self.proc.terminate()
        async with asyncio.timeout(GUARD_S):
            code = await self.proc.wait()
        if self._reader is not None:
            await self._reader
        return code


@dataclass
class Action:
    """What the dealer did on a device, until the journal shows the appliance has read it."""

    device: str
    counter: str
    value: int
    inputs: Callable[[Table, Translator], list[I.Input]]


class Dealer:
    def __init__(self, sim: SimTable, journal: Path, rng: random.Random) -> None:
        self.sim, self.journal, self.rng = sim, journal, rng
        self.models = {n: d.model for n, d in sim.devices.items()}
        self.pending: list[Action] = []
        self.drawn: list[str] = []  # every card the shoe gave, "rank+suit/back"
        self._cache: tuple[int, Table, int] | None = None

    def _replay(self) -> tuple[int, Table, int]:
        with Journal.open(self.journal, create=False, readonly=True) as j:
            last = j.last_seq
            if self._cache is not None and self._cache[0] == last:
                return self._cache
            records = j.records()
            options, table_id = options_of(next(records))
            ended = 0

            def events() -> Any:
                nonlocal ended
                for r in records:
                    ended += r.kind == "shoe_ended"
                    yield r

            table = Table.replay(options, domain_events(events()), table_id)
            self._cache = (last, table, ended)
            return self._cache

    def journalled(self) -> Table:
        return self._replay()[1]

    def shoes_ended(self) -> int:
        return self._replay()[2]

    def caught_up(self) -> bool:
        t = self.journalled()
        self.pending = [
            a for a in self.pending if t.device_seen.get(a.device, {}).get(a.counter, 0) < a.value
        ]
        return not self.pending

    def table(self) -> Table:
        """The journal, with the dealer's actions the appliance has not journalled yet on top."""
        if self.caught_up():
            return self.journalled()
        with Journal.open(self.journal, create=False, readonly=True) as j:
            records = j.records()
            options, table_id = options_of(next(records))
            shadow = Table.replay(options, domain_events(records), table_id)
        tr = self.translator()
        for action in self.pending:
            for inp in action.inputs(shadow, tr):
                try:
                    shadow.handle(inp, shadow.now)
                except RuleViolation:
                    break
        return shadow

    def translator(self) -> Translator:
        tr = Translator()
        tr.bets = {(b, s) for b in BOXES for s in (1, 2)}
        return tr

    def next_action(self, t: Table, appliance_up: bool) -> str | None:
        """What the dealer would do now: draw, key, reader, start; None: the table must move."""
        rnd = t.round
        in_shoe = self.models["shoe"].remaining > 0  # the eject follows the journalled step
        if rnd is None:
            if t.shoe_back is None or t.halted or not in_shoe:
                return None
            return "draw" if t.burns_due else "start"
        req = rnd.request
        if isinstance(req, CardFor):
            return "draw" if in_shoe else None
        if isinstance(req, ReaderUse):
            reader = self.models.get("reader")
            up = rnd.state.dealer[0].rank
            # The appliance tells the reader the up card; a hole card goes in only after that.
            ready = appliance_up and reader is not None and getattr(reader, "up_rank", None) == up
            return "reader" if ready else None
        return "key"

    def act(self, kind: str, t: Table) -> None:
        rnd = t.round
        if kind == "draw":
            dc = self.models["shoe"].draw()
            self.drawn.append(f"{dc.card}/{dc.card.back}")
            shoe = self.models["shoe"]
            drawn = [I.CardDrawn(card=dc.card, face_up_in_shoe=dc.face_up)]
            self.pending.append(Action("shoe", "draw_seq", shoe.draw_seq, lambda t, tr, d=drawn: list(d)))
        elif kind == "reader":
            assert rnd is not None
            reader = self.models["reader"]
            reader.insert(rnd.state.dealer[1])
            result = reader.result
            self.pending.append(Action("reader", "insert_seq", reader.insert_seq,
                                       lambda t, tr, r=result: _reader_inputs(r)))  # fmt: skip
        else:
            key = Key.START_GAME if kind == "start" else self._key(t)
            keypad = self.models["keypad"]
            keypad.press(key)
            self.pending.append(Action("keypad", "key_seq", keypad.key_seq,
                                       lambda t, tr, k=key: tr.key_inputs(k.value, t)))  # fmt: skip

    def _key(self, t: Table) -> Key:
        assert t.round is not None
        req, state = t.round.request, t.round.state
        if isinstance(req, Decision):
            box = next(b for b in state.boxes if b.seat == req.seat)
            return Key(choose(box.hands[req.hand], state.dealer[0], req.legal).value)
        if isinstance(req, WagerOffer):
            return Key.DOUBLE
        if isinstance(req, Offer):
            return Key.NEXT
        raise AssertionError(f"the dealer has no key for {req!r}")


def _reader_inputs(result: str) -> list[I.Input]:
    from controller.rules.requests import MasqueRange as CoreRange

    lights = {"small": CoreRange.SMALL, "medium": CoreRange.MEDIUM, "large": CoreRange.LARGE}
    if result in lights:
        return [I.ReaderReport(light=lights[result])]
    return [I.ReaderReport(blackjack=result == "yes")]


def _opened_journal(game: str, path: Path) -> None:
    """The floor verified both batches and the dealer came in (as a previous run journalled). The
    blackjack tables declare a direct-insert shuffler (ruling G13): what is killed here is the
    appliance, mid-draw and mid-commit; the cut of a stack at a batch shuffler is played over the
    wire by tests/supervisor/test_games.py and test_wire_dealer.py."""
    cfg = load_table_config(table_file(game))
    options = direct_insert(cfg.options)
    jt = JournaledTable.open(path, options, cfg.table_id, now=1_800_000_000.0)
    for back in jt.table.batches:
        jt.handle(I.DecksOpened(back=back, dealer="dealer-1", floorperson="floor-1"), time.time())
    jt.handle(I.NewDealer(name="dealer-1"), time.time())
    jt.close()


def direct_insert(options: GameOptions) -> GameOptions:
    """The game's options with the direct-insert shuffler declared, where there is a shoe."""
    return replace(options, direct_insert_shuffler=options.game != GameId.DJ_WILD)


class EventTap:
    """Every journal event the appliance publishes, by sequence number, over all its lives."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.seqs: set[int] = set()
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        async with asyncio.timeout(GUARD_S):
            await self._subscribed.wait()

    async def _run(self) -> None:
        async with aiomqtt.Client("127.0.0.1", self.port, identifier="kill9-tap") as client:
            await client.subscribe("#", qos=1)
            self._subscribed.set()
            async for message in client.messages:
                if not str(message.topic).endswith("/events"):
                    continue
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    doc = json.loads(bytes(message.payload))  # type: ignore[arg-type]
                    self.seqs.add(int(doc["seq"]))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                await self._task


async def run_once(seed: int, kills: int, game: str = "down-under", workdir: Path | None = None) -> Result:
    """One full shoe with ``kills`` kill -9s at seeded random moments; the judged result."""
    began = time.monotonic()
    rng = random.Random(seed)
    result = Result(seed=seed, game=game)
    with contextlib.ExitStack() as stack:
        tmp = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        port = stack.enter_context(broker(tmp))
        cfg = load_table_config(table_file(game))
        fast = [replace(d, sim={**d.sim, "cycle_s": 0.2}) for d in cfg.devices]
        blackjack = cfg.options.game != GameId.DJ_WILD
        sim = SimTable(fast, cfg.options.spec, seed=seed, decks=cfg.options.decks, direct_insert=blackjack)
        await sim.start()
        journal = tmp / "table.db"
        _opened_journal(game, journal)
        app = Appliance(concrete_config(game, sim, tmp / "table.toml"), journal, f"mqtt://127.0.0.1:{port}")
        tap = EventTap(port)
        dealer = Dealer(sim, journal, rng)
        try:
            await tap.start()
            for box in BOXES:
                dealer.models["keypad"].place_bet(box, 1)
                dealer.models["keypad"].place_bet(box, 2)
            await app.start()
            await _play_shoe(app, dealer, rng, kills, result)
            assert await app.stop() == 0, "tablectl run did not stop cleanly"
            await app.wait(lambda: _published_all(tap, journal), "every event to reach the broker")
        finally:
            if app.proc is not None and app.proc.returncode is None:
                app.proc.kill()
                await app.proc.wait()
            await tap.stop()
            await sim.stop()
        _judge(journal, dealer, tap, result)
    result.seconds = round(time.monotonic() - began, 2)
    return result


async def run_first_minute(
    seed: int, game: str = "down-under", rounds: int = 3, workdir: Path | None = None
) -> Result:
    """The first minute of a gaming day, on a fresh journal: kill -9 while the first batch is
    shuffling (the shuffle finishes while the appliance is down), then again when the table asks
    for the first burn (the dealer draws it while the appliance is down); then ``rounds`` rounds.
    Judged as ``run_once`` is: a restart must route both as if seen live."""
    began = time.monotonic()
    rng = random.Random(seed)
    result = Result(seed=seed, game=game)
    with contextlib.ExitStack() as stack:
        tmp = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        port = stack.enter_context(broker(tmp))
        cfg = load_table_config(table_file(game))
        # A cycle long enough for the kill to land in it, short enough for the test.
        fast = [replace(d, sim={**d.sim, "cycle_s": 1.0}) for d in cfg.devices]
        # As the journal opened by _opened_journal declares: a direct-insert shuffler (what is
        # killed here is the first shuffle and the first burn, not the cut).
        blackjack = cfg.options.game != GameId.DJ_WILD
        sim = SimTable(fast, cfg.options.spec, seed=seed, decks=cfg.options.decks, direct_insert=blackjack)
        await sim.start()
        journal = tmp / "table.db"
        _opened_journal(game, journal)
        app = Appliance(concrete_config(game, sim, tmp / "table.toml"), journal, f"mqtt://127.0.0.1:{port}")
        tap = EventTap(port)
        dealer = Dealer(sim, journal, rng)
        shuffler = dealer.models["shuffler"]
        try:
            await tap.start()
            for box in BOXES:
                dealer.models["keypad"].place_bet(box, 1)
                dealer.models["keypad"].place_bet(box, 2)
            await app.start(wait_ready=False)  # the first shuffle may start before every device answered

            def shuffling() -> bool:
                return any(b.shuffler.value == "shuffling" for b in dealer.journalled().batches.values())

            await app.wait(shuffling, "the first shuffle to be journalled")
            await app.kill9()
            result.kills_by_kind["first-shuffle"] = 1
            batches = dealer.journalled().batches.values()
            first = next(b.back for b in batches if b.shuffler.value == "shuffling")
            # The first shuffle finishes while the appliance is down (the simulated cycle is 1 s).
            await _until_down(lambda: any(s.state.value == "ready" for s in shuffler.slots.values()),
                              shuffler.update, "the shuffler to finish the first shuffle")  # fmt: skip
            await app.start()
            await app.wait(lambda: dealer.journalled().batches[first].shuffler.value != "shuffling",
                           "the shuffle finished while down to be journalled")  # fmt: skip
            result.kills = 1
            if "shoe" in dealer.models:  # DJ Wild is dealt from the hand: no shoe, no burn
                await _first_burn_and_rounds(app, dealer, rounds, result)
            await app.wait(dealer.caught_up, "the appliance to journal what the dealer did")
            result.rounds = dealer.journalled().round_no
            assert await app.stop() == 0, "tablectl run did not stop cleanly"
            await app.wait(lambda: _published_all(tap, journal), "every event to reach the broker")
        finally:
            if app.proc is not None and app.proc.returncode is None:
                app.proc.kill()
                await app.proc.wait()
            await tap.stop()
            await sim.stop()
        _judge(journal, dealer, tap, result)
    result.seconds = round(time.monotonic() - began, 2)
    return result


async def _first_burn_and_rounds(app: Appliance, dealer: Dealer, rounds: int, result: Result) -> None:
    """Play up to the first burn, kill -9 there and draw it while down, restart, play ``rounds``."""
    while True:  # up to the first burn: the table asks for a card before any round
        await app.wait(dealer.caught_up, "the appliance to journal what the dealer did")
        t = dealer.table()
        kind = dealer.next_action(t, appliance_up=True)
        if kind == "draw":
            break
        if kind is None:
            await app.wait(lambda t=t: _moved(dealer, t), "the table to ask for the first burn")
            continue
        dealer.act(kind, t)
    await app.kill9()
    result.kills_by_kind["first-burn"] = 1
    dealer.act("draw", dealer.table())  # the burn, drawn while the appliance is down
    await app.start()
    result.kills += 1
    while dealer.journalled().round_no < rounds or dealer.table().in_round:
        await app.wait(dealer.caught_up, "the appliance to journal what the dealer did")
        t = dealer.table()
        kind = dealer.next_action(t, appliance_up=True)
        if kind is None:
            await app.wait(lambda t=t: _moved(dealer, t), "the table to move on")
            continue
        dealer.act(kind, t)


async def _until_down(cond: Callable[[], bool], tick: Callable[[], object], what: str) -> None:
    """Until ``cond()`` while the appliance is down: a simulator's own state, checked every 50 ms
    after ``tick`` (its model moves on with time when it is looked at)."""
    deadline = time.monotonic() + GUARD_S
    while not (tick(), cond())[1]:
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {GUARD_S}s for {what}")
        await asyncio.sleep(0.05)  # a simulator's state logs nothing: looked at again, not a sync


def _published_all(tap: EventTap, journal: Path) -> bool:
    with Journal.open(journal, create=False, readonly=True) as j:
        return max(tap.seqs, default=0) >= j.last_seq


async def _play_shoe(app: Appliance, dealer: Dealer, rng: random.Random, kills: int, result: Result) -> None:
    # Kills at seeded action numbers: a shoe is a few hundred actions; spread them over the first 200.
    at = sorted(rng.sample(range(5, 200), kills)) if kills else []
    actions = 0
    while True:
        await app.wait(dealer.caught_up, "the appliance to journal what the dealer did")
        t = dealer.table()
        if dealer.shoes_ended() and not t.in_round:
            break
        kind = dealer.next_action(t, appliance_up=True)
        if kind is None:
            await app.wait(lambda t=t: _moved(dealer, t), "the table to move on")
            continue
        actions += 1
        if at and actions >= at[0]:
            at.pop(0)
            how = rng.choice(KILL_KINDS)
            result.kills += 1
            result.kills_by_kind[how] = result.kills_by_kind.get(how, 0) + 1
            await _kill(app, dealer, rng, how, kind, t)
        else:
            dealer.act(kind, t)
    result.rounds = dealer.journalled().round_no


def _moved(dealer: Dealer, before: Table) -> bool:
    t = dealer.table()
    return t is not before or dealer.next_action(t, appliance_up=True) is not None


async def _kill(app: Appliance, dealer: Dealer, rng: random.Random, how: str, kind: str, t: Table) -> None:
    if how == "mid-draw" and kind == "draw":
        dealer.act(kind, t)
        await app.kill9()
    elif how in ("mid-draw", "mid-commit"):
        dealer.act(kind, t)
        await asyncio.sleep(rng.uniform(0.0, 0.03))  # the random moment itself, not a wait
        await app.kill9()
    else:
        await app.kill9()
        # The devices go on without the appliance: up to 3 cards or keys while it is down.
        for _ in range(rng.randint(1, 3)):
            shadow = dealer.table()
            nxt = dealer.next_action(shadow, appliance_up=False)
            if nxt is None:
                break
            dealer.act(nxt, shadow)
    await app.start()


def _judge(journal: Path, dealer: Dealer, tap: EventTap, result: Result) -> None:
    check = verify_journal(journal)
    result.journal_verifies = check.ok
    seen: Counter[str] = Counter()
    with Journal.open(journal, create=False, readonly=True) as j:
        records = list(j.records())
    for r in records:
        p = r.payload
        if r.kind in CARD_KINDS and not p.get("held"):
            seen[f"{p['card']}/{p['back']}"] += 1
        elif r.kind == "cards_unaccounted":
            result.unaccounted_cards += int(p["count"])
        elif r.kind == "alarm_raised":
            alarms = result.halting_alarms if p["halts"] else result.other_alarms
            alarms.append(f"{p['section']}: {p['message']}")
    drawn = Counter(dealer.drawn)
    result.cards_drawn = sum(drawn.values())
    result.lost_cards = sum((drawn - seen).values())
    result.phantom_cards = sum((seen - drawn).values())
    result.journal_records = len(records)
    result.mqtt_events = len(tap.seqs)
    result.mqtt_contiguous = tap.seqs == set(range(1, len(records) + 1))
