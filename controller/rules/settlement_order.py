"""The order in which the dealer collects and pays at the end of a round.

673a.7(t) and 685a.7(r) give two procedures and the Rules Submission names one (key
``settlement_procedure``); 665a.7(p) has only one. The order never changes an amount, only when
chips move, so the engine settles amounts as it goes and this module turns the settlement lines
into what the dealer is told, in order:

- the lines decided during play (a Blackjack paid at once, insurance, a surrender, a Second Chance
  settled at once) stay where they happened;
- the lines of the end of the round, already farthest to the dealer's right first, follow the
  procedure: (1) every losing wager collected, then every winning wager paid (and returned);
  (2) player by player, that player's losing wagers collected, then the winning ones paid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.rules.wagers import Settled, as_number

COLLECT_THEN_PAY = 1  # 673a.7(t)(1), 685a.7(r)(1)
PLAYER_BY_PLAYER = 2  # 673a.7(t)(2), 685a.7(r)(2), and 665a.7(p)


def _line(s: Settled) -> dict[str, Any]:
    net = s.net
    action = "collect" if net < 0 else ("pay" if net > 0 else "return")
    return {
        "seat": s.seat,
        "hand": s.hand,
        "wager": s.wager.value,
        "action": action,
        "amount": as_number(abs(net)),
    }


def dealer_order(settlements: Sequence[Settled], final_from: int, procedure: int) -> list[dict[str, Any]]:
    """What the dealer collects, pays and returns, in order; ``final_from`` is the index of the
    first end-of-round line."""
    during = [_line(s) for s in settlements[:final_from]]
    final = list(settlements[final_from:])
    if procedure == COLLECT_THEN_PAY:
        ordered = [s for s in final if s.halves < 0] + [s for s in final if s.halves >= 0]
    else:
        seats = list(dict.fromkeys(s.seat for s in final))  # dealer's right first, as settled
        ordered = [
            s
            for seat in seats
            for losing in (True, False)
            for s in final
            if s.seat == seat and (s.halves < 0) == losing
        ]
    return during + [_line(s) for s in ordered]
