"""The device check of the Acme CS-2 shoe (devices/variants/acme_cs2.py): the reference shoe's
steps (the load and one draw, in the profile's 32-bit counter) and one of its own, the door: its
bit reads 1 while the door is open and 0 once it is closed, and opening it counts no draw. A
simulator's door is opened through its control port (the ``condition`` fault); a real one by
the person at the shoe."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from controller.devcheck.steps import SHOE, physical_shoe

if TYPE_CHECKING:
    from controller.devcheck.modbus_check import ModbusCheck

DOOR = "door_open"
STEP = "the door: door_open reads 1 while the door is open and 0 once it is closed; no draw counted"


async def _physical(c: ModbusCheck) -> None:
    await physical_shoe(c)
    await _door(c)


def _door_is(c: ModbusCheck, value: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        s = await c.snapshot()
        return s is not None and s[DOOR][0] == value

    return check


async def _set_door(c: ModbusCheck, open_: bool) -> None:
    if c.sim is not None:
        await c.sim.fault("condition", device=c.sim.device, name=DOOR, on=open_)


async def _door(c: ModbusCheck) -> None:
    before = await c.snapshot()
    assert before is not None
    seq = before["draw_seq"][0]
    await _set_door(c, True)
    if not await c.person("open_door", "open the shoe's door", _door_is(c, 1)):
        c.report.skip("step.door", STEP, "the door was not opened in time")
        return
    await _set_door(c, False)
    closed = await c.person("close_door", "close the shoe's door", _door_is(c, 0))
    after = await c.snapshot()
    drawn = -1 if after is None else after["draw_seq"][0] - seq
    c.report.add(
        "step.door", STEP, closed and drawn == 0, "door_open 1, then 0; draw_seq unchanged",
        f"door_open 1, then {0 if closed else 1}; draw_seq {drawn:+d}",
    )  # fmt: skip


STEPS = replace(SHOE, physical=_physical)
