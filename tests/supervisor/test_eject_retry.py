"""An eject the shuffler refuses (a busy or lost reply on a loaded line) is sent again promptly,
after a bounded backoff, not only at the next reconciliation: with nothing else happening that
came from the shuffle-overdue timer, every ``max_cycle_s / 4`` (30 s at the shipped tables), and
the dealer waited that long for the stack (issue 21, the wire soak)."""

from __future__ import annotations

from pathlib import Path

from controller.supervisor.reconcile import EJECT_RETRY
from controller.supervisor.supervisor import Supervisor
from tests.supervisor.conftest import journal_kinds
from tests.supervisor.test_restart_reconcile import Bench, bench


async def _verified(b: Bench) -> Supervisor:
    sup = await b.start()
    for back in sup.table.batches:
        args = {"back": back, "dealer": "dealer-1"}
        assert (await sup.command("inspection_verified", args, "floor-1", "floor"))["ok"]
    await sup.settle()
    return sup


async def _until_cut_offered(b: Bench, sup: Supervisor) -> None:
    shuffler = b.model("shuffler")
    for _ in range(40):  # the first shuffle's cycle on the virtual clock, well inside max_cycle_s / 4
        if sup.table.cut is not None:
            return
        b.clock.advance(shuffler.cycle_s / 8)
        await sup.settle()
    raise AssertionError("no cut offered")


async def test_an_eject_the_shuffler_refused_is_sent_again_after_a_short_backoff(tmp_path: Path) -> None:
    async with bench(tmp_path) as b:  # Down Under: the stack comes out for the cut (685a.5)
        sup = await _verified(b)
        shuffler = b.model("shuffler")
        shuffler.faults.refuse_ejects = 2  # refused twice: the second retry waits longer
        await _until_cut_offered(b, sup)
        await sup.settle()
        assert b.sim.tray is None and shuffler.faults.refuse_ejects == 1
        b.clock.advance(EJECT_RETRY.initial_s)
        await sup.settle()
        assert b.sim.tray is None and shuffler.faults.refuse_ejects == 0  # sent again, refused again
        b.clock.advance(EJECT_RETRY.initial_s)
        await sup.settle()
        assert b.sim.tray is None  # backing off: not yet
        b.clock.advance(EJECT_RETRY.initial_s)
        await sup.settle()
        assert b.sim.tray is not None  # the stack is out for the cut, long before max_cycle_s / 4
        assert sup.max_cycle_s is not None and sup.max_cycle_s / 4 > 3 * EJECT_RETRY.initial_s
        assert sup.max_cycle_s / 4 > EJECT_RETRY.max_s
        assert "alarm_raised" not in [k for k, _ in journal_kinds(b.journal)]


async def test_an_eject_carried_out_is_not_sent_again(tmp_path: Path) -> None:
    async with bench(tmp_path) as b:
        sup = await _verified(b)
        await _until_cut_offered(b, sup)
        await sup.settle()
        assert b.sim.tray is not None
        sent = b.model("shuffler").last_ejected
        for _ in range(4):
            b.clock.advance(EJECT_RETRY.max_s)
            await sup.settle()
        assert b.model("shuffler").last_ejected == sent and b.sim.tray is not None
