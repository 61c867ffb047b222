"""The control port of ``tablectl sim``: a small HTTP/JSON port through which a test in another
process acts at the simulated table as the people at it would, and makes the devices fail.

    GET  /          the devices (name, kind, where they listen), the actions and the faults
    GET  /devices   what can be seen of each device at the table (no shoe order, no stub contents)
    POST /action    {"action": "chips", "box": 1, "spot": 1, "on": true} ...   -> {"ok": true, ...}
    POST /fault     {"fault": "jam", "at_card": 100} ...                       -> {"ok": true}

Every answer is one JSON object; a refusal is ``{"ok": false, "error": "<one line>"}`` with status
400 (404 for an unknown path). Bodies are read bounded (4 KiB, controller.bounded's nesting limit)
before they are parsed; anything else is refused in one line. It binds to loopback unless another
address is named: whoever reaches it can deal the table. docs/simulators.md lists every action,
fault and field.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from aiohttp import web

from controller.bounded import InputRefused, load_json
from controller.cards import parse_card
from controller.errors import TablectlError
from devices.events import Key, Slot
from devices.profiles import DeviceKind
from sim.actions import FAULTS, ActionRefused, TableHands, inject
from sim.table import SimTable

MAX_BODY_BYTES = 4096
DEFAULT_HOST = "127.0.0.1"
ACTIONS = (
    "chips",
    "key",
    "draw",
    "hole_into_reader",
    "take_stack",
    "cut_stack",
    "stack_into_shoe",
    "take_deck",
    "deal_from_hand",
    "stub_into_counter",
    "deck_to_shuffler",
    "decks_to_shuffler",
)


def parse_listen(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[v6]:PORT`` with a literal address (loopback when only a port)."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    host = host if sep else DEFAULT_HOST
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        raise ValueError(f"--control {text!r}: must be [HOST:]PORT with an IP address") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"--control {text!r}: the port must be 0-65535")
    return host, number


class ControlPort:
    def __init__(self, sim: SimTable, hands: TableHands | None = None) -> None:
        self.sim = sim
        self.hands = hands or TableHands(sim)
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_get("/", self._index)
        app.router.add_get("/devices", self._devices)
        app.router.add_post("/action", self._action)
        app.router.add_post("/fault", self._fault)
        return app

    async def start(self, host: str = DEFAULT_HOST, port: int = 0) -> tuple[str, int]:
        """Listen; returns where (the port chosen when ``port`` is 0)."""
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        bound = runner.addresses[0]
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # ------------------------------------------------------------------ handlers
    async def _index(self, request: web.Request) -> web.Response:
        devices = {name: {"kind": d.config.kind.value, "at": d.where} for name, d in self.sim.devices.items()}
        return web.json_response({"ok": True, "devices": devices, "actions": ACTIONS, "faults": FAULTS})

    async def _devices(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "devices": self.visible()})

    async def _action(self, request: web.Request) -> web.Response:
        return await self._handle(request, "action", self.act)

    async def _fault(self, request: web.Request) -> web.Response:
        async def fault(name: str, body: dict[str, Any]) -> dict[str, Any]:
            inject(self.hands, name, body)
            return {}

        return await self._handle(request, "fault", fault)

    async def _handle(self, request: web.Request, key: str, run: Any) -> web.Response:
        try:
            body = await _body(request)
            name = body.pop(key, None)
            if not isinstance(name, str):
                raise ActionRefused(f"{key}: required, a string")
            result = await run(name, body)
        except (ActionRefused, TablectlError) as e:
            return _refused(str(e))
        return web.json_response({"ok": True, **result})

    # ------------------------------------------------------------------ actions
    async def act(self, action: str, args: dict[str, Any]) -> dict[str, Any]:
        """One human action; the answer says what the person saw (a drawn card is face up to
        the dealer who drew it; the shoe's order and the stub's cards are never told)."""
        h = self.hands
        if action == "chips":
            h.chips(_int(args, "box", 1, 16), _int(args, "spot", 1, 8), _bool(args, "on"))
        elif action == "key":
            amount = _int(args, "amount", 1, 0xFFFF) if "amount" in args else 0
            h.press(_enum(Key, args, "key"), amount)
        elif action == "draw":
            return {"card": str(h.draw())}
        elif action == "hole_into_reader":
            try:
                card = parse_card(_text(args, "card"))
            except ValueError as e:  # CardError: one line naming the rank or suit
                raise ActionRefused(f"card: {e}") from None
            h.hole_into_reader(card)
        elif action == "take_stack":  # 673a.5(b): the shuffled stack out of the shuffler
            stack = h.take_stack()
            return {"back": stack.back, "cards": len(stack.cards)}
        elif action == "cut_stack":  # 673a.5(d): the cards above the cut to the bottom
            h.cut_stack(_int(args, "at", 1, 520))
        elif action == "stack_into_shoe":  # 673a.5(d): with the cover card this far from the bottom
            h.stack_into_shoe(_int(args, "cover_from_bottom", 0, 520))
        elif action == "take_deck":
            deck = h.take_deck()
            return {"back": deck.back, "cards": len(deck.cards)}
        elif action == "deal_from_hand":
            h.deal_from_hand(_int(args, "cards", 1, 60))
        elif action == "stub_into_counter":
            await h.stub_into_counter(_int(args, "cards", 0, 60) if "cards" in args else None)
        elif action == "deck_to_shuffler":
            h.deck_to_shuffler()
        elif action == "decks_to_shuffler":
            h.decks_to_shuffler(_enum(Slot, args, "slot"))
        else:
            raise ActionRefused(f"no action {action!r} (actions: {', '.join(ACTIONS)})")
        return {}

    def visible(self) -> dict[str, dict[str, Any]]:
        """What anyone at the table sees of each device: lights, counts and states, no cards."""
        out: dict[str, dict[str, Any]] = {}
        for name, info in self.sim.devices.items():
            m, kind = info.model, info.config.kind
            seen: dict[str, Any] = {"kind": kind.value, "powered": not _silent(info)}
            if kind is DeviceKind.KEYPAD:
                seen |= {"chips": sorted(m.sensed()), "lights": sorted(m.lights), "locked": m.locked}
            elif kind is DeviceKind.SHOE:
                seen |= {"cards": m.remaining, "cover_card_out": m.cover}
            elif kind is DeviceKind.SHUFFLER:
                seen |= {
                    "state": m.state.value,
                    "slots": {s.value: b.state.value for s, b in m.slots.items()},
                }
            elif kind is DeviceKind.READER:
                seen |= {"failed": m.faults.dead}
            elif kind is DeviceKind.STUB_COUNTER:
                seen |= {"sensor_fault": m.faults.sensor_fault}
            out[name] = seen
        deck = self.hands.wild_deck
        if deck is not None or self.sim.tray is not None:
            out["hand"] = {
                "deck": None if deck is None else deck.back,
                "cards": 0 if deck is None else deck.stub,
                "tray": None if self.sim.tray is None else self.sim.tray[1],
            }
        return out


def _silent(info: Any) -> bool:
    wire = info.register_sim or info.frame_sim
    return bool(wire is not None and wire.faults.silent)


async def _body(request: web.Request) -> dict[str, Any]:
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise ActionRefused(f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        raw = await request.content.read(MAX_BODY_BYTES + 1)
    except ValueError:
        raise ActionRefused("the body could not be read") from None
    if len(raw) > MAX_BODY_BYTES:
        raise ActionRefused(f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        body = load_json(raw, max_bytes=MAX_BODY_BYTES)
    except InputRefused as e:
        raise ActionRefused(f"the body: {e}") from None
    if not isinstance(body, dict):
        raise ActionRefused("the body must be one JSON object")
    return body


def _refused(error: str) -> web.Response:
    return web.json_response(
        {"ok": False, "error": error.splitlines()[0][:300] if error else "refused"}, status=400
    )


def _int(args: dict[str, Any], key: str, low: int, high: int) -> int:
    value = args.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ActionRefused(f"{key}: a whole number {low} to {high} is required")
    return value


def _bool(args: dict[str, Any], key: str) -> bool:
    value = args.get(key, True)
    if not isinstance(value, bool):
        raise ActionRefused(f"{key}: true or false")
    return value


def _text(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= 8:
        raise ActionRefused(f"{key}: required, a short string")
    return value


def _enum(kind: Any, args: dict[str, Any], key: str) -> Any:
    value = args.get(key)
    try:
        return kind(value)
    except ValueError:
        raise ActionRefused(f"{key}: one of {', '.join(m.value for m in kind)}") from None
