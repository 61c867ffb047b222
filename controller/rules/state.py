"""The state of one round: boxes, hands, the dealer's cards and every settlement so far."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.cards import Card
from controller.game_config import GameOptions
from controller.rules.hand import Hand
from controller.rules.wagers import Settled, Wager


@dataclass(frozen=True, slots=True, init=False)
class SeatWagers:
    """What a box puts on the layout before the first card; later wagers come through requests.

    ``side``: the side wagers placed, by kind (the game's declared wager keys), each once, in key
    order, none of 0. Side wagers come as ``side`` or as keywords (``SeatWagers(1, 10,
    free_double=5)``, as a journal's line reads back); the shipped games' two may also come by
    position after the Bet.
    """

    seat: int
    bet: int
    side: tuple[tuple[str, int], ...]
    player: str  # who bets on this box, when known: one player may hold adjacent boxes

    def __init__(
        self,
        seat: int,
        bet: int,
        bust_it: int = 0,
        match_the_dealer: int = 0,
        *,
        player: str = "",
        side: Mapping[str, int] | None = None,
        **more: int,
    ) -> None:
        placed = {Wager.BUST_IT: bust_it, Wager.MATCH_THE_DEALER: match_the_dealer} | dict(side or {}) | more
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "bet", bet)
        object.__setattr__(self, "side", tuple((k, v) for k, v in sorted(placed.items()) if v))
        object.__setattr__(self, "player", player)


@dataclass(slots=True, eq=False)
class Box:
    seat: int
    bet: int
    # Side wagers placed before the first card, by kind (SeatWagers.side); a kind not placed is
    # absent.
    side: dict[str, int] = field(default_factory=dict)
    double_attack: int = 0
    insurance: int = 0
    early_surrender: bool = False  # D5: surrendered before the reader, settled after it
    bust_it_settled: bool = False  # 665a.9(b)(2)(i) or a dead box settled it before 665a.7(m)
    dead: bool = False  # called dead (673a.13(g),(h) and the like): out of this round
    hands: list[Hand] = field(default_factory=list)

    def stake(self, kind: str) -> int:
        """The side wager of this kind on the box (0: none)."""
        return self.side.get(kind, 0)

    @property
    def first(self) -> Hand:
        return self.hands[0]


@dataclass(slots=True, eq=False)
class RoundState:
    options: GameOptions
    boxes: list[Box]
    dealer: list[Card] = field(default_factory=list)
    settlements: list[Settled] = field(default_factory=list)
    reader_report: object = None  # what the reader said: bool (peek) or MasqueRange
    reader_agrees: bool = True  # False: the report contradicts the hole card (an irregularity)
    hole_exposed: bool = False  # 685a.7(h): both dealer cards Large
    hole_turned: bool = False
    dealer_played: bool = False  # the dealer's hand was played out by the drawing rule
    irregularities: list[str] = field(default_factory=list)
    final_from: int | None = None  # index of the first end-of-round settlement (673a.7(t))

    def start_final_settlement(self) -> None:
        if self.final_from is None:
            self.final_from = len(self.settlements)

    def settle(
        self, seat: int, hand: int | None, wager: Wager, stake: int, halves: int, section: str
    ) -> None:
        if stake:
            self.settlements.append(Settled(seat, hand, wager, stake, halves, section))

    def settle_hand(self, hand: Hand, halves: int, result: str, section: str) -> None:
        """Settle a hand's Bet and any Double Down on it alike; record the Bet's result."""
        self.settle(hand.seat, hand.index, Wager.BET, hand.bet, halves, section)
        self.settle(hand.seat, hand.index, Wager.BET, hand.double_down, halves, section)
        hand.result = result
        hand.settled = True
        hand.done = True

    def live_hands(self) -> list[Hand]:
        return [h for b in self.boxes for h in b.hands if not h.settled]
