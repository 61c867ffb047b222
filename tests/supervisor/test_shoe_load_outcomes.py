"""Every shoe load the table is shown has an outcome (docs/design.md, "Nothing silent"): taken
into the table's shoe, refused naming its section and kept until the table can take it, or an
alarm. A stack put into the shoe a moment before the cover card is recorded was dropped without
a trace: the table showed no cards in the shoe and asked for the stack into the shoe for ever."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from structlog.testing import capture_logs

from controller.supervisor.rig import Rig
from devices.events import ShufflerState
from devices.profiles import DeviceKind
from tests.supervisor.test_settle_window import direct_insert_table
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


async def test_a_direct_insert_shuffler_that_loads_the_shoe_before_the_table_asks(
    tmp_path: Path, table_rig: Callable[..., Awaitable[Rig]]
) -> None:
    """Ruling G13: a direct-insert shuffler that puts its first shuffled batch into the shoe by
    itself, before the table has read it ready (and so before it has journalled the batch into
    the shoe): the shoe's report of the load is the batch into the shoe, taken as soon as the
    table has the batch shuffled; the first load is not lost."""
    rig = await table_rig("double-attack", table=direct_insert_table(tmp_path, "double-attack"))
    sup = rig.supervisor
    for back in sup.snapshot()["batches"]:
        await rig.link.floor("inspection_verified", {"back": back, "dealer": "dealer-1"})
    await rig.link.floor("new_dealer", {"name": "dealer-1"})
    info = rig.sim.by_kind(DeviceKind.SHUFFLER)
    assert info is not None and info.register_sim is not None and info.register_sim.on_command is not None
    model = info.model
    await sup.settle()
    shuffling = [s for s, v in model.slots.items() if v.state is ShufflerState.SHUFFLING]
    assert shuffling, "the table started no shuffle"
    rig.clock.advance(model.cycle_s + 1)  # the cycle ends while the controller is not looking
    model.update()
    slot = shuffling[0]
    back = model.slots[slot].back
    with capture_logs() as logs:
        info.register_sim.on_command("eject_to_shoe", model.eject(slot))  # into the shoe, unasked
        for _ in range(5):
            rig.clock.advance(1.0)
            await sup.settle()
    snap = sup.snapshot()
    loads = [e for e in logs if e.get("event_kind") == "BatchLoaded" or e.get("input") == "BatchToShoe"]
    assert loads, "the shoe's report of the load left no trace"
    assert snap["batch_in_shoe"] == back and snap["cards_in_shoe"] > 0, (snap["asking"], loads)
