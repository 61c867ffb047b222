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
from devices.profiles import DeviceKind
from tests.supervisor.conftest import GUARD_S, assert_journal_sound, journal_kinds

MakeRig = Callable[..., Awaitable[Rig]]
RACK = "(b)(5)"  # 673a.3(b)(5), 665a.3(b)(5), 685a.3(b)(5): one batch in the discard rack


class ShufflerReadLate:
    """The dealer's link, except that the dealer's touching the shuffler polls nothing: the
    shuffler is read only when the supervisor reads it (or time passes), as over the wire."""

    def __init__(self, link: SupervisorLink) -> None:
        self.link = link

    async def state(self) -> dict[str, Any]:
        return await self.link.state()

    async def wait(self) -> dict[str, Any]:
        return await self.link.wait()

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
