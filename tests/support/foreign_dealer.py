"""A dealer written as a device maker's integrator would write one from docs/mqtt.md and
docs/simulators.md alone: it follows only the table's public MQTT state (the incarnation rule
included, through sim/mqtt_link.py, the shipped client of that contract), answers each ask ``id``
exactly once for the whole run (never again, whatever the table publishes after), and acts only
through the simulator's control port over HTTP, as a person at the table acts. It never watches
the simulators' insides: where the table shows something a moment before a device carries it out
(the shuffler's eject), it looks again at the next state the table publishes, or a moment later,
as a person looks at the tray again; a device that refuses the action is looked at again.

The shipped virtual dealer (sim/wire_dealer.py) remembers only the last id it answered and waits
on the simulated devices' own hooks; this one does neither, so an ask id the table reuses within a
round stalls it (the table must never do that, docs/mqtt.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from controller.cards import parse_card
from controller.strategy import choose, double_stake, takes_second_chance
from sim.mqtt_link import MqttLink

LOOK_AGAIN_S = 0.2  # a person looks at the tray or the shoe again this often while nothing is said
WILD_CARDS_PER_BOX, WILD_DEALER_CARDS = 5, 6  # 687a.9(c)-(e)
CUT_STEPS = ("cut", "cover_card", "cut_to_shoe")


class DealerStopped(Exception):
    """The table asks for the floor, or the dealer cannot go on; the message says where."""


class _Hand:
    def __init__(self, texts: list[str]) -> None:
        self.cards = [parse_card(t) for t in texts]


class ForeignDealer:
    def __init__(self, link: MqttLink, control: str, *, boxes: int = 2, side: bool = True) -> None:
        self.link, self.control = link, control.rstrip("/")
        self.boxes, self.side = boxes, side
        self.answered: set[str] = set()  # every ask id answered, for the whole run
        self.hole: str | None = None
        self.cover = 0
        self.deck: str | None = None  # DJ Wild: the back of the deck in the hand
        self.actions = 0
        self._http: aiohttp.ClientSession | None = None

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """One control-port request; None when the device refused it (not there yet)."""
        assert self._http is not None
        async with self._http.post(f"{self.control}/{path}", json=body) as r:
            answer: dict[str, Any] = await r.json()
        return answer if answer.get("ok") else None

    async def _must(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self._post(path, body)
        if answer is None:
            raise DealerStopped(f"the control port refused {body}")
        return answer

    async def _look_again(self) -> dict[str, Any]:
        """The next state the table publishes, or the same one a moment later."""
        try:
            async with asyncio.timeout(LOOK_AGAIN_S):
                return await self.link.wait()
        except TimeoutError:
            return await self.link.state()

    async def _until_done(self, action: dict[str, Any]) -> dict[str, Any]:
        """An action a device refuses until it has carried out what the table already shows."""
        while (answer := await self._post("action", action)) is None:
            snap = await self._look_again()
            ask = snap.get("asking")
            if isinstance(ask, dict) and ask.get("what") == "floor":
                raise DealerStopped(f"{ask.get('section')}: {ask.get('message')}")
        return answer

    async def _devices(self) -> dict[str, Any]:
        assert self._http is not None
        async with self._http.get(f"{self.control}/devices") as r:
            return dict((await r.json())["devices"])

    async def play(self, rounds: int) -> int:
        """Opens the table (the decks' inspection, the dealer coming in) and plays until
        ``rounds`` rounds have settled; returns the rounds settled."""
        async with aiohttp.ClientSession() as http:
            self._http = http
            snap = await self.link.state()
            while not (snap.get("devices") and all(h == "online" for h in snap["devices"].values())):
                snap = await self.link.wait()
            for back, batch in (snap.get("batches") or {}).items():
                if batch.get("location") == "new":
                    await self.link.floor("inspection_verified", {"back": back, "dealer": "foreign-1"})
            await self.link.floor("new_dealer", {"name": "foreign-1"})
            was_in_round = False
            snap = await self.link.state()
            while True:
                in_round = bool(snap.get("in_round"))
                if was_in_round and not in_round:
                    await self._round_over()
                    if int(snap.get("round") or 0) >= rounds:
                        return int(snap["round"])
                was_in_round = in_round
                ask = snap.get("asking")
                if isinstance(ask, dict) and ask.get("what") == "floor":
                    raise DealerStopped(f"dealing is stopped: {ask.get('section')}: {ask.get('message')}")
                ident = ask.get("id") if isinstance(ask, dict) else None
                if isinstance(ident, str) and ident not in self.answered and await self._ready(snap, ask):
                    await self._act(ask, snap)
                    self.answered.add(ident)
                    self.actions += 1
                    snap = await self.link.state()
                else:
                    snap = await self.link.wait()

    async def _round_over(self) -> None:
        for box in range(1, self.boxes + 1):
            for spot in (1, 2) if self.side else (1,):
                await self._must("action", {"action": "chips", "box": box, "spot": spot, "on": False})
        if self.deck is not None:  # DJ Wild: the used deck back into its slot
            await self._must("action", {"action": "deck_to_shuffler"})
            self.deck = None

    async def _ready(self, snap: dict[str, Any], ask: dict[str, Any]) -> bool:
        """Before the chips go down: the batch in play is in the shoe (or, DJ Wild, in the hand)."""
        if ask.get("what") != "bets":
            return True
        back = snap.get("batch_in_shoe")
        if back is None:
            return False
        devices = await self._devices()
        if any(d.get("kind") == "shoe" for d in devices.values()):
            return any(d.get("kind") == "shoe" and d.get("cards", 0) > 0 for d in devices.values())
        if self.deck != back:
            taken = await self._post("action", {"action": "take_deck"})
            if taken is None:
                return False  # not out of the shuffler yet: looked at again with the next state
            self.deck = str(taken["back"])
        return self.deck == back

    async def _key(self, key: str, amount: int = 0) -> None:
        body: dict[str, Any] = {"action": "key", "key": key}
        if amount:
            body["amount"] = amount
        await self._must("action", body)

    async def _act(self, ask: dict[str, Any], snap: dict[str, Any]) -> None:
        what = ask.get("what")
        if what == "bets":
            for box in range(1, self.boxes + 1):
                for spot in (1, 2) if self.side else (1,):
                    await self._must("action", {"action": "chips", "box": box, "spot": spot})
            self.hole = None
            await self._key("start_game")
        elif what in ("burn", "card"):
            card = (await self._until_done({"action": "draw"}))["card"]
            if ask.get("seat") == 0 and ask.get("face_up") is False:
                self.hole = str(card)
        elif what == "decision":
            hand = _Hand(ask["cards"])
            key = choose(hand, parse_card(ask["up_card"]), frozenset(ask["legal"]))
            limit = ask.get("double_limit")
            stake = double_stake(hand, int(limit)) if key == "double" and limit else None
            await self._key(str(key), 0 if stake is None or stake == limit else stake)
        elif what == "reader":
            if self.hole is None:
                raise DealerStopped("the reader is asked for but this dealer drew no hole card")
            await self._must("action", {"action": "hole_into_reader", "card": self.hole})
        elif what == "offer":
            await self._key(_offer_key(ask))
        elif what == "wild_deal":
            cards = WILD_CARDS_PER_BOX * len(ask.get("boxes") or []) + WILD_DEALER_CARDS
            await self._must("action", {"action": "deal_from_hand", "cards": cards})
            await self._key("next")
        elif what == "stub":
            await self._must("action", {"action": "stub_into_counter"})
        elif what in CUT_STEPS:
            await self._cut(str(what), ask)
        elif what != "batch":  # a batch: the shuffler is at work, the dealer waits
            raise DealerStopped(f"this dealer cannot answer {what!r}")

    async def _cut(self, what: str, ask: dict[str, Any]) -> None:
        """673a.5(b)-(d): the stack out of the shuffler, cut (by the seat offered it), the cover
        card a little more than 1/4 from the bottom, the stack into the shoe."""
        answering = {"ask": ask["id"]}
        if what == "cut":
            taken = await self._until_done({"action": "take_stack"})
            n = int(taken["cards"])
            at = n // 2
            seat = ask.get("seat")
            await self.link.floor(
                "cut_made", {"at": at, "by": seat if isinstance(seat, int) else 0, **answering}
            )
            await self._must("action", {"action": "cut_stack", "at": at})
            self.cover = -(-n // 4) + 3
        elif what == "cover_card":
            await self.link.floor("cover_card_placed", {"from_bottom": self.cover, **answering})
        else:
            await self._must("action", {"action": "stack_into_shoe", "cover_from_bottom": self.cover})


def _offer_key(ask: dict[str, Any]) -> str:
    offer = ask.get("offer")
    if offer in ("insurance", "double_attack"):
        return "double"  # taken at its maximum
    if offer == "second_chance":
        return "second_chance" if takes_second_chance(_Hand(ask.get("cards", []))) else "next"
    return "next"
