"""What people at the table do to the simulated devices, and the faults a device can be told to
commit: one set of verbs shared by the virtual dealer (sim/wire_dealer.py) and the control port
(sim/control.py), so a test driving a table by hand acts exactly as the dealer does.

Every action is physical: chips on a sensor, a key pressed, a card drawn from the shoe, a hole card
into the reader, a deck in the dealer's hand (DJ Wild, 687a.9), its stub into the counter, cards
into a shuffler slot. The controller hears of it only over the wire, when it next polls the device
or when the device reports (the stub counter's frame).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.cards import Card
from devices.events import Key, ShufflerState, Slot
from devices.profiles import DeviceKind
from sim.models import DealtCard, SimRefused
from sim.table import SimDeviceInfo, SimTable


class ActionRefused(Exception):
    """The action is not possible at the table as it is (one line: what and why)."""


@dataclass
class WildDeck:
    """DJ Wild's deck in the dealer's hand (687a.9: dealt from the hand, no shoe)."""

    slot: Slot
    back: str
    cards: list[DealtCard]
    dealt: int = 0

    @property
    def stub(self) -> int:
        return len(self.cards) - self.dealt


@dataclass
class Stack:
    """A shuffled stack out of the shuffler, in the dealer's hands to be cut (673a.5(b)-(d))."""

    slot: Slot
    back: str
    cards: list[DealtCard]


async def _sees(
    condition: Callable[[], bool], told: list[Callable[[], None]], within_s: float | None
) -> bool:
    """Whether ``condition`` holds, waiting up to ``within_s`` (None: until it does, for a caller
    that bounds the wait on what else it watches); re-checked whenever a device calls the hooks in
    ``told`` (what a person at the table would see happen)."""
    if condition():
        return True
    changed = asyncio.Event()
    told.append(changed.set)
    try:
        async with asyncio.timeout(within_s):
            while not condition():
                changed.clear()
                await changed.wait()
    except TimeoutError:
        return False
    finally:
        told.remove(changed.set)
    return True


