"""``tablectl round --script FILE.json``: one round from a fully specified shoe.

The script names the game, the shoe in the order cards leave it, and each seat's wagers and
decisions. The round is played by the same rules engine the table uses; the settlement comes out
as JSON. Anything the rules forbid raises RuleViolation naming the section; anything malformed
raises ScriptError. See tests/scripts/README.md for the format and docs/rulings.md (G4) for how
decisions are read.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from controller.bounded import MAX_CONFIG_BYTES, InputRefused, load_json
from controller.cards import Card, CardError, parse_card
from controller.errors import RuleViolation, ScriptError
from controller.game_config import GameOptions, default_options
from controller.games import GameId, blackjack_games, game_spec, registered
from controller.rules.down_under import masque_range
from controller.rules.requests import (
    Action,
    CardFor,
    CardLaterOffer,
    Decision,
    DoubleAttackOffer,
    DoubleFor,
    EvenMoneyOffer,
    InsuranceOffer,
    Offer,
    ReaderUse,
    SecondChanceOffer,
    SurrenderOffer,
    WagerOffer,
    answer,
    offer_kind,
    offer_named,
)
from controller.rules.round import Round
from controller.rules.state import SeatWagers
from controller.rules.wagers import Wager, as_number, settled_kinds
from controller.table.sections import cited, section

SEAT_KEYS = {"seat", "wagers", "double_attack", "insurance", "even_money", "offers", "actions"}
ONLY_STAND_OR_SURRENDER = frozenset({Action.STAND, Action.SURRENDER})
SCRIPT_ACTIONS = {"hit", "stand", "double", "split", "surrender", "second_chance"}


@dataclass
class ScriptSeat:
    seat: int
    wagers: SeatWagers
    double_attack: int = 0
    insurance: int = 0
    even_money: bool = False
    actions: deque[str | DoubleFor] = field(default_factory=deque)
    insurance_taken: bool = False
    even_money_taken: bool = False
    # Any other registered offer, by name: taken (true, or a wager of N) or declined; an offer
    # not named is declined.
    offers: dict[str, bool | int] = field(default_factory=dict)
    asked: set[str] = field(default_factory=set)


def _amount(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScriptError(f"{where}: a wager is a whole number of chips, not {value!r}")
    return value


def parse_script(doc: Any) -> tuple[GameOptions, list[Card], list[ScriptSeat]]:
    if not isinstance(doc, dict):
        raise ScriptError("script: expected a JSON object with game, shoe and seats")
    unknown = set(doc) - {"game", "decks", "shoe", "seats"}
    if unknown:
        raise ScriptError(f"script: unknown key {sorted(unknown)[0]!r}")
    if not isinstance(doc.get("game"), str):
        *others, last = blackjack_games()
        raise ScriptError(f"script: game: missing ({', '.join(others)} or {last})")
    spec = game_spec(doc["game"])
    if not spec.blackjack:
        raise ScriptError(f"script: game: {spec.title} is not a blackjack game")
    decks = doc.get("decks", spec.default_decks)
    if isinstance(decks, bool) or not isinstance(decks, int):
        raise ScriptError(f"script: decks: expected a whole number, got {decks!r}")
    spec.check_decks(decks)
    options = default_options(spec.id, decks)

    raw_shoe = doc.get("shoe")
    if not isinstance(raw_shoe, list) or not raw_shoe:
        raise ScriptError('script: shoe: expected a list of cards like ["KS", "10H"]')
    try:
        shoe = [parse_card(c) for c in raw_shoe]
    except CardError as e:
        raise ScriptError(f"script: shoe: {e}") from None
    check_shoe(spec.id, decks, shoe)

    raw_seats = doc.get("seats")
    if not isinstance(raw_seats, list) or not raw_seats:
        raise ScriptError("script: seats: expected a list of seats")
    seats = [parse_seat(s, i) for i, s in enumerate(raw_seats)]
    return options, shoe, seats


def check_shoe(game: GameId, decks: int, shoe: list[Card]) -> None:
    """Every card must be one the game's batch holds, no more often than the decks allow."""
    spec = game_spec(game)
    available = Counter(str(c) for c in spec.batch(decks))
    for text, n in Counter(str(c) for c in shoe).items():
        if text not in available:
            raise RuleViolation(spec.decks_section, f"{text} is not in a {spec.title} deck")
        if n > available[text]:
            raise RuleViolation(
                spec.decks_section,
                f"{decks} decks hold {available[text]} of each card; the shoe lists {n} of {text}",
            )


def _action(raw: Any, where: str) -> str | DoubleFor:
    """One scripted action: a name, or ``{"double": N}`` for a double of N chips (for less than
    the limit: 673a.10(a), 665a.10(a), 685a.9(a) say only that it may not exceed it)."""
    if isinstance(raw, dict) and list(raw) == ["double"]:
        return DoubleFor(_amount(raw["double"], f"{where}: double"))
    if not isinstance(raw, str) or raw not in SCRIPT_ACTIONS:
        raise ScriptError(f'{where}: each is one of {", ".join(sorted(SCRIPT_ACTIONS))} or {{"double": N}}')
    return raw


