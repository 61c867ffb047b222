"""Pure behaviour models of the table devices, with fault injection.

No I/O, no sleeps: time comes from a clock object and state is brought up to date whenever it is
looked at, so a VirtualClock can run a shuffle cycle in no time. The servers in this package put
these models on the wire.

Shuffling uses the operating system's CSPRNG (``secrets.SystemRandom``) unless a test passes an
explicit seeded ``random.Random``.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from controller.cards import Card
from controller.clock import Clock
from controller.games import GameSpec
from devices.events import Key, MasqueLight, ShufflerState, Slot


class SimRefused(Exception):
    """The simulated device refuses a command (answered as a Modbus exception)."""


def make_rng(seed: int | None) -> random.Random:
    return random.Random(seed) if seed is not None else secrets.SystemRandom()


@dataclass(frozen=True, slots=True)
class DealtCard:
    card: Card
    face_up: bool = False


# -- shuffler -----------------------------------------------------------------------------------

JAM_CODE: Final = 11
STALL_CODE: Final = 12


@dataclass
class ShufflerFaults:
    jam_at_card: int | None = None  # the cycle jams when this many cards have gone through
    stall: bool = False  # the cycle never finishes
    slow_factor: float = 1.0  # the cycle takes this many times longer
    miscount: int = 0  # added to the count the device reports after a shuffle
    foreign_card: bool = False  # one card of the other batch's back colour gets mixed in
    face_up_card: bool = False  # one card goes in face up
    device_fault: int = 0  # a non-jam fault code (device reports state fault)
    # Test-only: a device that breaks its page's "Commands by state" table (device check's tests).
    ejects_unshuffled: bool = False  # eject_to_shoe on an idle slot is carried out instead of 03
    refuse_ejects: int = 0  # the next n eject_to_shoe are refused (03), as a busy shuffler may


@dataclass
class BatchSlot:
    back: str
    decks: int
    cards: list[DealtCard] = field(default_factory=list)
    state: ShufflerState = ShufflerState.IDLE
    started: float = 0.0


class ShufflerModel:
    def __init__(
        self,
        clock: Clock,
        game: GameSpec,
        decks: int,
        backs: tuple[str, str] = ("red", "blue"),
        *,
        cycle_s: float = 30.0,
        rng: random.Random | None = None,
        counts_cards: bool = True,
    ) -> None:
        self.clock = clock
        self.counts_cards = counts_cards  # False: cards_counted stays 0 (687a.9(f))
        self.game = game
        self.cycle_s = cycle_s
        self.rng = rng or make_rng(None)
        self.faults = ShufflerFaults()
        self.slots = {
            slot: BatchSlot(back, decks, [DealtCard(c) for c in game.batch(decks, back)])
            for slot, back in zip(Slot, backs, strict=True)
        }
        self.cycle = 0
        self.cards_counted = 0
        self.fault_code = 0
        self.out_of_order = False
        self.last_ejected: Slot | None = None
        # The shuffler's batch-return delay (sim/timing.py): cards put back into a slot show there
        # this long after (its own sensing of the cards it was handed); (due, slot, cards).
        self.return_delay_s = 0.0
        self._returning: list[tuple[float, Slot, list[Card]]] = []

    def _duration(self) -> float:
        return self.cycle_s * self.faults.slow_factor

    def update(self) -> None:
        now = self.clock.now()
        while self._returning and self._returning[0][0] <= now:
            _, slot, cards = self._returning.pop(0)
            self.load(slot, cards)
        for s in self.slots.values():
            if s.state is not ShufflerState.SHUFFLING:
                continue
            elapsed = now - s.started
            n = len(s.cards)
            jam = self.faults.jam_at_card
            if jam is not None and n and elapsed >= self._duration() * min(jam, n) / n:
                s.state = ShufflerState.JAMMED
                self.fault_code = JAM_CODE
            elif not self.faults.stall and elapsed >= self._duration():
                self._finish(s)

    def _finish(self, s: BatchSlot) -> None:
        cards = list(s.cards)
        self.rng.shuffle(cards)
        other = next(b.back for b in self.slots.values() if b is not s)
        if self.faults.foreign_card and cards:
            i = self.rng.randrange(len(cards))
            cards[i] = DealtCard(cards[i].card.with_back(other))
        if self.faults.face_up_card and cards:
            i = self.rng.randrange(len(cards))
            cards[i] = DealtCard(cards[i].card, face_up=True)
        s.cards = cards
        s.state = ShufflerState.READY
        self.cycle += 1
        if self.counts_cards:
            self.cards_counted = max(0, len(cards) + self.faults.miscount)

    @property
    def state(self) -> ShufflerState:
        self.update()
        if self.out_of_order:
            return ShufflerState.OUT_OF_ORDER
        if self.faults.device_fault:
            return ShufflerState.FAULT
        states = {s.state for s in self.slots.values()}
        for st in (ShufflerState.JAMMED, ShufflerState.SHUFFLING, ShufflerState.READY):
            if st in states:
                return st
        return ShufflerState.IDLE

    def _usable(self) -> None:
        if self.state in (ShufflerState.OUT_OF_ORDER, ShufflerState.FAULT, ShufflerState.JAMMED):
            raise SimRefused(f"shuffler is {self.state.value}")

    def start(self, slot: Slot) -> None:
        self._usable()
        s = self.slots[slot]
        if s.state not in (ShufflerState.IDLE, ShufflerState.READY) or not s.cards:
            raise SimRefused(f"slot {slot} cannot start from {s.state.value}")
        s.state = ShufflerState.SHUFFLING
        s.started = self.clock.now()

    def abort(self, slot: Slot) -> None:
        self.update()
        s = self.slots[slot]
        if s.state is not ShufflerState.SHUFFLING:
            raise SimRefused(f"slot {slot} is not shuffling")
        s.state = ShufflerState.IDLE

    def eject(self, slot: Slot) -> list[DealtCard]:
        self._usable()
        s = self.slots[slot]
        if self.faults.refuse_ejects > 0:
            self.faults.refuse_ejects -= 1
            raise SimRefused(f"slot {slot} is busy")
        broken = self.faults.ejects_unshuffled and s.state is ShufflerState.IDLE
        if s.state is not ShufflerState.READY and not broken:
            raise SimRefused(f"slot {slot} holds no shuffled batch")
        cards, s.cards = s.cards, []
        s.state = ShufflerState.EMPTY
        self.last_ejected = slot
        return cards

    def put_back(self, slot: Slot, cards: list[Card]) -> None:
        """A used batch back into its empty slot, shown after the batch-return delay."""
        if self.return_delay_s <= 0:
            self.load(slot, cards)
            return
        self._returning.append((self.clock.now() + self.return_delay_s, slot, cards))

    def load(self, slot: Slot, cards: list[Card]) -> None:
        s = self.slots[slot]
        if s.state is not ShufflerState.EMPTY:
            raise SimRefused(f"slot {slot} is not empty")
        s.cards = [DealtCard(c.with_back(s.back)) for c in cards]
        s.state = ShufflerState.IDLE

    def clear_fault(self) -> None:
        self.update()
        for s in self.slots.values():
            if s.state is ShufflerState.JAMMED:
                s.state = ShufflerState.IDLE  # the cards must be reshuffled (673a.13(k))
        self.fault_code = 0
        self.faults.device_fault = 0
        self.faults.jam_at_card = None

    def mark_out_of_order(self) -> None:
        self.out_of_order = True


# -- shoe ---------------------------------------------------------------------------------------


@dataclass
class ShoeFaults:
    ring_lags: bool = False  # test-only: a draw is counted but its card never reaches the ring


class ShoeModel:
    def __init__(self, *, ring: int = 8, cover_fraction: float = 0.25, counter_bits: int = 16) -> None:
        self.faults = ShoeFaults()
        self.counter_mask = (1 << counter_bits) - 1  # the draw and batch counters wrap past it
        self.ring: list[DealtCard | None] = [None] * ring
        self.cover_fraction = cover_fraction
        self.cards: list[DealtCard] = []
        self.draw_seq = 0
        self.batch_seq = 0
        self.batch_size = 0
        self.batch_back: str | None = None
        self.cover_at = 0  # cards remaining when the cover card comes out
        self.cover = False
        self.on_load: list[Callable[[], None]] = []  # told when a batch comes in (the dealer's eyes)

    def load(
        self, cards: list[DealtCard], back: str | None, cover_from_bottom: int | None = None
    ) -> list[DealtCard]:
        """Put a batch in, the cover card ``cover_from_bottom`` cards from the bottom (the dealer
        placed it) or at the shoe's ``cover_fraction``; returns what was left of the old one."""
        old, self.cards = self.cards, list(cards)
        self.batch_seq = (self.batch_seq + 1) & 0xFFFF  # batch_seq stays one word
        self.batch_size = len(cards)
        self.batch_back = back
        self.cover_at = (
            int(len(cards) * self.cover_fraction) if cover_from_bottom is None else cover_from_bottom
        )
        self.cover = False
        for told in self.on_load:
            told()
        return old

    @property
    def remaining(self) -> int:
        return len(self.cards)

    def draw(self) -> DealtCard:
        if not self.cards:
            raise SimRefused("the shoe is empty")
        dc = self.cards.pop(0)
        self.draw_seq = (self.draw_seq + 1) & self.counter_mask
        if not self.faults.ring_lags:
            self.ring[(self.draw_seq - 1) % len(self.ring)] = dc
        if len(self.cards) <= self.cover_at:
            self.cover = True
        return dc


