"""Every shoe load the table is shown has an outcome (docs/design.md, "Nothing silent"): taken
into the table's shoe, refused naming its section and kept until the table can take it, or an
alarm. A stack put into the shoe a moment before the cover card is recorded was dropped without
a trace: the table showed no cards in the shoe and asked for the stack into the shoe for ever."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from structlog.testing import capture_logs

from controller.supervisor.rig import Rig
from devices.profiles import DeviceKind


def _ask(rig: Rig) -> dict[str, Any]:
    ask = rig.supervisor.snapshot()["asking"]
    assert isinstance(ask, dict)
    return ask


async def _stack_cut(rig: Rig) -> str:
    """673a.4, 673a.5(b)-(c): the decks verified, the first stack out of the shuffler and cut by
    the dealer; the table now asks for the cover card."""
    link, dealer = rig.link, rig.dealer
    for back in rig.supervisor.snapshot()["batches"]:
        await link.floor("inspection_verified", {"back": back, "dealer": "dealer-1"})
    await link.floor("new_dealer", {"name": "dealer-1"})
    await dealer.until(lambda: _ask(rig)["what"] == "cut", "the cut")
    assert await dealer.hands.stack_out(60)
    stack = dealer.hands.take_stack()
    at = len(stack.cards) // 3
    await link.floor("cut_made", {"at": at, "by": _ask(rig)["seat"]})
    dealer.hands.cut_stack(at)
    assert _ask(rig)["what"] == "cover_card"
    return str(_ask(rig)["back"])


async def test_a_stack_in_the_shoe_before_its_cover_card_is_recorded_is_taken_then(
    table_rig: Callable[..., Awaitable[Rig]],
) -> None:
    rig = await table_rig("double-back-jack")
    back = await _stack_cut(rig)
    size = len(rig.dealer.hands.stack.cards) if rig.dealer.hands.stack is not None else 0
    cover = -(-size // 4) + 3
    with capture_logs() as logs:
        rig.dealer.hands.stack_into_shoe(cover)  # in the shoe a second before the record
        await rig.link.touched(DeviceKind.SHOE)
    refused = [e for e in logs if e["event"] == "refused" and e.get("input") == "BatchToShoe"]
    assert refused and str(refused[0]["error"]).startswith("673a.5(d)"), logs
    assert rig.supervisor.snapshot()["batch_in_shoe"] is None
    await rig.link.floor("cover_card_placed", {"from_bottom": cover})
    snap = rig.supervisor.snapshot()
    assert snap["batch_in_shoe"] == back and snap["cards_in_shoe"] == size
    assert snap["asking"]["what"] == "burn"
    assert not snap["alarms"]