def _offers(raw: Any, where: str) -> dict[str, bool | int]:
    """A seat's answers to registered offers: ``{"<offer>": true}``, or a wager of N chips for
    one taken with a wager."""
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: expected an object")
    answers: dict[str, bool | int] = {}
    for name, value in raw.items():
        kind = offer_named(name)
        if kind is None:
            raise ScriptError(f"{where}: unknown offer {name!r}")
        answers[name] = _amount(value, f"{where}.{name}") if kind.wager else value
        if not kind.wager and not isinstance(value, bool):
            raise ScriptError(f"{where}.{name}: expected true or false")
    return answers


def parse_seat(raw: Any, i: int) -> ScriptSeat:
    where = f"script: seats[{i}]"
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: expected an object")
    unknown = set(raw) - SEAT_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    seat = raw.get("seat")
    if isinstance(seat, bool) or not isinstance(seat, int):
        raise ScriptError(f"{where}: seat: expected a box number, got {seat!r}")
    wagers = raw.get("wagers", {})
    if not isinstance(wagers, dict):
        raise ScriptError(f"{where}: wagers: expected an object")
    # The Bet and the side wagers placed before the first card: the blackjack games' optional ones.
    side_keys = {w.key for g in registered() if g.blackjack for w in g.optional_wagers}
    unknown = set(wagers) - side_keys - {"bet"}
    if unknown:
        raise ScriptError(f"{where}: wagers: unknown wager {sorted(unknown)[0]!r}")
    actions = raw.get("actions", [])
    if not isinstance(actions, list):
        raise ScriptError(f"{where}: actions: expected a list")
    actions = [_action(a, f"{where}: actions[{k}]") for k, a in enumerate(actions)]
    even_money = raw.get("even_money", False)
    if not isinstance(even_money, bool):
        raise ScriptError(f"{where}: even_money: expected true or false")
    return ScriptSeat(
        seat=seat,
        offers=_offers(raw.get("offers", {}), f"{where}: offers"),
        wagers=SeatWagers(
            seat=seat,
            bet=_amount(wagers.get("bet", 0), f"{where}: wagers.bet"),
            side={k: _amount(v, f"{where}: wagers.{k}") for k, v in wagers.items() if k != "bet"},
        ),
        double_attack=_amount(raw.get("double_attack", 0), f"{where}: double_attack"),
        insurance=_amount(raw.get("insurance", 0), f"{where}: insurance"),
        even_money=even_money,
        actions=deque(actions),
    )