# -- reader -------------------------------------------------------------------------------------

READER_DEAD_CODE: Final = 21
_MASQUE_OF_POINTS: Final = {
    **{p: MasqueLight.SMALL for p in (2, 3, 4, 5)},
    **{p: MasqueLight.MEDIUM for p in (6, 7, 8, 9)},
    **{p: MasqueLight.LARGE for p in (1, 10)},
}


@dataclass
class ReaderFaults:
    dead: bool = False
    wrong_light: bool = False
    reset_keeps_up_card: bool = False  # test-only: reset forgets the result but not the up card


class ReaderModel:
    def __init__(self, mode: str = "peek", *, clock: Clock | None = None, latency_s: float = 0.0) -> None:
        if mode not in ("peek", "masque"):
            raise ValueError(f"reader mode must be peek or masque, not {mode!r}")
        self.mode = mode
        # The reader's own latency (sim/timing.py): a hole card put in is read this long after.
        self.clock, self.latency_s = clock, latency_s
        self._reading: list[tuple[float, Card]] = []
        self.faults = ReaderFaults()
        self.up_rank: str | None = None
        self.insert_seq = 0
        self.result = "none"

    @property
    def health(self) -> int:
        return READER_DEAD_CODE if self.faults.dead else 0

    def set_up(self, rank: str | None) -> None:
        self.up_rank = rank

    def reset(self) -> None:
        if not self.faults.reset_keeps_up_card:
            self.up_rank = None
        self.result = "none"

    def insert(self, hole: Card) -> None:
        if self.clock is not None and self.latency_s > 0:
            self._reading.append((self.clock.now() + self.latency_s, hole))
            return
        self._read(hole)

    def update(self) -> None:
        """The hole cards whose reading is done, read (before the registers are rendered)."""
        now = self.clock.now() if self.clock is not None else 0.0
        while self._reading and self._reading[0][0] <= now:
            self._read(self._reading.pop(0)[1])

    def _read(self, hole: Card) -> None:
        self.insert_seq = (self.insert_seq + 1) & 0xFFFF
        if self.faults.dead:
            self.result = "none"
            return
        if self.mode == "masque":
            light = _MASQUE_OF_POINTS[hole.points]
            if self.faults.wrong_light:
                lights = list(MasqueLight)
                light = lights[(lights.index(light) + 1) % len(lights)]
            self.result = light.value
            return
        up_ten = self.up_rank in ("10", "J", "Q", "K")
        blackjack = (self.up_rank == "A" and hole.is_ten_value) or (up_ten and hole.is_ace)
        self.result = "yes" if blackjack else "no"


