"""The first stack of a batch-shuffler table out of the shuffler and cut, through the virtual
rig (controller/supervisor/rig.py): the floor verifies the decks (673a.4), the dealer takes the
stack out and cuts it (673a.5(b)-(c)); the table then asks for the cover card."""

from __future__ import annotations

from typing import Any

from controller.supervisor.rig import Rig


def ask_of(rig: Rig) -> dict[str, Any]:
    ask = rig.supervisor.snapshot()["asking"]
    assert isinstance(ask, dict)
    return ask


async def stack_cut(rig: Rig) -> str:
    """673a.4, 673a.5(b)-(c): the decks verified, the first stack out of the shuffler and cut by
    the dealer; the table now asks for the cover card."""
    link, dealer = rig.link, rig.dealer
    for back in rig.supervisor.snapshot()["batches"]:
        await link.floor("inspection_verified", {"back": back, "dealer": "dealer-1"})
    await link.floor("new_dealer", {"name": "dealer-1"})
    await dealer.until(lambda: ask_of(rig)["what"] == "cut", "the cut")
    assert await dealer.hands.stack_out(60)
    stack = dealer.hands.take_stack()
    at = len(stack.cards) // 3
    await link.floor("cut_made", {"at": at, "by": ask_of(rig)["seat"]})
    dealer.hands.cut_stack(at)
    assert ask_of(rig)["what"] == "cover_card"
    return str(ask_of(rig)["back"])