class TableHands:
    def __init__(self, sim: SimTable) -> None:
        self.sim = sim
        self.wild_deck: WildDeck | None = None
        self.stack: Stack | None = None

    # ------------------------------------------------------------------ devices
    def info(self, kind: DeviceKind) -> SimDeviceInfo:
        info = self.sim.by_kind(kind)
        if info is None:
            raise ActionRefused(f"the table has no {kind.value}")
        return info

    def model(self, kind: DeviceKind) -> Any:
        return self.info(kind).model

    def has(self, kind: DeviceKind) -> bool:
        return self.sim.by_kind(kind) is not None

    def device(self, name: str) -> SimDeviceInfo:
        info = self.sim.devices.get(name)
        if info is None:
            raise ActionRefused(f"no device {name!r} (devices: {', '.join(self.sim.devices)})")
        return info

    # ------------------------------------------------------------------ the keypad
    def chips(self, box: int, spot: int, on: bool) -> None:
        keypad = self.model(DeviceKind.KEYPAD)
        try:
            (keypad.place_bet if on else keypad.remove_bet)(box, spot)
        except SimRefused as e:
            raise ActionRefused(str(e)) from None

    def place_bets(self, boxes: int, *, side: bool) -> None:
        """Chips on spot 1 of each box (and spot 2, the optional wager, when ``side``)."""
        for box in range(1, boxes + 1):
            self.chips(box, 1, True)
            if side:
                self.chips(box, 2, True)

    def clear_bets(self, boxes: int) -> None:
        keypad = self.model(DeviceKind.KEYPAD)
        for box in range(1, boxes + 1):
            for spot in range(1, keypad.spots + 1):
                keypad.remove_bet(box, spot)

    def press(self, key: Key, amount: int = 0) -> None:
        """A key; ``amount``: the chips keyed with it (a double for less), 0 for none."""
        try:
            self.model(DeviceKind.KEYPAD).press(key, amount)
        except SimRefused as e:
            raise ActionRefused(str(e)) from None

    # ------------------------------------------------------------------ shoe and reader
    def draw(self) -> Card:
        try:
            dealt: DealtCard = self.model(DeviceKind.SHOE).draw()
        except SimRefused as e:
            raise ActionRefused(str(e)) from None
        return dealt.card

    async def shoe_holds(self, back: str, within_s: float | None) -> bool:
        """Whether the batch ``back`` is in the shoe, waiting up to ``within_s`` for the shuffler's
        eject to put it there. The table shows a batch in play as soon as it has journalled the
        eject, a moment before the shuffler carries it out; a dealer looks at the shoe before
        taking bets."""
        shoe = self.model(DeviceKind.SHOE)
        return await _sees(lambda: shoe.batch_back == back and shoe.remaining > 0, shoe.on_load, within_s)

    async def stack_out(self, within_s: float | None) -> bool:
        """Whether the shuffler has put shuffled cards out (a stack to cut, DJ Wild's deck for the
        hand), waiting up to ``within_s`` for its eject. The table asks for the cut (or shows the
        deck in play) as soon as it has journalled the eject, a moment before the shuffler carries
        it out, and nothing the table publishes changes when it does: the dealer watches the
        shuffler, not the table, for the cards to come out."""
        return await _sees(lambda: self.sim.tray is not None, self.sim.on_tray, within_s)

    def hole_into_reader(self, hole: Card) -> None:
        self.model(DeviceKind.READER).insert(hole)

    # ------------------------------------------------------------------ the cut (673a.5(b)-(e))
    def take_stack(self) -> Stack:
        """The shuffled stack the shuffler put out, into the dealer's hands to be cut."""
        tray = self.sim.tray
        if tray is None:
            raise ActionRefused("the shuffler has put out no stack")
        self.sim.tray = None
        slot, back, cards = tray
        self.stack = Stack(slot, back, cards)
        return self.stack

    def cut_stack(self, at: int) -> None:
        """673a.5(d): the cover card ``at`` cards from the top; the cards above it go to the bottom."""
        stack = self._stack()
        if not 1 <= at < len(stack.cards):
            raise ActionRefused(f"a cut is inside the stack of {len(stack.cards)} cards")
        stack.cards = stack.cards[at:] + stack.cards[:at]

    def stack_into_shoe(self, cover_from_bottom: int) -> None:
        """The cut stack into the shoe, the cover card ``cover_from_bottom`` cards from the bottom."""
        stack = self._stack()
        if not 0 <= cover_from_bottom <= len(stack.cards):
            raise ActionRefused(f"the cover card goes inside the stack of {len(stack.cards)} cards")
        self.sim.load_shoe(stack.cards, stack.back, cover_from_bottom)
        self.stack = None

    def _stack(self) -> Stack:
        if self.stack is None:
            raise ActionRefused("no stack in the dealer's hands")
        return self.stack

    # ------------------------------------------------------------------ DJ Wild: dealt from the hand
    def take_deck(self) -> WildDeck:
        """The deck the shuffler put out into the dealer's hand; a deck still in the hand goes
        back into its slot first."""
        tray = self.sim.tray
        if tray is None:
            raise ActionRefused("the shuffler has put out no deck")
        if self.wild_deck is not None:
            self.deck_to_shuffler()
        slot, back, cards = tray
        self.sim.tray = None
        self.wild_deck = WildDeck(slot, back, cards)
        return self.wild_deck

    def deal_from_hand(self, cards: int) -> None:
        deck = self.wild_deck
        if deck is None:
            raise ActionRefused("no deck in the dealer's hand")
        if cards > deck.stub:
            raise ActionRefused(f"the hand holds {deck.stub} cards, not {cards}")
        deck.dealt += cards

    async def stub_into_counter(self, cards: int | None = None) -> None:
        """The stub (the rest of the deck in the hand, or ``cards``) into the stub counter."""
        if cards is None:
            if self.wild_deck is None:
                raise ActionRefused("no deck in the dealer's hand")
            cards = self.wild_deck.stub
        fs = self.info(DeviceKind.STUB_COUNTER).frame_sim
        assert fs is not None
        await fs.count(cards)

    def deck_to_shuffler(self) -> None:
        """The deck in the hand back into its (empty) shuffler slot, to be reshuffled."""
        deck = self.wild_deck
        if deck is None:
            raise ActionRefused("no deck in the dealer's hand")
        self.decks_to_shuffler(deck.slot, [dc.card for dc in deck.cards])
        self.wild_deck = None

    # ------------------------------------------------------------------ the shuffler
    def renew_decks(self, back: str) -> bool:
        """The floor swaps the decks of ``back`` resting in a shuffler slot for new ones; False
        when that batch is not resting there (in play, shuffling or out of the shuffler)."""
        shuffler = self.model(DeviceKind.SHUFFLER)
        for s in shuffler.slots.values():
            if s.back == back and s.cards and s.state in (ShufflerState.IDLE, ShufflerState.READY):
                s.cards = [DealtCard(c) for c in self.sim.game.batch(s.decks, back)]
                s.state = ShufflerState.IDLE
                return True
        return False

    def decks_to_shuffler(self, slot: Slot, cards: list[Card] | None = None) -> None:
        """Cards into an empty shuffler slot: ``cards``, or new decks of the slot's back colour."""
        shuffler = self.model(DeviceKind.SHUFFLER)
        s = shuffler.slots[slot]
        if cards is None:
            cards = self.sim.game.batch(s.decks, s.back)
        try:
            shuffler.load(slot, cards)
        except SimRefused as e:
            raise ActionRefused(str(e)) from None