# -- keypad -------------------------------------------------------------------------------------


@dataclass
class KeypadFaults:
    stuck: set[tuple[int, int]] = field(default_factory=set)  # (box, spot) stuck on
    any_light_value: bool = False  # test-only: set_light takes any value, not just 0/1


class KeypadModel:
    def __init__(
        self,
        boxes: int,
        spots: int,
        *,
        ring: int = 8,
        latches: bool = False,
        clock: Clock | None = None,
        latency_s: float = 0.0,
    ) -> None:
        self.boxes, self.spots = boxes, spots
        # The keypad's own latency (sim/timing.py): a key pressed shows in its ring this long after.
        self.clock, self.latency_s = clock, latency_s
        self._pressing: list[tuple[float, Key, int]] = []
        self.latches = latches  # freezes its own sensors on Start Game (profile latches_on_start_game)
        self.latched_at: list[int] = []  # key_seq of each press that latched the sensors
        self.faults = KeypadFaults()
        self._bets: set[tuple[int, int]] = set()
        self._frozen: set[tuple[int, int]] | None = None
        self.lights: set[tuple[int, int]] = set()
        self.meter = 0
        self.key_seq = 0
        self.key_ring: list[Key | None] = [None] * ring
        self.key_amount: list[int] = [0] * ring  # chips keyed with each key (0: none)

    def _check(self, box: int, spot: int) -> None:
        if not (1 <= box <= self.boxes and 1 <= spot <= self.spots):
            raise SimRefused(f"no sensor {box}/{spot}")

    @property
    def locked(self) -> bool:
        return self._frozen is not None

    def place_bet(self, box: int, spot: int = 1) -> None:
        self._check(box, spot)
        self._bets.add((box, spot))

    def remove_bet(self, box: int, spot: int = 1) -> None:
        self._check(box, spot)
        self._bets.discard((box, spot))

    def sensed(self) -> set[tuple[int, int]]:
        # 687a.9(b): once Start Game locks the sensors, later chips are not accepted.
        live = self._frozen if self._frozen is not None else self._bets
        return live | self.faults.stuck

    def press(self, key: Key, amount: int = 0) -> None:
        """A key, with the chips the dealer keyed before it (a double for less), 0 for none."""
        if not 0 <= amount <= 0xFFFF:
            raise SimRefused("a keyed amount is 0 to 65535 chips")
        if self.clock is not None and self.latency_s > 0:
            self._pressing.append((self.clock.now() + self.latency_s, key, amount))
            return
        self._pressed(key, amount)

    def update(self) -> None:
        """The keys whose press has reached the registers, in the order pressed."""
        now = self.clock.now() if self.clock is not None else 0.0
        while self._pressing and self._pressing[0][0] <= now:
            _, key, amount = self._pressing.pop(0)
            self._pressed(key, amount)

    def _pressed(self, key: Key, amount: int) -> None:
        self.key_seq = (self.key_seq + 1) & 0xFFFF
        self.key_ring[(self.key_seq - 1) % len(self.key_ring)] = key
        self.key_amount[(self.key_seq - 1) % len(self.key_ring)] = amount
        if self.latches and key is Key.START_GAME and self._frozen is None:
            # The device itself takes no chip after the press: the window is zero by construction.
            self.lock()
            self.latched_at.append(self.key_seq)

    def lock(self) -> None:
        if self._frozen is None:
            self._frozen = set(self._bets)
            self.lights = set(self.sensed())

    def unlock(self) -> None:
        self._frozen = None
        self.lights = set()

    def set_light(self, box: int, spot: int, on: bool) -> None:
        self._check(box, spot)
        (self.lights.add if on else self.lights.discard)((box, spot))

    def show_meter(self, cents: int) -> None:
        self.meter = cents


# -- stub counter -------------------------------------------------------------------------------

STUB_FAULT_CODE: Final = 31


@dataclass
class StubFaults:
    miscount: int = 0
    unverified: bool = False
    sensor_fault: bool = False
    verifies_only_53: bool = False  # test-only: the old misreading of the page (verified = count == 53)


class StubCounterModel:
    """Counts the stub put into it and says whether every card passed its sensor cleanly
    (``verified``). It knows nothing of the round: whether the stub holds 53 minus the cards
    dealt (687a.9(g),(h)) is the table's to judge (docs/devices/stub-counter.md)."""

    def __init__(self, expected: int = 53) -> None:
        self.expected = expected  # the whole deck; a stub never holds more
        self.faults = StubFaults()
        self.seq = 0
        self.count = 0
        self.verified = False

    @property
    def health(self) -> int:
        return STUB_FAULT_CODE if self.faults.sensor_fault else 0

    def count_stub(self, cards: int) -> None:
        self.seq = (self.seq + 1) & 0xFFFF
        self.count = max(0, cards + self.faults.miscount)
        self.verified = not self.faults.unverified  # a miscount is one the device does not notice
        if self.faults.verifies_only_53:
            self.verified = self.verified and self.count == self.expected
