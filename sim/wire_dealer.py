"""The virtual dealer: plays rounds at a table knowing of the controller only what a dealer at the
table sees, and acting only through the simulated devices.

What it sees is the table's public state, the document the controller publishes on MQTT
(``tablectl/<site>/<table>/state``, docs/mqtt.md): its ``asking`` says what the dealer display
shows next (whose turn, which decision or offer, which card is awaited), ``batch_in_shoe`` which
batch is in play. Where that state comes from is a ``TableLink``: the MQTT link of
``tablectl sim --dealer`` (sim/mqtt_link.py), or the demo's link to a controller in the same
process, which hands over the same public snapshot and moves the shared virtual clock.

What it does is what people at the table do (sim/actions.py, the same actions the control port
offers): chips on the bet sensors, keys on the keypad, cards drawn from the shoe, the hole card
into the reader, DJ Wild's hands dealt from the deck in the hand and its stub into the stub
counter, a used deck back into its shuffler slot. The floor's part (the decks' inspection, the
dealer coming in) goes as floor commands, as a floor console sends them. Players choose by
controller.strategy from the cards face up (anything but an 11 is doubled for less, keyed with
its amount); the dealer knows the hole card because it drew it. The cut of a stack out of the
shuffler (673a.5(b)-(e)) is recorded as the floor's console records it: who refused, where the
cut was made, where the cover card went.

It answers each ask once, by the ask's ``id`` (docs/mqtt.md): the table publishes its state as
often as anything changes, and an ask can change its look without being another ask (DJ Wild's
deal is asked before and after Start Game locks the Progressive wagers); while the id stays the
same it lets time pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from controller.cards import Card, parse_card
from controller.strategy import choose, double_stake, takes_second_chance
from devices.events import Key
from devices.profiles import DeviceKind
from sim.actions import TableHands
from sim.table import SimTable

MAIN_SPOT, SIDE_SPOT = 1, 2  # docs/install.md: spot 1 the main wager, spot 2 the optional one
DEALER_NAME, FLOOR_NAME = "dealer-1", "floor-1"
MAX_WAITS = 720  # the link's waits (5 s of table time each, or one state) before giving up
MAX_ASKS_PER_ROUND = 400
ANSWERED_KEPT = 4 * MAX_ASKS_PER_ROUND  # ask ids a dealer remembers having answered
# 673a.3(c): decks are changed within 24 hours of opening; the floor changes them between shoes
# once they are 23 hours old. The floor knows when it opened them: it verified them itself.
DECK_CHANGE_AFTER_S = 23 * 3600.0
# 687a.9(c)-(e): five cards to each box, five to the dealer and one more (the DJ Wild deal).
WILD_CARDS_PER_BOX, WILD_DEALER_CARDS = 5, 6
CUT_STEPS = ("cut", "cover_card", "cut_to_shoe")  # the asks of 673a.5(b)-(d)


class TableStopped(Exception):
    """The table asks for the floor (a halting alarm) or does not move; the message says where."""


class TableLink(Protocol):
    """Where the dealer reads the table's public state and sends the floor's commands."""

    async def state(self) -> dict[str, Any]:
        """The table's public state once what the dealer just did is seen (or the next one)."""
        ...

    async def wait(self) -> dict[str, Any]:
        """Time passes (the shuffler shuffles); the public state after it."""
        ...

    async def touched(self, kind: DeviceKind) -> None:
        """The dealer acted on this device (the in-process link has it polled now)."""
        ...

    async def floor(self, command: str, args: dict[str, Any]) -> None:
        """A floor command; TableStopped with the table's one line if it is refused."""
        ...


@dataclass
class DealerStats:
    rounds: int = 0
    cards_drawn: int = 0
    keys_pressed: int = 0
    shoes: int = 0
    stub_counts: int = 0
    actions: int = 0


