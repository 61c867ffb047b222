"""Device observations in the order they happened, whatever the poll rates (issue 21).

At a shoe change the used batch goes back into its shuffler slot at the moment the new batch goes
into the shoe (docs/simulators.md; a direct-insert shuffler does both itself). Over the wire the
shoe is read every 50 ms and the shuffler every 100 ms, so the controller may read the burn (and a
Start Game) before it reads the used batch back in the shuffler: 673a.3(b)(5) would see two
batches in the discard rack and Start Game would be refused. Here the dealer never looks at the
shuffler itself (the link below withholds those polls): only the supervisor's own reads of it
order what the shoe and keypad said. Everything runs on the virtual clock: nothing sleeps, and a
window that waits is released by a poll or by moving the clock, never by real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from controller.supervisor.rig import Rig, SupervisorLink, table_file, virtual_table
from controller.supervisor.settle import SETTLE_S
from devices.events import ButtonPressed, Key, ShufflerState
from devices.profiles import DeviceKind
from tests.supervisor.conftest import GUARD_S, assert_journal_sound, journal_kinds
from tests.supervisor.test_restart_reconcile import bench

MakeRig = Callable[..., Awaitable[Rig]]
RACK = "(b)(5)"  # 673a.3(b)(5), 665a.3(b)(5), 685a.3(b)(5): one batch in the discard rack


class Asked(Exception):
    """The table asks for what the test stops the dealer at."""


class ShufflerReadLate:
    """The dealer's link, except that the dealer's touching the shuffler polls nothing: the
    shuffler is read only when the supervisor reads it (or time passes), as over the wire.
    ``stop_at``: the dealer stops (Asked) when the table asks for that with a new batch in play."""

    def __init__(self, link: SupervisorLink, stop_at: str | None = None) -> None:
        self.link, self.stop_at = link, stop_at
        self.first_back = link.sup.table.shoe_back

    def _seen(self, snap: dict[str, Any]) -> dict[str, Any]:
        ask = snap.get("asking")
        new_batch = snap.get("batch_in_shoe") not in (None, self.first_back)
        if new_batch and isinstance(ask, dict) and ask.get("what") == self.stop_at:
            raise Asked(self.stop_at)
        return snap

    async def state(self) -> dict[str, Any]:
        return self._seen(await self.link.state())

    async def wait(self) -> dict[str, Any]:
        return self._seen(await self.link.wait())

    async def touched(self, kind: DeviceKind) -> None:
        if kind is DeviceKind.SHUFFLER:
            self.link.clock.advance(1.0)
            return
        await self.link.touched(kind)

    async def floor(self, command: str, args: dict[str, Any]) -> None:
        await self.link.floor(command, args)


def direct_insert_table(tmp_path: Path, game: str) -> Path:
    """The shipped table of ``game`` with a shuffler that loads the shoe itself (ruling G13)."""
    src = table_file(game)
    text = src.read_text(encoding="utf-8")
    game_src = (src.parent / "../games" / f"{game}.toml").resolve()
    game_copy = tmp_path / f"{game}-game.toml"
    game_copy.write_text(
        game_src.read_text(encoding="utf-8").replace(
            "direct_insert_shuffler = false", "direct_insert_shuffler = true"
        ),
        encoding="utf-8",
    )
    text = text.replace(f'game = "../games/{game}.toml"', f'game = "{game_copy}"')
    text = text.replace('profile = "../devices/', f'profile = "{(src.parent / "../devices").resolve()}/')
    out = tmp_path / f"{game}-direct.toml"
    out.write_text(text, encoding="utf-8")
    return out


async def change_shoe(rig: Rig) -> None:
    """The floor orders a reshuffle between rounds (673a.5(f)); the next round is dealt from
    the other batch."""
    shoes = rig.dealer.stats.shoes
    await rig.link.floor("reshuffle_ordered", {})
    await rig.dealer.play_round()
    assert rig.dealer.stats.shoes == shoes + 1


def refusals(logs: list[dict[str, Any]]) -> list[str]:
    return [str(e.get("error")) for e in logs if e.get("event") == "refused"]


@pytest.mark.parametrize("game", ["double-attack", "down-under"])
async def test_the_burn_read_before_the_used_batch_is_no_alarm(game: str, table_rig: MakeRig) -> None:
    rig = await table_rig(game)
    rig.dealer.link = ShufflerReadLate(rig.link)
    await rig.dealer.open_table()
    await rig.dealer.play_round()
    with capture_logs() as logs:
        for _ in range(3):
            await change_shoe(rig)
    raised = [p for k, p in journal_kinds(rig.supervisor.journal_path) if k == "alarm_raised"]
    assert raised == []
    assert refusals(logs) == []
    windows = [e for e in logs if e.get("event") == "settle_window"]
    assert windows and all(e["by"] == "shuffler_read" for e in windows)
    assert_journal_sound(rig)


async def test_a_direct_insert_shuffler_returning_the_used_batch_at_the_eject(tmp_path: Path) -> None:
    config = direct_insert_table(tmp_path, "double-attack")
    async with asyncio.timeout(GUARD_S), virtual_table(config, tmp_path / "j.db", seed=5) as rig:
        assert rig.sim.direct_insert
        rig.dealer.link = ShufflerReadLate(rig.link)
        await rig.dealer.open_table()
        await rig.dealer.play_round()
        with capture_logs() as logs:
            for _ in range(2):
                await change_shoe(rig)
        raised = [p for k, p in journal_kinds(rig.supervisor.journal_path) if k == "alarm_raised"]
        assert raised == []
        assert refusals(logs) == []
        assert_journal_sound(rig)


def used_batch_left_in_the_rack(rig: Rig) -> None:
    """The dealer puts the new batch in the shoe and leaves the used one in the discard rack."""
    model = rig.sim.devices["shuffler"].model
    load_shoe = rig.sim.load_shoe

    def forgetful(cards: list[Any], back: str, cover_from_bottom: int | None = None) -> None:
        load_shoe(cards, back, cover_from_bottom)  # the simulator puts the used batch back ...
        for s in model.slots.values():  # ... and this dealer takes it out again
            if s.state is ShufflerState.IDLE and s.cards:
                s.cards, s.state = [], ShufflerState.EMPTY

    rig.sim.load_shoe = forgetful  # type: ignore[method-assign]


async def test_a_real_wrong_batch_is_still_alarmed_at_the_shuffler_s_read(table_rig: MakeRig) -> None:
    rig = await table_rig("down-under")
    await rig.dealer.open_table()
    await rig.dealer.play_round()
    # After the burn the table asks for no bets while the used batch is in the rack (3(b)(5)):
    # Start Game would be refused; it says what it waits for.
    rig.dealer.link = ShufflerReadLate(rig.link, stop_at="wait")
    used_batch_left_in_the_rack(rig)
    await rig.link.floor("reshuffle_ordered", {})
    with capture_logs() as logs, pytest.raises(Asked):
        await rig.dealer.play_round()  # the cut, the stack into the shoe, the burn
    records = journal_kinds(rig.supervisor.journal_path)
    raised = [p for k, p in records if k == "alarm_raised"]
    assert [(a["section"], a["halts"]) for a in raised] == [("685a.3(b)(5)", False)]
    kinds = [k for k, _ in records]
    burn_at = len(kinds) - 1 - kinds[::-1].index("card_burned")  # the new batch's burn
    assert kinds[burn_at + 1] == "alarm_raised"  # decided with the burn, in its step
    (window,) = [e for e in logs if e.get("event") == "settle_window"]
    assert window["by"] == "shuffler_read" and window["held"] == 1 and window["held_s"] <= SETTLE_S
    assert_journal_sound(rig)


async def test_a_shuffler_that_does_not_answer_holds_nothing_past_the_window(table_rig: MakeRig) -> None:
    rig = await table_rig("down-under")
    await rig.dealer.open_table()
    await rig.dealer.play_round()
    rig.dealer.link = ShufflerReadLate(rig.link, stop_at="burn")
    used_batch_left_in_the_rack(rig)
    await rig.link.floor("reshuffle_ordered", {})
    with pytest.raises(Asked):
        await rig.dealer.play_round()  # the cut and the stack into the shoe
    sup = rig.supervisor
    settle = sup.device_events.settle
    assert settle is not None
    rig.sim.devices["shuffler"].register_sim.faults.hold()  # its answers are late, for ever
    burns = [k for k, _ in journal_kinds(sup.journal_path)].count("card_burned")
    with capture_logs() as logs:
        rig.dealer.hands.draw()  # the burn
        sup.progress.poke["shoe"].set()
        await sup.wait_for(lambda: settle.holding)
        assert [k for k, _ in journal_kinds(sup.journal_path)].count("card_burned") == burns
        rig.clock.advance(SETTLE_S)  # the window's deadline on the table's clock
        await sup.wait_for(lambda: not settle.holding and sup.idle())
    rig.sim.devices["shuffler"].register_sim.faults.release()
    (window,) = [e for e in logs if e.get("event") == "settle_window"]
    assert window["by"] == "deadline" and window["held_s"] == SETTLE_S
    kinds = [k for k, _ in journal_kinds(sup.journal_path)]
    assert kinds[-2:] == ["card_burned", "alarm_raised"]


async def test_a_restart_within_the_window_loses_nothing(tmp_path: Path) -> None:
    """What is held is neither journalled nor acted on, and its counters are not marked seen: the
    controller killed within the window (its process gone, the devices on) reads the burn and
    the Start Game again from the shoe's and the keypad's histories, and takes them then."""
    async with bench(tmp_path) as b:
        sup = await b.opened(rounds=1)
        assert b.dealer is not None
        b.dealer.link = ShufflerReadLate(SupervisorLink(sup, b.sim, b.clock), stop_at="burn")
        await sup.command("reshuffle_ordered", {}, "floor-1", "floor")
        with pytest.raises(Asked):
            await b.dealer.play_round()  # the cut and the stack into the shoe
        settle = sup.device_events.settle
        assert settle is not None
        shuffler = b.sim.devices["shuffler"].register_sim
        assert shuffler is not None
        shuffler.faults.hold()  # the shuffler's next answer is late: the window stays open
        before = journal_kinds(b.journal)
        burn = b.model("shoe").draw()
        keypad = b.model("keypad")
        for box in (1, 2):
            keypad.place_bet(box, 1)
        keypad.press(Key.START_GAME)
        for name in ("shoe", "keypad"):
            sup.progress.poke[name].set()
        await sup.wait_for(lambda: any(isinstance(e, ButtonPressed) for e in settle.held))
        assert journal_kinds(b.journal) == before  # held: not journalled, not acted on
        await b.stop()  # the appliance goes down within the window
        shuffler.faults.release()
        with capture_logs() as logs:
            sup = await b.start()
        new = journal_kinds(b.journal)[len(before) :]
        kinds = [k for k, _ in new]
        assert "alarm_raised" not in kinds
        assert [p["card"] for k, p in new if k == "card_burned"] == [str(burn.card)]
        assert kinds.index("batch_to_shuffler") < kinds.index("card_burned") < kinds.index("round_started")
        assert not [e for e in logs if e.get("event") == "refused"]
        assert sup.table.in_round
