"""The simulated Acme CS-2 shoe (devices/variants/acme_cs2.py): the reference shoe's model with the
profile's 16-card ring and 32-bit draw counter.
``[devices.<name>.sim] first_draw`` sets where that counter stands when the simulator starts (a
shoe from service), so a table can pass 65,535 and 65,536 in its first shoe. Its door is one of
the profile's conditions: the control port's ``condition`` fault opens and closes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from devices.config import DeviceConfig
from sim import registers
from sim.models import ShoeModel
from sim.variants import Simulator, shoe_model

if TYPE_CHECKING:
    from sim.table import SimTable


def _model(cfg: DeviceConfig, table: SimTable) -> ShoeModel:
    shoe = shoe_model(cfg, table)
    first = int(cfg.sim.get("first_draw", 0))
    if not 0 <= first <= shoe.counter_mask:
        raise ValueError(f"{cfg.source}: sim.first_draw: must be 0-{shoe.counter_mask}")
    shoe.draw_seq = first
    return shoe


SIMULATOR = Simulator(_model, registers.shoe)