class WireDealer:
    def __init__(
        self,
        sim: SimTable,
        link: TableLink,
        *,
        boxes: int = 6,
        side_wagers: bool = True,
        dealer: str = DEALER_NAME,
        floor: str = FLOOR_NAME,
    ) -> None:
        self.sim = sim
        self.link = link
        self.hands = TableHands(sim)
        self.boxes = boxes
        self.side_wagers = side_wagers
        self.dealer, self.floor_name = dealer, floor
        self.stats = DealerStats()
        self.hole: Card | None = None
        # Every ask answered, by id (docs/mqtt.md: each id answered once; an ask the table asks
        # again, a re-split's card, comes with a new id). Bounded: the oldest are let go, far more
        # than one round asks.
        self._answered: dict[str, None] = {}
        self._last: str | None = None  # the last ask answered
        self._shoe_seen: str | None = None
        self._snap: dict[str, Any] = {}
        self._opened: dict[str, float] = {}  # back -> when the floor verified its decks (sim clock)
        self._cuts = 0  # cut steps taken on the stack in the hands (refusals, cuts)
        self._recut = False  # the floor has ordered this stack recut
        self._cover = 0  # where the cover card went, cards from the bottom
        self._coming_in = False  # came in during a round: new_dealer once it is settled

    # ------------------------------------------------------------------ the devices
    @property
    def keypad(self) -> Any:
        return self.hands.model(DeviceKind.KEYPAD)

    @property
    def shoe(self) -> Any:
        return self.hands.model(DeviceKind.SHOE)

    @property
    def shuffler(self) -> Any:
        return self.hands.model(DeviceKind.SHUFFLER)

    @property
    def reader(self) -> Any:
        return self.hands.model(DeviceKind.READER)

    async def press(self, key: Key, amount: int = 0) -> None:
        self.hands.press(key, amount)
        self.stats.keys_pressed += 1
        await self.link.touched(DeviceKind.KEYPAD)

    async def draw(self) -> Card:
        card = self.hands.draw()
        self.stats.cards_drawn += 1
        await self.link.touched(DeviceKind.SHOE)
        return card

    async def count_stub(self, cards: int | None = None) -> None:
        """DJ Wild: the stub (what is left of the deck in the hand) into the stub counter."""
        await self.hands.stub_into_counter(cards)
        self.stats.stub_counts += 1
        await self.link.touched(DeviceKind.STUB_COUNTER)

    async def until(self, predicate: Callable[[], bool], what: str) -> None:
        """Let the table's time pass until ``predicate`` holds (tests: a condition on the table's
        state). Not for what a device does: nothing the table publishes changes when the shuffler
        carries out an eject, so the dealer watches the device itself (``TableHands``)."""
        for _ in range(MAX_WAITS):
            if predicate():
                return
            self._snap = await self.link.wait()
        raise TableStopped(f"waited too long for {what}; table: {self._where()}")

    async def _watch(self, seen: Callable[[], Awaitable[bool]], what: str) -> None:
        """Until the devices show ``what`` (the shuffler's eject carried out: the stack or deck out,
        the batch in the shoe), however long that takes while the table waits for it: the
        table shows the eject as soon as it has journalled it, a moment (on a busy machine, more)
        before the shuffler carries it out. A table that asks something else meanwhile (a halting
        alarm) stops the dealer; one that says nothing for the link's idle bound does too."""
        device = asyncio.ensure_future(seen())
        try:
            # One turn of the loop for the device's look: what it shows already needs no table
            # state (the in-process link's wait moves the table's clock on).
            await asyncio.sleep(0)
            while not device.done():
                table = asyncio.ensure_future(self.link.wait())
                try:
                    await asyncio.wait((device, table), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    table.cancel()
                if not table.cancelled() and table.done():
                    self._snap = table.result()  # TimeoutError: the table said nothing for too long
                    now = self._snap.get("asking")
                    if not device.done() and isinstance(now, dict) and now.get("what") == "floor":
                        raise TableStopped(f"waiting for {what}: {now.get('section')}: {now.get('message')}")
        finally:
            device.cancel()

    def _where(self) -> str:
        keys = ("round", "in_round", "batch_in_shoe", "batches", "halted", "asking", "devices")
        return str({k: self._snap.get(k) for k in keys})

    # ------------------------------------------------------------------ the floor
    async def open_table(self) -> None:
        """673a.4: the floor verifies both batches' decks and the dealer comes in; then the dealer
        waits for the first batch in play."""
        snap = await self.link.state()
        for _ in range(MAX_WAITS):
            devices = snap.get("devices") or {}
            if devices and all(h == "online" for h in devices.values()):
                break  # the controller takes commands once every device has answered
            snap = await self.link.wait()
        # A batch in play before the floor does anything here: the table played on before these
        # devices started, so the cards of that batch went with the devices before them. One that
        # comes into play while the floor inspects (a fresh table's first shuffle done) is on its
        # way out of this shuffler, to be taken up as usual.
        in_play_before = snap.get("batch_in_shoe")
        # A table already in play (this dealer started again beside a running table) is played on
        # from its public state: only decks still new are inspected (673a.4: a batch in play is
        # never inspected again), and the dealer comes in between rounds.
        for back, batch in (snap.get("batches") or {}).items():
            if isinstance(batch, dict) and batch.get("location") not in (None, "new"):
                self._opened[back] = self.sim.clock.now()  # in use: the floor opened it earlier
                continue
            await self.link.floor("inspection_verified", {"back": back, "dealer": self.dealer})
            self._opened[back] = self.sim.clock.now()
        snap = await self.link.state()
        if (
            in_play_before is not None
            and snap.get("batch_in_shoe") == in_play_before
            and self.hands.has(DeviceKind.SHOE)
            and not self.shoe.remaining
        ):
            # The table has a batch in its shoe but this dealer's shoe is empty: the devices were
            # started again (their cards are gone). The floor has the batch reshuffled (673a.5(f)).
            await self.link.floor(
                "reshuffle_ordered", {"reason": "the devices were restarted; the shoe is empty"}
            )
            snap = await self.link.state()
        elif (
            in_play_before is not None
            and snap.get("batch_in_shoe") == in_play_before
            and self.hands.has(DeviceKind.SHUFFLER)
            and not self.hands.has(DeviceKind.SHOE)
            and self.hands.wild_deck is None
        ):
            # DJ Wild (687a.9(a)(2)): the table has a deck in the dealer's hand, but this dealer's
            # hand is empty: the deck went with the restarted devices. Between rounds the floor has
            # it reshuffled (673a.5(f)); a round under way cannot be dealt on from it and is void,
            # its wagers returned (a DJ Wild void ends the deck).
            why = "the devices were restarted; the deck in the dealer's hand is gone"
            if snap.get("in_round"):
                await self.link.floor("void_round", {"section": "687a.9(a)(2)", "reason": why})
            else:
                await self.link.floor("reshuffle_ordered", {"reason": why})
            snap = await self.link.state()
        if snap.get("in_round"):
            self._coming_in = True  # 673a.7(c): between rounds; the round under way is played on first
            return
        await self.link.floor("new_dealer", {"name": self.dealer})
        self._snap = await self.link.state()
        for _ in range(MAX_WAITS):
            if self._snap.get("batch_in_shoe") is not None:
                return
            ask = self._snap.get("asking")
            if isinstance(ask, dict) and ask.get("what") in CUT_STEPS and self._new_ask(ask):
                self._answer(ask)  # 673a.5(b)-(d): the first stack is cut before it is dealt
                await self._cut(str(ask["what"]), ask)
                self._snap = await self.link.state()
            else:
                self._snap = await self.link.wait()
        raise TableStopped(f"waited too long for the first batch in play; table: {self._where()}")

    # ------------------------------------------------------------------ rounds
    async def play(self, rounds: int, on_round: Callable[[int], None] | None = None) -> DealerStats:
        for _ in range(rounds):
            await self.play_round()
            if on_round is not None:
                on_round(self.stats.rounds)
        return self.stats

    async def play_round(self) -> None:
        """One round from the chips on the sensors to its settlement."""
        snap = self._snap = await self.link.state()
        await self._change_old_decks(snap)
        # A round already under way when this dealer came in is played on to its settlement.
        started = int(snap.get("round", 0)) if snap.get("in_round") else None
        for _ in range(MAX_ASKS_PER_ROUND + MAX_WAITS):
            ask = snap.get("asking")
            if started is not None and not snap.get("in_round") and int(snap.get("round", 0)) >= started:
                break
            if isinstance(ask, dict) and ask.get("what") == "floor":
                self._answer(ask)
                raise TableStopped(f"dealing is stopped: {ask.get('section')}: {ask.get('message')}")
            if isinstance(ask, dict) and self._new_ask(ask) and await self._ready(snap, ask):
                self._answer(ask)
                self.stats.actions += 1
                if await self._act(ask, snap):
                    started = int(snap.get("round", 0)) + 1
                snap = self._snap = await self.link.state()
            else:
                snap = self._snap = await self.link.wait()
        else:
            raise TableStopped(f"the round does not end; table: {self._where()}")
        self.stats.rounds += 1
        self.hands.clear_bets(self.boxes)
        if self._coming_in:
            self._coming_in = False
            await self.link.floor("new_dealer", {"name": self.dealer})
        if self.hands.wild_deck is not None:
            self.hands.deck_to_shuffler()  # DJ Wild: the used deck back into its slot
            await self.link.touched(DeviceKind.SHUFFLER)

    def _new_ask(self, ask: dict[str, Any]) -> bool:
        ident = ask_identity(ask)
        return ident not in self._answered and ident != self._last

    def _answer(self, ask: dict[str, Any]) -> None:
        ident = ask_identity(ask)
        self._last = ident
        if isinstance(ask.get("id"), str):  # an ask without one is told apart from the last only
            self._answered[ident] = None
        if len(self._answered) > ANSWERED_KEPT:
            del self._answered[next(iter(self._answered))]

    async def _change_old_decks(self, snap: dict[str, Any]) -> None:
        """673a.3(c): the floor brings new decks for a batch resting in the shuffler that is near
        its 24 hours, and verifies them (they are shuffled before they are dealt)."""
        for back, opened in list(self._opened.items()):
            if back == snap.get("batch_in_shoe") or self.sim.clock.now() - opened < DECK_CHANGE_AFTER_S:
                continue
            if self.hands.renew_decks(back):
                await self.link.floor("inspection_verified", {"back": back, "dealer": self.dealer})
                self._opened[back] = self.sim.clock.now()
                await self.link.touched(DeviceKind.SHUFFLER)

    async def _ready(self, snap: dict[str, Any], ask: dict[str, Any]) -> bool:
        """Before the chips go down, a batch is in play (for DJ Wild, the deck in the hand)."""
        if ask.get("what") != "bets":
            return True
        back = snap.get("batch_in_shoe")
        if back is None:
            return False
        if self.hands.has(DeviceKind.SHOE):
            return True
        deck = self.hands.wild_deck
        if deck is None or deck.back != back:
            # DJ Wild: the table shows the next deck in play once it has journalled the eject; the
            # dealer takes it up when the shuffler puts it out.
            await self._watch(lambda: self.hands.stack_out(None), f"deck {back} out of the shuffler")
            self.hands.take_deck()
        return self.hands.wild_deck is not None and self.hands.wild_deck.back == back

    async def _new_batch(self, snap: dict[str, Any]) -> None:
        back = snap.get("batch_in_shoe")
        if back is None or back == self._shoe_seen:
            return
        # A new shoe (or DJ Wild's next deck): the used batch went back into its slot with the
        # eject; the controller sees it there before the first round (673a.3(b)(5)).
        self._shoe_seen = back
        self.stats.shoes += 1
        await self.link.touched(DeviceKind.SHUFFLER)

    async def _shoe_ready(self, snap: dict[str, Any]) -> None:
        """The table shows a batch in play as soon as it has journalled the shuffler's eject, a
        moment before the shuffler carries it out: a dealer looks at the shoe before taking bets
        or drawing a card."""
        back = snap.get("batch_in_shoe")
        if back is None or not self.hands.has(DeviceKind.SHOE):
            return
        await self._watch(lambda: self.hands.shoe_holds(str(back), None), f"batch {back} in the shoe")

    async def _act(self, ask: dict[str, Any], snap: dict[str, Any]) -> bool:
        """Answer one ask; True when it was Start Game (a round begins)."""
        what = ask.get("what")
        await self._new_batch(snap)
        if what in ("bets", "burn", "card"):
            await self._shoe_ready(snap)
        if what == "bets":
            self.hands.place_bets(self.boxes, side=self.side_wagers)
            self.hole = None
            await self.press(Key.START_GAME)
            return True
        if what in ("burn", "card"):
            card = await self.draw()
            if ask.get("seat") == 0 and ask.get("face_up") is False:  # the dealer's hole card
                self.hole = card
        elif what == "decision":
            hand = _Cards(ask["cards"])
            legal = frozenset(str(a) for a in ask["legal"])
            key = Key(choose(hand, parse_card(ask["up_card"]), legal))
            limit = ask.get("double_limit")
            stake = double_stake(hand, int(limit)) if key is Key.DOUBLE and limit else None
            # A double for less is keyed with its amount; for the limit, the key alone.
            await self.press(key, 0 if stake is None or stake == limit else stake)
        elif what == "reader":
            if self.hole is None:
                raise TableStopped("the reader is asked for but the dealer drew no hole card")
            self.hands.hole_into_reader(self.hole)
            await self.link.touched(DeviceKind.READER)
        elif what == "offer":
            await self.press(self._offer_key(ask))
        elif what == "wild_deal":  # 687a.9(c)-(e): the hands dealt from the hand, then Next
            boxes = len(ask.get("boxes") or [])
            self.hands.deal_from_hand(WILD_CARDS_PER_BOX * boxes + WILD_DEALER_CARDS)
            await self.press(Key.NEXT)
        elif what == "stub":  # 687a.9(f): the stub into the counter
            await self.count_stub()
        elif what in CUT_STEPS:
            await self._cut(what, ask)
        elif what in ("batch", "wait"):
            pass  # the shuffler at work, or what the ask's message names: the dealer waits
        else:
            raise TableStopped(f"the dealer cannot answer {what!r}")
        return False

    async def _cut(self, what: str, ask: dict[str, Any]) -> None:
        """673a.5(b)-(e): the stack out of the shuffler, the cut offered in the order the table
        asks (a player sometimes refuses; the dealer cuts when all have), the cover card placed
        at least 1/4 from the bottom, the stack into the shoe (which tells the table it came in);
        now and then the floor orders a recut. Each step is recorded with the floor's commands
        (cut_refused, cut_made, cover_card_placed). The choices are a function of the shoe count,
        so a seeded run repeats."""
        if self.hands.stack is None:
            await self._watch(lambda: self.hands.stack_out(None), "the stack to cut out of the shuffler")
            self.hands.take_stack()
            self._cuts, self._recut = 0, False
        # The answer names its ask: the table refuses it if it asks something else by then.
        answering = {"ask": ask["id"]} if isinstance(ask.get("id"), str) else {}
        stack = self.hands.stack
        assert stack is not None
        n, k = len(stack.cards), self.stats.shoes + self._cuts
        if what == "cut":
            seat = ask.get("seat")
            by = seat if isinstance(seat, int) else 0
            if by and k % 3 == 1:
                await self.link.floor("cut_refused", {"seat": by, **answering})
                self._cuts += 1
                return
            at = n // 3 + (k * 7) % (n // 3)  # well inside the ten cards from either end
            await self.link.floor("cut_made", {"at": at, "by": by, **answering})
            self.hands.cut_stack(at)
            self._cuts += 1
        elif what == "cover_card":
            if not self._recut and self.stats.shoes % 4 == 1:
                self._recut = True
                await self.link.floor("recut_ordered", {})  # 673a.5(e): the floor wants it again
                return
            self._cover = -(-n // 4) + k % 5  # 673a.5(d): at least 1/4 of the way in from the bottom
            await self.link.floor("cover_card_placed", {"from_bottom": self._cover, **answering})
        else:
            self.hands.stack_into_shoe(self._cover)  # the shoe sees the batch come in
            await self.link.touched(DeviceKind.SHOE)

    def _offer_key(self, ask: dict[str, Any]) -> Key:
        offer = ask.get("offer")
        if offer in ("insurance", "double_attack"):
            return Key.DOUBLE  # taken at its maximum (docs/install.md)
        if offer == "second_chance":
            return Key.SECOND_CHANCE if takes_second_chance(_Cards(ask.get("cards", []))) else Key.NEXT
        if offer == "card_later":
            return Key.HIT  # a missed card taken after the others (673a.13(g),(h)), as a player would
        return Key.NEXT  # even money and surrender declined


def ask_identity(ask: dict[str, Any]) -> str:
    """The ask's ``id``; for a table too old to send one, the ask itself (one ask in a row equal
    to the one before was then taken for the same)."""
    ident = ask.get("id")
    return ident if isinstance(ident, str) else repr(sorted(ask.items()))


class _Cards:
    """A player hand as the public ask shows it: its cards, face up."""

    def __init__(self, texts: list[str]) -> None:
        self.cards = [parse_card(t) for t in texts]
