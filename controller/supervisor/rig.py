"""A whole table in one process: the simulated devices on real sockets and ptys, the supervisor
talking to them over the wire, and a virtual dealer acting on the simulators. Used by
``tablectl demo``, the gaming-day benchmark and the end-to-end tests.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from controller.bounded import read_toml
from controller.shipped import shipped_dir, table_file
from controller.supervisor.config import TableConfig, load_table_config
from controller.supervisor.supervisor import Supervisor
from controller.supervisor.telemetry import Telemetry
from devices.config import DeviceConfig, TransportKind
from sim.clock import VirtualClock
from sim.dealer import VirtualDealer
from sim.table import SimTable

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests and benchmarks run from it)
TABLES = shipped_dir("tables")
EPOCH = 1_800_000_000.0  # the virtual table's wall clock starts here (2027-01-15)


def quiet_wire(devices: list[DeviceConfig]) -> list[DeviceConfig]:
    """No inter-request gap on the simulators' ptys: the gap protects RS-485 transceivers turning
    the line around, and a pty has none; it would otherwise dominate a virtual gaming day."""
    return [
        d.with_endpoint(gap_s=0.0) if d.endpoint.transport is TransportKind.MODBUS_RTU else d for d in devices
    ]


def fast_backoff(devices: list[DeviceConfig]) -> list[DeviceConfig]:
    from controller.backoff import BackoffPolicy

    quick = BackoffPolicy(0.01, 0.1, 0.25)
    return [replace(d, backoff=quick, timeout_s=min(d.timeout_s, 0.3)) for d in devices]


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


def concrete_config(game: str, sim: SimTable, out: Path, poll_interval_s: float = 0.02) -> Path:
    """The example table file pointed at where ``sim`` listens (for ``tablectl run`` against
    simulators started in another process: tests and benchmarks)."""
    src = table_file(game)
    doc = read_toml(src)
    lines = ["[table]"]
    table = doc["table"]
    table["game"] = str((src.parent / table["game"]).resolve())
    lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    where = {c.name: c.endpoint for c in sim.driver_configs()}
    for name, section in doc["devices"].items():
        section.pop("sim", None)
        section["profile"] = str((src.parent / section["profile"]).resolve())
        ep = where[name]
        if ep.port:
            section["port"] = ep.port
        if ep.path:
            section["path"] = ep.path
        section["gap_ms"] = 0 if section["transport"] == "modbus-rtu" else section.get("gap_ms", 0)
        section["poll_interval_s"] = poll_interval_s
        section["backoff_initial_s"] = 0.05
        section["backoff_max_s"] = 0.5
        lines.append(f"[devices.{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in section.items()]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@dataclass
class Rig:
    config: TableConfig
    sim: SimTable
    supervisor: Supervisor
    clock: VirtualClock
    dealer: VirtualDealer


@contextlib.asynccontextmanager
async def virtual_table(
    config_path: Path,
    journal_path: Path,
    *,
    seed: int | None = None,
    boxes: int = 6,
    telemetry: Telemetry | None = None,
    pace_s: float = 0.0,
    start_at: float = 0.0,
    wire: Callable[[list[DeviceConfig]], list[DeviceConfig]] | None = None,
) -> AsyncIterator[Rig]:
    """Simulators, supervisor (polling on demand, virtual clock) and dealer, started and stopped.
    ``wire`` may change where the supervisor finds each device (a test's proxy in between)."""
    import asyncio

    config = load_table_config(config_path, side="both")  # the supervisor and the simulators
    clock = VirtualClock(start_at)
    sim = SimTable.from_config(config, seed=seed, clock=clock)
    await sim.start()
    supervisor: Supervisor | None = None
    try:
        supervisor = Supervisor(
            config, journal_path, clock=clock, wall=lambda: EPOCH + clock.now(), telemetry=telemetry,
            devices=fast_backoff(quiet_wire((wire or list)(sim.driver_configs()))),
            rng=random.Random(seed), poll_on_demand=True,
        )  # fmt: skip
        await supervisor.start()
        async with asyncio.timeout(10):
            # A frame device (the stub counter) speaks only when its heartbeat is due on the
            # virtual clock: move the clock a second at a time until every device has answered.
            while not supervisor.ready.is_set():
                clock.advance(1.0)
                await supervisor.settle()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(supervisor.ready.wait(), 0.05)

        async def pace() -> None:
            await asyncio.sleep(pace_s)

        dealer = VirtualDealer(
            sim, supervisor, boxes=boxes, rng=random.Random(seed), pace=pace if pace_s > 0 else None
        )
        yield Rig(config, sim, supervisor, clock, dealer)
    finally:
        if supervisor is not None:
            await supervisor.stop()
        await sim.stop()
