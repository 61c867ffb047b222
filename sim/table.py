"""The simulated devices of one table, built from its config file and wired together.

The shuffler's eject puts its shuffled stack out for the dealer (``tray``), who has it cut, places
the cover card and loads the shoe (673a.5(b)-(d)); a direct-insert shuffler (``direct_insert``,
and the device tests' tables) puts it into the shoe itself. Either way the batch that was in the
shoe goes back into the emptied shuffler slot, as a dealer would carry it from the discard rack.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.clock import REAL_CLOCK, Clock
from controller.games import GameSpec
from devices.config import NETWORK_MODBUS, DeviceConfig, ModbusTls, TransportKind
from devices.events import Slot
from devices.profiles import DeviceKind
from sim.frame_server import MqttSink, PtySink, StubCounterSim
from sim.modbus_server import ModbusRtuSim, ModbusTcpSim, RegisterSim
from sim.models import DealtCard, ShufflerModel
from sim.table_file import SimTableFile, read_table_file
from sim.timing import NO_TIMING, TableTiming
from sim.variants import simulator_of


@dataclass
class SimDeviceInfo:
    config: DeviceConfig
    model: Any
    register_sim: RegisterSim | None = None
    frame_sim: StubCounterSim | None = None
    server: ModbusTcpSim | ModbusRtuSim | None = None

    @property
    def where(self) -> str:
        if isinstance(self.server, ModbusTcpSim):
            return f"{self.server.host}:{self.server.port}"
        if isinstance(self.server, ModbusRtuSim):
            return self.server.path
        return self.frame_sim.where if self.frame_sim is not None else "?"

    def line(self) -> str:
        ep = self.config.endpoint
        dev_id = str(self.config.device_id) if self.register_sim is not None else "-"
        return (
            f"{self.config.name}  kind={self.config.kind.value}  transport={ep.transport.value}"
            f"  at={self.where}  device_id={dev_id}"
        )


def read_table(path: pathlib.Path) -> tuple[GameSpec, list[DeviceConfig]]:
    """The game and the device configs of one table file (sim/table_file.py reads it)."""
    cfg = read_table_file(path)
    return cfg.game, cfg.devices


class SimTable:
    def __init__(
        self,
        devices: list[DeviceConfig],
        game: GameSpec,
        *,
        seed: int | None = None,
        clock: Clock = REAL_CLOCK,
        decks: int | None = None,
        at_configured: bool = False,
        direct_insert: bool = False,
        timing: TableTiming = NO_TIMING,
        paced_rtu: bool = False,
    ) -> None:
        """``paced_rtu``: each RTU line carries its frames in their time at the line's baud and
        framing (sim/wire_pace.py) instead of at once, as a bare pty would.

        ``at_configured``: listen on the configured TCP ports and make each configured serial
        path a link to its pty (``tablectl sim``, for a ``tablectl run`` of the same file);
        otherwise free ports and private ptys, devices that share a port or line still sharing one
        (tests, benchmarks and the demo, many of which run at once on one machine)."""
        self.at_configured = at_configured
        self.paced_rtu = paced_rtu
        self.direct_insert = direct_insert
        self.game = game
        self.decks = decks or game.default_decks
        self.clock = clock
        self.seed = seed
        self.timing = timing
        self.devices: dict[str, SimDeviceInfo] = {}
        self._tcp: list[ModbusTcpSim] = []
        self._rtu: dict[str, ModbusRtuSim] = {}
        self._frame_sims: list[StubCounterSim] = []
        self._shoe_batch: list[DealtCard] = []
        # Without a shoe (DJ Wild, dealt from the hand, 687a.9), or where the stack is cut before
        # it goes in the shoe, the shuffler puts its shuffled cards out here for the dealer to take
        # up: (slot, back, cards).
        self.tray: tuple[Slot, str, list[DealtCard]] | None = None
        self.on_tray: list[Callable[[], None]] = []  # told when the shuffler puts cards out
        for cfg in devices:
            self.devices[cfg.name] = SimDeviceInfo(cfg, self._model(cfg))
        self._wire()

    @classmethod
    def from_config(
        cls,
        cfg: SimTableFile,
        *,
        seed: int | None = None,
        clock: Clock = REAL_CLOCK,
        at_configured: bool = False,
        timing_seed: int | None = None,
    ) -> SimTable:
        """The simulators of a table file, with its game and its decks per batch; with
        ``timing_seed``, device timing varied by it (sim/timing.py)."""
        names = [d.name for d in cfg.devices]
        return cls(
            list(cfg.devices),
            cfg.game,
            seed=seed,
            clock=clock,
            decks=cfg.decks,
            at_configured=at_configured,
            direct_insert=cfg.direct_insert,
            timing=NO_TIMING if timing_seed is None else TableTiming.from_seed(timing_seed, names),
        )

    @classmethod
    def from_file(
        cls,
        path: pathlib.Path,
        *,
        seed: int | None = None,
        clock: Clock = REAL_CLOCK,
        at_configured: bool = False,
    ) -> SimTable:
        cfg = read_table_file(path)
        return cls.from_config(cfg, seed=seed, clock=clock, at_configured=at_configured)

    def _model(self, cfg: DeviceConfig) -> Any:
        """The model of the device's variant (sim/variants.py), built for this table."""
        return simulator_of(cfg.profile).build(cfg, self)

    def by_kind(self, kind: DeviceKind) -> SimDeviceInfo | None:
        return next((d for d in self.devices.values() if d.config.kind is kind), None)

    def _wire(self) -> None:
        shoe = self.by_kind(DeviceKind.SHOE)
        for info in self.devices.values():
            cfg = info.config
            if cfg.profile.registers:
                info.register_sim = RegisterSim(
                    cfg.kind, info.model, cfg.profile, cfg.device_id, simulator=simulator_of(cfg.profile)
                )
                info.register_sim.latency = self.timing.latency(cfg.name)
                info.register_sim.phase_s = self.timing.phase_s.get(cfg.name, 0.0)
            if cfg.kind is DeviceKind.SHUFFLER:
                assert info.register_sim is not None
                to_shoe = shoe is not None and self.direct_insert
                hook = self._eject_hook(info.model) if to_shoe else self._tray_hook(info.model)
                info.register_sim.on_command = hook

    def _tray_hook(self, shuffler: ShufflerModel) -> Callable[[str, Any], None]:
        def on_command(name: str, result: Any) -> None:
            if name == "eject_to_shoe" and isinstance(result, list):
                slot = shuffler.last_ejected
                assert slot is not None
                self.tray = (slot, shuffler.slots[slot].back, list(result))
                for told in self.on_tray:
                    told()

        return on_command

    def _eject_hook(self, shuffler: ShufflerModel) -> Callable[[str, Any], None]:
        def on_command(name: str, result: Any) -> None:
            if name != "eject_to_shoe" or not isinstance(result, list):
                return
            slot = shuffler.last_ejected
            assert slot is not None
            self.load_shoe(result, shuffler.slots[slot].back)

        return on_command

    def load_shoe(self, cards: list[DealtCard], back: str, cover_from_bottom: int | None = None) -> None:
        """A batch into the shoe (by the shuffler, or by the dealer with the cover card placed
        ``cover_from_bottom`` cards from the bottom); the old batch back into its own slot."""
        sh, shoe = self.by_kind(DeviceKind.SHUFFLER), self.by_kind(DeviceKind.SHOE)
        assert sh is not None and shoe is not None
        shuffler: ShufflerModel = sh.model
        old_batch, self._shoe_batch = self._shoe_batch, list(cards)
        old_back = shoe.model.batch_back
        shoe.model.load(cards, back, cover_from_bottom)
        home = next(
            (s for s, b in shuffler.slots.items() if b.back == old_back and not b.cards),
            None,
        )
        if old_batch and home is not None:
            # Cards from the discard rack and the shoe go back to their own slot, face down.
            shuffler.put_back(home, [dc.card for dc in old_batch])

    def eject_direct(self, slot: Slot) -> None:
        """Eject without a Modbus master (for a virtual dealer or a test)."""
        sh, shoe = self.by_kind(DeviceKind.SHUFFLER), self.by_kind(DeviceKind.SHOE)
        assert sh is not None and shoe is not None
        cards = sh.model.eject(slot)
        self._eject_hook(sh.model)("eject_to_shoe", cards)

    async def start(self) -> None:
        # One server per address; a modbus-tls one serves with its devices' certificate.
        tcp_groups: dict[tuple[str, int, ModbusTls | None], list[RegisterSim]] = {}
        rtu_groups: dict[str, list[RegisterSim]] = {}
        for info in self.devices.values():
            ep = info.config.endpoint
            if info.register_sim is not None:
                if ep.transport in NETWORK_MODBUS:
                    # port 0: a server each
                    key = (ep.host, ep.port or -len(tcp_groups) - 1, info.config.sim_tls)
                    tcp_groups.setdefault(key, []).append(info.register_sim)
                else:
                    rtu_groups.setdefault(ep.path, []).append(info.register_sim)
            else:
                sink: PtySink | MqttSink
                if ep.transport is TransportKind.MQTT:
                    cfg = info.config
                    # The device's own account from its sim section, not the appliance's.
                    sink = MqttSink(
                        ep.host, ep.port, ep.topic, label=cfg.source or cfg.name,
                        access=cfg.sim_mqtt, backoff=cfg.backoff, clock=self.clock,
                    )  # fmt: skip
                else:
                    sink = PtySink(ep.path if self.at_configured else "", ep.serial_framing)
                fs = StubCounterSim(
                    info.model, info.config.profile, sink, clock=self.clock,
                    heartbeat_s=float(info.config.sim.get("heartbeat_s", 1.0)),
                )  # fmt: skip
                info.frame_sim = fs
                self._frame_sims.append(fs)
        try:
            for (host, port, tls), sims in tcp_groups.items():
                at = max(port, 0) if self.at_configured else 0
                srv = ModbusTcpSim(sims, host=host, port=at, tls=tls.context("server") if tls else None)
                await srv.start()
                self._tcp.append(srv)
                for info in self.devices.values():
                    if info.register_sim in sims:
                        info.server = srv
            for path, sims in rtu_groups.items():
                # One line, one speed and framing (devices/config.py makes its devices agree).
                line = next(i.config.endpoint for i in self.devices.values() if i.register_sim in sims)
                link = path if self.at_configured else ""
                rtu = ModbusRtuSim(sims, baudrate=line.baudrate, framing=line.serial_framing, link=link,
                                   paced=self.paced_rtu)  # fmt: skip
                await rtu.start()
                self._rtu[path] = rtu
                for info in self.devices.values():
                    if info.register_sim in sims:
                        info.server = rtu
            for fs in self._frame_sims:
                await fs.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        for fs in self._frame_sims:
            await fs.stop()
        for srv in self._tcp:
            await srv.stop()
        for rtu in self._rtu.values():
            await rtu.stop()
        self._frame_sims, self._tcp, self._rtu = [], [], {}

    def listing(self) -> list[str]:
        return [d.line() for d in self.devices.values()]

    def driver_configs(self) -> list[DeviceConfig]:
        """The table's device configs pointed at where the simulators actually listen."""
        out: list[DeviceConfig] = []
        for info in self.devices.values():
            cfg = info.config
            if isinstance(info.server, ModbusTcpSim):
                cfg = cfg.with_endpoint(port=info.server.port)
            elif isinstance(info.server, ModbusRtuSim):
                cfg = cfg.with_endpoint(path=info.server.path)
            elif info.frame_sim is not None and isinstance(info.frame_sim.sink, PtySink):
                cfg = cfg.with_endpoint(path=info.frame_sim.where)
            out.append(cfg)
        return out