class ScriptedRound:
    """Answers a Round's requests from the script: cards from the shoe, decisions in order."""

    def __init__(self, options: GameOptions, shoe: list[Card], seats: list[ScriptSeat]) -> None:
        self.options = options
        self.game = options.game
        self.shoe = deque(shoe)
        self.seats = {s.seat: s for s in seats}
        spec = options.spec
        chapter = spec.chapter
        for s in seats:
            if s.double_attack and "double_attack" not in spec.offers:
                raise RuleViolation(
                    f"{chapter}.6", f"there is no Double Attack Wager in {options.spec.title}"
                )
            if s.even_money and "even_money" not in spec.offers:
                raise RuleViolation(f"{chapter}.8", "even money is offered only in Down Under (685a.7(g))")
            if "second_chance" in s.actions and "second_chance" not in spec.offers:
                raise RuleViolation(
                    f"{chapter}.6", f"there is no Second Chance Wager in {options.spec.title}"
                )
            for name in s.offers:
                if name not in spec.offers:
                    kind = offer_named(name)
                    assert kind is not None  # parse_seat took only registered offers
                    raise RuleViolation(
                        cited(spec, kind.section), f"{kind.described} is not offered in {spec.title}"
                    )
        self.round = Round(options, [s.wagers for s in seats])

    def play(self) -> dict[str, Any]:
        rnd = self.round
        while rnd.request is not None:
            rnd.answer(answer(rnd.request, self))
        self.check_leftovers()
        return self.settlement()

    # -- answers to the rules engine (controller.rules.requests.Answerer) -----------------
    def card(self, req: CardFor) -> Card:
        if not self.shoe:
            raise RuleViolation(
                section(self.options.spec, "insufficient_cards"),
                "the shoe ran out of cards before the round was complete",
            )
        return self.shoe.popleft()

    def decision(self, req: Decision) -> Action | DoubleFor:
        actions = self.seats[req.seat].actions
        if not actions:
            return Action.STAND
        if req.legal <= ONLY_STAND_OR_SURRENDER and actions[0] != "surrender":
            # Ruling G4: a hand that can no longer draw (after a Double Attack double, or a
            # split ace) but may still surrender leaves the next decision to the next hand.
            return Action.STAND
        if actions[0] == "second_chance":
            raise RuleViolation("673a.7(l)", "a Second Chance Wager is placed only on a hand over 21")
        chosen = actions.popleft()
        return chosen if isinstance(chosen, DoubleFor) else Action(chosen)

    def _offered(self, seat: int, wanted: str) -> bool:
        actions = self.seats[seat].actions
        if actions and actions[0] == wanted:
            actions.popleft()
            return True
        return False

    def offer(self, req: Offer) -> bool | int:
        """Any registered offer: the seat's answer to it named in ``offers``, else declined."""
        kind = offer_kind(req)
        seat = self.seats[req.seat]
        seat.asked.add(kind.name)
        given = seat.offers.get(kind.name, kind.declined())
        if isinstance(req, WagerOffer) and given > req.maximum:
            raise RuleViolation(
                cited(self.options.spec, kind.limit),
                f"seat {req.seat}: {kind.described} of {given} is more than the {req.maximum} allowed",
            )
        return given

    # Hooks for the offers a script answers in fields or actions of their own.
    def second_chance(self, req: SecondChanceOffer) -> bool:
        return self._offered(req.seat, "second_chance")

    def surrender(self, req: SurrenderOffer) -> bool:
        return self._offered(req.seat, "surrender")

    def double_attack(self, req: DoubleAttackOffer) -> int:
        return self.seats[req.seat].double_attack

    def insurance(self, req: InsuranceOffer) -> int:
        seat = self.seats[req.seat]
        seat.insurance_taken = True
        return seat.insurance

    def even_money(self, req: EvenMoneyOffer) -> bool:
        seat = self.seats[req.seat]
        seat.even_money_taken = True
        return seat.even_money

    def card_later(self, req: CardLaterOffer) -> bool:
        return True  # never asked: a script's dealer deals every card it names

    def reader(self, req: ReaderUse) -> object:
        hole = self.round.state.dealer[1]
        return masque_range(hole) if req.masque else self.round.procedure.dealer_blackjack()

    def check_leftovers(self) -> None:
        state = self.round.state
        chapter = self.options.spec.chapter
        up = state.dealer[0] if state.dealer else None
        for box in state.boxes:
            seat = self.seats[box.seat]
            if seat.insurance and not seat.insurance_taken:
                why = (
                    "insurance is offered only when the dealer's up card is an ace"
                    if up is None or not up.is_ace
                    else "insurance is not offered to a hand already settled (ruling D4)"
                )
                raise RuleViolation(f"{chapter}.8(a)", f"seat {box.seat}: {why}")
            if seat.even_money and not seat.even_money_taken:
                raise RuleViolation(
                    "685a.7(g)", f"seat {box.seat}: even money is offered only on a Blackjack facing an ace"
                )
            for name, given in seat.offers.items():
                kind = offer_named(name)
                if given and name not in seat.asked and kind is not None:
                    raise RuleViolation(
                        cited(self.options.spec, kind.section),
                        f"seat {box.seat}: {kind.described} was not offered",
                    )
            if not seat.actions:
                continue
            left_over = seat.actions[0]
            left = "double" if isinstance(left_over, DoubleFor) else left_over
            if left == "second_chance":
                raise RuleViolation(
                    "673a.7(l)", f"seat {box.seat}: a Second Chance Wager is placed only on a hand over 21"
                )
            last = box.hands[-1]
            why_not = self.round.procedure.refusal(Action(left), last, box)
            if why_not is not None:
                raise why_not
            if state.hole_turned and not state.dealer_played and self.round.procedure.dealer_blackjack():
                raise RuleViolation(
                    section(self.options.spec, "peek"),
                    f"seat {box.seat}: the dealer has Blackjack; no decision {left!r} is taken",
                )
            raise RuleViolation(
                "G4", f"seat {box.seat}: decision {left!r} left over after the seat's hands were complete"
            )

    def settlement(self) -> dict[str, Any]:
        state = self.round.state
        nets: dict[int, dict[Wager, Fraction]] = {
            b.seat: {k: Fraction(0) for k in settled_kinds()} for b in state.boxes
        }
        for s in state.settlements:
            nets[s.seat][s.wager] += s.net
        outcome = self.round.outcome()
        return {
            "dealer": outcome["dealer"],
            "seats": [
                {
                    **box,
                    "net": {k.value: as_number(v) for k, v in nets[box["seat"]].items()},
                    "total": as_number(sum(nets[box["seat"]].values(), Fraction(0))),
                }
                for box in outcome["boxes"]
            ],
        }


def run_script(text: str) -> dict[str, Any]:
    try:
        doc = load_json(text, max_bytes=MAX_CONFIG_BYTES)
    except InputRefused as e:
        raise ScriptError(f"script: {e}") from None
    options, shoe, seats = parse_script(unwrap_case(doc))
    return ScriptedRound(options, shoe, seats).play()


CASE_KEYS = {"cite", "why", "script", "expect", "error"}


def unwrap_case(doc: Any) -> Any:
    """A hand-derived case file (tests/scripts/: ``cite``, ``why``, ``script`` and ``expect`` or
    ``error``) plays its ``script``; a bare script plays as it is."""
    if not isinstance(doc, dict) or "script" not in doc:
        return doc
    unknown = set(doc) - CASE_KEYS
    if unknown:
        raise ScriptError(
            f"case: unknown key {sorted(unknown)[0]!r} (a case has {', '.join(sorted(CASE_KEYS))})"
        )
    return doc["script"]
