"""A virtual dealer and players who play rounds only through the simulated devices.

They act on the device models as people at the table would (chips on the bet sensors, Start Game
and the decision keys on the keypad, cards drawn from the shoe, the hole card into the reader,
the stub into the stub counter, a deck carried back to its shuffler slot); the controller hears of
it only through the wire. What the dealer reads from the controller is what its dealer display
shows (whose turn it is, what is asked, whether dealing is stopped); the players' choices come
from controller.strategy, the dealer's own knowledge of the hole card from the card it drew.

Time is the simulators' clock: on a VirtualClock the dealer moves it on by a few seconds per
action, so shuffle cycles finish and decks age, and a gaming day runs in seconds. After each
action it asks the supervisor to poll the device it touched (``Supervisor.settle``) instead of
sleeping.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.cards import Card
from controller.games import GameId
from controller.rules.requests import (
    DEALER,
    CardFor,
    Decision,
    DoubleAttackOffer,
    EvenMoneyOffer,
    InsuranceOffer,
    ReaderUse,
    SecondChanceOffer,
    SurrenderOffer,
)
from controller.strategy import choose, takes_second_chance
from controller.supervisor.mapping import MAIN_SPOT, SIDE_SPOT
from controller.supervisor.supervisor import Supervisor
from controller.table.core import DECK_LIFETIME, EXPIRY_WARNING, Table
from devices.events import Key, Slot
from devices.profiles import DeviceKind
from sim.clock import VirtualClock
from sim.models import DealtCard, KeypadModel, ReaderModel, ShoeModel, ShufflerModel
from sim.table import SimTable

SECONDS_PER_ACTION = 1.0  # virtual time a brisk dealer takes per action
WAIT_STEP_S = 5.0  # how far the clock moves while the dealer waits for the shuffler
MAX_WAIT_S = 3600.0
# The controller must see a shuffle cycle (30 s on the reference shuffler) while it runs: on a
# virtual clock nothing polls by itself, so the dealer has the shuffler looked at this often.
SHUFFLER_POLL_S = 5.0  # the dealer gives up (DealerStuck) rather than wait forever


class DealerStuck(Exception):
    """The table did not do what the dealer expected; the message says what and where."""


@dataclass
class DealerStats:
    rounds: int = 0
    cards_drawn: int = 0
    keys_pressed: int = 0
    shoes: int = 0
    stub_counts: int = 0
    voided: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class VirtualDealer:
    def __init__(
        self,
        sim: SimTable,
        supervisor: Supervisor,
        *,
        boxes: int = 6,
        rng: random.Random | None = None,
        pace: Callable[[], Any] | None = None,
        dealer: str = "dealer-1",
        floor: str = "floor-1",
    ) -> None:
        self.sim = sim
        self.sup = supervisor
        self.boxes = boxes
        self.rng = rng or random.Random()
        self.pace = pace  # an awaitable factory between actions (the demo's real-time pacing)
        self.dealer, self.floor = dealer, floor
        self.stats = DealerStats()
        self.hole: Card | None = None
        self._names = {info.config.kind: name for name, info in sim.devices.items()}
        self._wild_hand: list[DealtCard] = []  # DJ Wild: the deck in the dealer's hand
        self._wild_slot: Slot | None = None
        self._pending_renewal: set[str] = set()
        self._shuffler_seen = sim.clock.now()
        self._shoe_seen = -1

    # ------------------------------------------------------------------ the devices, physically
    def _model(self, kind: DeviceKind) -> Any:
        name = self._names.get(kind)
        return None if name is None else self.sim.devices[name].model

    @property
    def shoe(self) -> ShoeModel:
        m: ShoeModel = self._model(DeviceKind.SHOE)
        return m

    @property
    def shoe_seq(self) -> int:
        """Which batch is in the dealer's shoe (or hand): changes with every new shoe."""
        if DeviceKind.SHOE in self._names:
            return self.shoe.batch_seq
        return self.stats.rounds  # dealt from the hand: a fresh deck every round

    @property
    def keypad(self) -> KeypadModel:
        m: KeypadModel = self._model(DeviceKind.KEYPAD)
        return m

    @property
    def shuffler(self) -> ShufflerModel:
        m: ShufflerModel = self._model(DeviceKind.SHUFFLER)
        return m

    @property
    def reader(self) -> ReaderModel:
        m: ReaderModel = self._model(DeviceKind.READER)
        return m

    @property
    def table(self) -> Table:
        return self.sup.table

    @property
    def game(self) -> GameId:
        return self.table.options.game

    async def _act(self, *kinds: DeviceKind) -> None:
        """After an action: time passes, the controller polls the devices touched (and, every few
        seconds of table time, the shuffler, whose cycle runs by itself)."""
        clock = self.sim.clock
        if isinstance(clock, VirtualClock):
            clock.advance(SECONDS_PER_ACTION)
        if clock.now() - self._shuffler_seen >= SHUFFLER_POLL_S and self._shuffler_running():
            kinds = (*kinds, DeviceKind.SHUFFLER)
        if DeviceKind.SHUFFLER in kinds:
            self._shuffler_seen = clock.now()
        if self.pace is not None:
            await self.pace()
        await self.sup.settle(*(self._names[k] for k in kinds if k in self._names))

    def _shuffler_running(self) -> bool:
        """The dealer hears the shuffler working (or sees it stopped with a fault light)."""
        sh = self.shuffler
        return sh is not None and sh.state.value in ("shuffling", "jammed", "fault")

    async def press(self, key: Key) -> None:
        self.keypad.press(key)
        self.stats.keys_pressed += 1
        await self._act(DeviceKind.KEYPAD)

    async def draw(self) -> Card:
        dc = self.shoe.draw()
        self.stats.cards_drawn += 1
        await self._act(DeviceKind.SHOE)
        return dc.card

    async def until(self, predicate: Callable[[], bool], what: str, max_s: float = MAX_WAIT_S) -> None:
        """Let time pass (the shuffler shuffles) until ``predicate`` holds."""
        waited = 0.0
        await self.sup.settle()
        while not predicate():
            if waited >= max_s:
                raise DealerStuck(f"waited {max_s:g}s for {what}; table: {self._where()}")
            clock = self.sim.clock
            if isinstance(clock, VirtualClock):
                clock.advance(WAIT_STEP_S)
            elif self.pace is None:
                await asyncio.sleep(0.05)
            if self.pace is not None:
                await self.pace()
            waited += WAIT_STEP_S
            await self.sup.settle()

    def _where(self) -> str:
        snap = self.sup.snapshot()
        keys = ("round", "in_round", "batch_in_shoe", "cards_in_shoe", "batches", "halted", "devices")
        return str({k: snap.get(k) for k in keys})

    # ------------------------------------------------------------------ the floor
    async def floor_command(self, command: str, **args: Any) -> dict[str, Any]:
        result = await self.sup.command(command, args, self.floor, "floor")
        if not result["ok"]:
            raise DealerStuck(f"{command}: {result['error']}")
        return result

    async def open_table(self) -> None:
        """673a.4: both batches' decks inspected and verified; the dealer comes in."""
        for back in self.table.batches:
            await self.floor_command("inspection_verified", back=back, dealer=self.dealer)
        await self.floor_command("new_dealer", name=self.dealer)
        await self.until(lambda: self.table.shoe_back is not None, "the first batch in the shoe")

    # ------------------------------------------------------------------ rounds
    async def play(self, rounds: int, on_round: Callable[[int], None] | None = None) -> DealerStats:
        for _ in range(rounds):
            await self.play_round()
            if on_round is not None:
                on_round(self.stats.rounds)
        return self.stats

    async def play_round(self) -> None:
        t = self.table
        if t.halted:
            raise DealerStuck(f"dealing is stopped: {t.halted[0].section}: {t.halted[0].message}")
        if t.shoe_back is None:
            self._renew_expiring()
            await self.until(lambda: t.shoe_back is not None, "the next batch in the shoe")
        if self.shoe_seq != self._shoe_seen:
            # A new shoe: the used batch went back into its slot with the eject; the controller
            # sees it there before the first round (673a.3(b)(5)).
            self._shoe_seen = self.shoe_seq
            await self._act(DeviceKind.SHUFFLER)
            self.stats.shoes += 1
        if t.blackjack:
            await self._blackjack_round()
        else:
            await self._wild_round()
        self.stats.rounds += 1

    def _renew_expiring(self) -> None:
        """673a.3(c): decks opened nearly 24 hours ago are changed between shoes (by the floor)."""
        t = self.table
        for batch in t.batches.values():
            if batch.opened_at is None or batch.back == t.shoe_back:
                continue
            if t.now - batch.opened_at > DECK_LIFETIME - EXPIRY_WARNING:
                self._pending_renewal.add(batch.back)

    async def _renew(self) -> None:
        for back in sorted(self._pending_renewal):
            slot = next((s for s, b in self.shuffler.slots.items() if b.back == back), None)
            if slot is None:
                continue
            s = self.shuffler.slots[slot]
            if s.state not in (s.state.IDLE, s.state.READY):
                continue
            s.cards = [DealtCard(c) for c in self.sim.game.batch(s.decks, back)]  # new decks
            s.state = s.state.IDLE
            await self.floor_command("inspection_verified", back=back, dealer=self.dealer)
            self._pending_renewal.discard(back)

    # ------------------------------------------------------------------ blackjack (673a, 665a, 685a)
    def _place_bets(self) -> None:
        opts = self.table.options
        side = opts.bust_it or opts.match_the_dealer or opts.progressive
        for box in range(1, self.boxes + 1):
            self.keypad.place_bet(box, MAIN_SPOT)
            if side:
                self.keypad.place_bet(box, SIDE_SPOT)

    def _clear_bets(self) -> None:
        for box in range(1, self.boxes + 1):
            self.keypad.remove_bet(box, MAIN_SPOT)
            self.keypad.remove_bet(box, SIDE_SPOT)

    async def _blackjack_round(self) -> None:
        t = self.table
        if self._pending_renewal:
            await self._renew()
        while t.burns_due:  # 673a.7(c): a burn card for a new shoe or a new dealer
            await self.draw()
        before = t.round_no
        self._place_bets()
        await self.press(Key.START_GAME)
        if t.round_no == before:
            raise DealerStuck(f"Start Game did not open a round; table: {self._where()}")
        self.hole = None
        steps = 0
        while t.round is not None and t.round_no == before + 1:
            steps += 1
            if steps > 200:
                raise DealerStuck(f"round {t.round_no} does not end; table: {self._where()}")
            await self._answer()
        self._clear_bets()

    async def _answer(self) -> None:
        t = self.table
        rnd = t.round
        assert rnd is not None
        req, state = rnd.request, rnd.state
        if t.halted:
            raise DealerStuck(f"dealing stopped mid-round: {t.halted[0].section}: {t.halted[0].message}")
        if isinstance(req, CardFor):
            card = await self.draw()
            if req.seat == DEALER and not req.face_up:
                self.hole = card
        elif isinstance(req, Decision):
            box = next(b for b in state.boxes if b.seat == req.seat)
            action = choose(box.hands[req.hand], state.dealer[0], req.legal)
            await self.press(Key(action.value))
        elif isinstance(req, ReaderUse):
            hole = self.hole if self.hole is not None else state.dealer[1]
            self.reader.insert(hole)
            await self._act(DeviceKind.READER)
        elif isinstance(req, InsuranceOffer | DoubleAttackOffer):
            await self.press(Key.DOUBLE)  # take the offered wager at its maximum (mapping.py)
        elif isinstance(req, SecondChanceOffer):
            hand = next(b for b in state.boxes if b.seat == req.seat).hands[req.hand]
            await self.press(Key.SECOND_CHANCE if takes_second_chance(hand) else Key.NEXT)
        elif isinstance(req, SurrenderOffer | EvenMoneyOffer):
            await self.press(Key.NEXT)
        else:
            raise DealerStuck(f"the dealer does not know how to answer {type(req).__name__}")

    # ------------------------------------------------------------------ DJ Wild dealt from the hand (687a.9)
    async def _take_deck(self) -> None:
        """The deck the controller ejected is in the dealer's hand (there is no shoe)."""
        back = self.table.shoe_back
        slot = next(s for s, b in self.shuffler.slots.items() if b.back == back)
        self._wild_slot = slot
        self._wild_hand = [DealtCard(c) for c in self.sim.game.batch(self.shuffler.slots[slot].decks, back)]
        self.rng.shuffle(self._wild_hand)  # the shuffled order the shuffler produced

    async def _wild_round(self) -> None:
        t = self.table
        if self._wild_slot is None or self.shuffler.slots[self._wild_slot].back != t.shoe_back:
            await self._take_deck()
        before = t.round_no
        self._place_bets()
        await self.press(Key.START_GAME)
        if t.round_no == before or t.wild is None:
            raise DealerStuck(f"Start Game did not open a round; table: {self._where()}")
        boxes = len(t.wild.boxes)
        dealt = 5 * boxes + 5 + 1  # 687a.9(c)-(e)
        stub = len(self._wild_hand) - dealt
        if self.stats.rounds % 5 == 4 or not self._counted_53():
            await self.count_stub(stub)
        else:
            await self.press(Key.NEXT)  # the hands are dealt
            await self.press(Key.NEXT)  # the stub goes to the discard rack uncounted
        if t.in_round and t.halted:
            return  # a wrong count: the floor decides (687a.9(h)); the caller handles it
        self._clear_bets()
        await self._return_deck()

    def _counted_53(self) -> bool:
        back = self.table.shoe_back
        return bool(back and self.table.batches[back].counted_53)

    async def count_stub(self, cards: int) -> None:
        name = self._names[DeviceKind.STUB_COUNTER]
        fs = self.sim.devices[name].frame_sim
        assert fs is not None
        t = self.table
        await fs.count(cards)
        self.stats.stub_counts += 1
        # The count comes over the line on its own (no poll to ask for): wait for its outcome.
        await self.sup.wait_for(lambda: (t.wild is None or bool(t.halted)) and self.sup.idle())

    async def _return_deck(self) -> None:
        """The used deck goes back into its (now empty) shuffler slot to be reshuffled."""
        slot = self._wild_slot
        assert slot is not None
        await self.until(lambda: self.shuffler.slots[slot].state.value == "empty", "the deck's slot to empty")
        self.shuffler.load(slot, [dc.card for dc in self._wild_hand])
        self._wild_slot = None
        await self._act(DeviceKind.SHUFFLER)
