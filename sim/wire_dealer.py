"""The virtual dealer on the wire: plays rounds at a table run by `tablectl run`, in another
process, knowing of the controller only what a dealer at the table sees.

It reads the table's public MQTT state (``tablectl/<site>/<table>/state``; its ``asking`` says
whose turn it is, which decision or offer is open, which card is awaited) and acts only on the
simulated devices of ``tablectl sim``: chips on the bet sensors, keys on the keypad, cards drawn
from the shoe, the hole card into the reader. The floor's part (the decks' inspection, the dealer
coming in) goes as floor commands over MQTT, as a floor console sends them. Players choose by
controller.strategy from the cards face up; the dealer knows the hole card because it drew it.

It acts once on each distinct ask (an ask carries the round and the cards already dealt, so two
asks in a row are never equal) and never imports the controller's table or supervisor.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

import aiomqtt

from controller.cards import Card, parse_card
from controller.rules.hand import Hand
from controller.rules.requests import Action
from controller.strategy import choose, takes_second_chance
from controller.telemetry.broker import parse_broker_url
from controller.telemetry.topics import TableTopics
from devices.events import Key
from devices.profiles import DeviceKind
from sim.models import KeypadModel, ReaderModel, ShoeModel
from sim.table import SimTable

MAIN_SPOT, SIDE_SPOT = 1, 2  # docs/install.md: spot 1 the main wager, spot 2 the optional one
DEALER_NAME, FLOOR_NAME = "dealer-sim", "floor-sim"


class TableStopped(Exception):
    """The table asks for the floor (a halting alarm) or left the dealer without an answer."""


@dataclass
class WireStats:
    rounds: int = 0
    actions: int = 0


class WireDealer:
    def __init__(
        self, sim: SimTable, broker_url: str, site: str, table_id: str, *,
        boxes: int = 2, side_wagers: bool = True, idle_timeout_s: float = 120.0,
    ) -> None:  # fmt: skip
        self.sim = sim
        self.tls, self.host, self.port = parse_broker_url(broker_url)
        self.topics = TableTopics(site, table_id)
        self.boxes = boxes
        self.side_wagers = side_wagers
        self.idle_timeout_s = idle_timeout_s
        self.stats = WireStats()
        self.hole: Card | None = None
        self._last: dict[str, Any] | None = None
        self._opened = False
        self._started_round: int | None = None

    def _model(self, kind: DeviceKind) -> Any:
        info = self.sim.by_kind(kind)
        if info is None:
            raise TableStopped(f"the table has no {kind.value}")
        return info.model

    @property
    def keypad(self) -> KeypadModel:
        m: KeypadModel = self._model(DeviceKind.KEYPAD)
        return m

    @property
    def shoe(self) -> ShoeModel:
        m: ShoeModel = self._model(DeviceKind.SHOE)
        return m

    @property
    def reader(self) -> ReaderModel:
        m: ReaderModel = self._model(DeviceKind.READER)
        return m

    async def play(self, rounds: int) -> WireStats:
        """Until ``rounds`` rounds have settled; TableStopped if the table stops the dealer."""
        async with aiomqtt.Client(
            self.host, self.port, identifier=f"sim-dealer-{uuid.uuid4().hex[:8]}"
        ) as client:
            await client.subscribe(self.topics.state, qos=1)
            while True:
                async with asyncio.timeout(self.idle_timeout_s):
                    message = await anext(aiter(client.messages))
                snap = json.loads(bytes(message.payload)).get("snapshot", {})
                if not self._opened:
                    devices = snap.get("devices") or {}
                    if not devices or any(h != "online" for h in devices.values()):
                        continue  # the controller takes commands once every device has answered
                    await self._open_table(client, snap)
                if self._settled(snap) >= rounds:
                    return self.stats
                ask = snap.get("asking")
                if not isinstance(ask, dict) or ask == self._last:
                    continue
                self._last = ask
                await self._act(ask, snap)

    def _settled(self, snap: dict[str, Any]) -> int:
        if (
            self._started_round is not None
            and not snap.get("in_round")
            and snap.get("round", 0) >= self._started_round
        ):
            self.stats.rounds += 1
            self._started_round = None
        return self.stats.rounds

    async def _open_table(self, client: aiomqtt.Client, snap: dict[str, Any]) -> None:
        """673a.4: the floor verifies both batches' decks and the dealer comes in."""
        for back in snap.get("batches", {}):
            await self._floor(client, "inspection_verified", {"back": back, "dealer": DEALER_NAME})
        await self._floor(client, "new_dealer", {"name": DEALER_NAME})
        self._opened = True

    async def _floor(self, client: aiomqtt.Client, name: str, args: dict[str, Any]) -> None:
        body = {"version": 1, "id": uuid.uuid4().hex[:12], "who": FLOOR_NAME, "role": "floor", "args": args}
        await client.publish(self.topics.command(name), json.dumps(body), qos=1)

    async def _act(self, ask: dict[str, Any], snap: dict[str, Any]) -> None:
        what = ask.get("what")
        self.stats.actions += 1
        if what == "floor":
            raise TableStopped(f"the table stopped: {ask.get('section')}: {ask.get('message')}")
        if what == "bets":
            self._place_bets()
            self._started_round = int(snap.get("round", 0)) + 1
            self.keypad.press(Key.START_GAME)
        elif what in ("burn", "card"):
            dealt = self.shoe.draw()
            if ask.get("seat") == "dealer" and ask.get("face_up") is False:
                self.hole = dealt.card
        elif what == "decision":
            hand = Hand(int(ask["seat"]), int(ask["hand"]), cards=[parse_card(c) for c in ask["cards"]])
            legal = frozenset(Action(a) for a in ask["legal"])
            self.keypad.press(Key(choose(hand, parse_card(ask["up_card"]), legal).value))
        elif what == "reader":
            if self.hole is None:
                raise TableStopped("the reader is asked for but the dealer drew no hole card")
            self.reader.insert(self.hole)
        elif what == "offer":
            self.keypad.press(self._offer_key(ask))
        elif what in ("batch",):
            pass  # the controller has the shuffler shuffle and eject; the dealer waits
        else:
            raise TableStopped(f"the dealer cannot answer {what!r} (DJ Wild is not dealt on the wire yet)")

    def _offer_key(self, ask: dict[str, Any]) -> Key:
        offer = ask.get("offer")
        if offer in ("insurance", "double_attack"):
            return Key.DOUBLE  # taken at its maximum (docs/install.md)
        if offer == "second_chance":
            hand = Hand(
                int(ask["seat"]), int(ask["hand"]), cards=[parse_card(c) for c in ask.get("cards", [])]
            )
            return Key.SECOND_CHANCE if takes_second_chance(hand) else Key.NEXT
        return Key.NEXT

    def _place_bets(self) -> None:
        for box in range(1, self.boxes + 1):
            self.keypad.remove_bet(box, MAIN_SPOT)
            self.keypad.remove_bet(box, SIDE_SPOT)
            self.keypad.place_bet(box, MAIN_SPOT)
            if self.side_wagers:
                self.keypad.place_bet(box, SIDE_SPOT)