# -- faults ------------------------------------------------------------------------------------
FAULTS = (
    "jam",
    "incomplete_cycle",
    "shuffler_fault",
    "reader_failure",
    "sensor_stuck",
    "stub_sensor_fault",
    "counter_glitch",
    "power_off",
    "power_on",
    "condition",
    "clear",
)


def inject(hands: TableHands, fault: str, args: dict[str, Any]) -> None:
    """One fault of a device's model (sim/models.py) or its wire (sim/faults.py); ``clear`` mends
    every fault of the named ``device`` (or of every device)."""
    sim = hands.sim
    if fault == "jam":  # the shuffle cycle jams after ``at_card`` cards (default: half way)
        shuffler = hands.model(DeviceKind.SHUFFLER)
        half = max(1, max(len(s.cards) for s in shuffler.slots.values()) // 2)
        shuffler.faults.jam_at_card = _int(args, "at_card", 1, 10_000, default=half)
    elif fault == "incomplete_cycle":  # the cycle never finishes
        hands.model(DeviceKind.SHUFFLER).faults.stall = True
    elif fault == "shuffler_fault":
        hands.model(DeviceKind.SHUFFLER).faults.device_fault = _int(args, "code", 1, 255, default=13)
    elif fault == "reader_failure":
        hands.model(DeviceKind.READER).faults.dead = True
    elif fault == "sensor_stuck":  # a bet sensor reads chips that are not there
        keypad = hands.model(DeviceKind.KEYPAD)
        keypad.faults.stuck.add((_int(args, "box", 1, keypad.boxes), _int(args, "spot", 1, keypad.spots)))
    elif fault == "stub_sensor_fault":
        hands.model(DeviceKind.STUB_COUNTER).faults.sensor_fault = True
    elif fault == "counter_glitch":  # the stub counter counts ``by`` cards too many (or too few)
        hands.model(DeviceKind.STUB_COUNTER).faults.miscount = _int(args, "by", -53, 53, default=-1)
    elif fault == "condition":  # a condition bit of the profile (a door open): {"name", "on"}
        _condition(hands.device(_str(args, "device")), args)
    elif fault in ("power_off", "power_on"):
        _power(hands.device(_str(args, "device")), on=fault == "power_on")
    elif fault == "clear":
        names = [_str(args, "device")] if "device" in args else list(sim.devices)
        for name in names:
            _mend(hands.device(name))
    else:
        raise ActionRefused(f"no fault {fault!r} (faults: {', '.join(FAULTS)})")


def _condition(info: SimDeviceInfo, args: dict[str, Any]) -> None:
    """One of the device's named conditions (its profile's ``[conditions]``) set or cleared."""
    names = sorted(info.config.profile.conditions)
    name, on = args.get("name"), args.get("on", True)
    if info.register_sim is None or name not in names:
        raise ActionRefused(f"name: one of the device's conditions ({', '.join(names) or 'none'})")
    if not isinstance(on, bool):
        raise ActionRefused("on: true or false")
    info.register_sim.conditions[name] = on


def _wire(info: SimDeviceInfo) -> Any:
    sim = info.register_sim or info.frame_sim
    assert sim is not None
    return sim.faults


def _power(info: SimDeviceInfo, *, on: bool) -> None:
    """Off: the device answers nothing. On: it answers again, its counters back at zero as after
    a restart (the controller must notice, not trust the old sequence numbers)."""
    _wire(info).silent = not on
    if on:
        m = info.model
        for name in ("draw_seq", "key_seq", "insert_seq", "seq"):
            if hasattr(m, name):
                setattr(m, name, 0)


def _mend(info: SimDeviceInfo) -> None:
    _wire(info).clear()
    if info.register_sim is not None:
        info.register_sim.conditions.clear()
    m = info.model
    kind = info.config.kind
    if kind is DeviceKind.SHUFFLER:
        m.clear_fault()
        m.faults.stall = False
    elif kind is DeviceKind.READER:
        m.faults.dead = m.faults.wrong_light = False
    elif kind is DeviceKind.KEYPAD:
        m.faults.stuck.clear()
    elif kind is DeviceKind.STUB_COUNTER:
        m.faults.sensor_fault = m.faults.unverified = False
        m.faults.miscount = 0


def _int(args: dict[str, Any], key: str, low: int, high: int, *, default: int | None = None) -> int:
    value = args.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ActionRefused(f"{key}: a whole number {low} to {high} is required")
    return value


def _str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise ActionRefused(f"{key}: a device name is required")
    return value
