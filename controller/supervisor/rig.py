"""A whole table in one process: the simulated devices on real sockets and ptys, the supervisor
talking to them over the wire, and the virtual dealer acting on the simulators. Used by
``tablectl demo``, the gaming-day benchmark and the end-to-end tests.

The pieces are those of ``tablectl run`` beside ``tablectl sim --dealer``: the same Supervisor, the
same simulators (sim/table.py) and the same dealer (sim/wire_dealer.py), which knows only the
table's public state. One process keeps them on one virtual clock, so a gaming day runs in
seconds: instead of MQTT, the dealer's link (``SupervisorLink``) hands it the very snapshot the
telemetry publishes and sends the floor's commands through the command API the MQTT listener
calls; instead of waiting for the supervisor's own polling, it moves the clock and has the
devices the dealer touched polled at once. This module and demo.py are the only places the
controller imports the simulators.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from controller.shipped import shipped_dir, table_file
from controller.supervisor.config import TableConfig, load_table_config
from controller.supervisor.supervisor import Supervisor
from controller.supervisor.telemetry import Telemetry
from controller.table_file import read_table_doc
from devices.config import DeviceConfig, TransportKind
from devices.profiles import DeviceKind
from sim.clock import VirtualClock
from sim.table import SimTable
from sim.wire_dealer import TableStopped, WireDealer

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests and benchmarks run from it)
TABLES = shipped_dir("tables")
# A test's virtual table dates its records from here (2027-01-15), the same in every run; the
# demo starts its wall clock at the real now instead (wall_start), so its journal and the archive
# see today's gaming day.
EPOCH = 1_800_000_000.0


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


def toml_value(v: Any) -> str:
    """A TOML value as written in a table file (the scalars and arrays table files use)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


def concrete_config(
    game: str, sim: SimTable, out: Path, poll_interval_s: float = 0.02,
    changes: Mapping[str, Mapping[str, object]] | None = None,
) -> Path:  # fmt: skip
    """The example table file pointed at where ``sim`` listens (for ``tablectl run`` against
    simulators started in another process: tests and benchmarks). A ``sim`` built with a
    direct-insert shuffler gets a copy of the game file that declares one (ruling G13).
    ``changes``: settings of a device's section changed (None: taken out), e.g. a keypad on
    Modbus TCP where the example has it on RS-485."""
    src = table_file(game)
    doc = read_table_doc(src)  # with the shared base it extends merged in
    lines = ["[table]"]
    table = doc["table"]
    table["game"] = str((src.parent / table["game"]).resolve())
    if sim.direct_insert and sim.by_kind(DeviceKind.SHOE) is not None:
        game_copy = out.with_name(out.stem + "-game.toml")
        text = Path(table["game"]).read_text(encoding="utf-8")
        game_copy.write_text(
            text.replace("direct_insert_shuffler = false", "direct_insert_shuffler = true"), encoding="utf-8"
        )
        table["game"] = str(game_copy.resolve())
    lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    where = {c.name: c.endpoint for c in sim.driver_configs()}
    for name, section in doc["devices"].items():
        section.pop("sim", None)
        for key, value in (changes or {}).get(name, {}).items():
            if value is None:
                section.pop(key, None)
            else:
                section[key] = value
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
        lines += [f"{k} = {toml_value(v)}" for k, v in section.items()]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


SECONDS_PER_ACTION = 1.0  # virtual time a brisk dealer takes per action
WAIT_STEP_S = 5.0  # how far the clock moves while the dealer waits (for the shuffler, say)
# The controller must see a shuffle cycle (30 s on the reference shuffler) while it runs: on a
# virtual clock nothing polls by itself, so the link has the shuffler looked at this often.
SHUFFLER_POLL_S = 5.0


class SupervisorLink:
    """The virtual dealer's link to a supervisor in this process (see the module's docstring)."""

    def __init__(
        self, supervisor: Supervisor, sim: SimTable, clock: VirtualClock, *, floor: str = "floor-1"
    ) -> None:
        self.sup = supervisor
        self.clock = clock
        self.floor_name = floor
        self.names = {info.config.kind: name for name, info in sim.devices.items()}
        self.pace: Callable[[], Awaitable[None]] | None = None  # between actions (the live view)
        self._shuffler_seen = clock.now()
        shuffler = sim.by_kind(DeviceKind.SHUFFLER)
        self._shuffler = None if shuffler is None else shuffler.model

    async def state(self) -> dict[str, Any]:
        return self.sup.snapshot()

    async def wait(self) -> dict[str, Any]:
        self.clock.advance(WAIT_STEP_S)
        self._shuffler_seen = self.clock.now()
        if self.pace is not None:
            await self.pace()
        await self.sup.settle()
        return self.sup.snapshot()

    async def touched(self, kind: DeviceKind) -> None:
        self.clock.advance(SECONDS_PER_ACTION)
        kinds = {kind}
        if self.clock.now() - self._shuffler_seen >= SHUFFLER_POLL_S and self._shuffling():
            kinds.add(DeviceKind.SHUFFLER)
        if DeviceKind.SHUFFLER in kinds:
            self._shuffler_seen = self.clock.now()
        if self.pace is not None:
            await self.pace()
        if kind is DeviceKind.STUB_COUNTER:
            # The count comes over the line on its own (no poll asks for it): wait for its outcome.
            await self.sup.wait_for(lambda: self._asked() != "stub" and self.sup.idle())
            kinds.discard(kind)
        await self.sup.settle(*(self.names[k] for k in kinds if k in self.names))

    def _asked(self) -> str | None:
        ask = self.sup.snapshot().get("asking")
        return ask.get("what") if isinstance(ask, dict) else None

    def _shuffling(self) -> bool:
        """A person at the table hears the shuffler working (or sees its fault light)."""
        return self._shuffler is not None and self._shuffler.state.value in ("shuffling", "jammed", "fault")

    async def floor(self, command: str, args: dict[str, Any]) -> None:
        result = await self.sup.command(command, args, self.floor_name, "floor")
        if not result["ok"]:
            raise TableStopped(f"{command}: {result['error']}")


@dataclass
class Rig:
    config: TableConfig
    sim: SimTable
    supervisor: Supervisor
    clock: VirtualClock
    dealer: WireDealer
    link: SupervisorLink


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
    wall_start: float = EPOCH,
    wire: Callable[[list[DeviceConfig]], list[DeviceConfig]] | None = None,
) -> AsyncIterator[Rig]:
    """Simulators, supervisor (polling on demand, virtual clock) and dealer, started and stopped.
    ``wire`` may change where the supervisor finds each device (a test's proxy in between)."""
    import asyncio

    config = load_table_config(config_path, side="both")  # the supervisor and the simulators
    clock = VirtualClock(start_at)
    opts = config.options
    sim = SimTable(
        list(config.devices), opts.spec, seed=seed, clock=clock, decks=opts.decks,
        direct_insert=opts.direct_insert_shuffler,
    )  # fmt: skip
    await sim.start()
    supervisor: Supervisor | None = None
    try:
        supervisor = Supervisor(
            config, journal_path, clock=clock, wall=lambda: wall_start + clock.now(), telemetry=telemetry,
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

        link = SupervisorLink(supervisor, sim, clock)
        link.pace = pace if pace_s > 0 else None
        side = bool(opts.optional_wagers)
        dealer = WireDealer(sim, link, boxes=boxes, side_wagers=side)
        yield Rig(config, sim, supervisor, clock, dealer, link)
    finally:
        if supervisor is not None:
            await supervisor.stop()
        await sim.stop()
