"""Every shoe load the table is shown has an outcome (docs/design.md, "Nothing silent"): taken
into the table's shoe, refused naming its section and kept until the table can take it, or an
alarm. A stack put into the shoe a moment before the cover card is recorded was dropped without
a trace: the table showed no cards in the shoe and asked for the stack into the shoe for ever."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from structlog.testing import capture_logs

from controller.supervisor.rig import Rig
from devices.profiles import DeviceKind
from tests.support.first_stack import stack_cut


async def test_a_stack_in_the_shoe_before_its_cover_card_is_recorded_is_taken_then(
    table_rig: Callable[..., Awaitable[Rig]],
) -> None:
    rig = await table_rig("double-back-jack")
    back = await stack_cut(rig)
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
