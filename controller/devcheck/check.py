"""``tablectl device check``: one device, real or simulated, against its page in docs/devices/.

Each requirement ends as one Outcome: ``pass``, ``fail`` (what was expected, what came) or
``not checked`` (why). A Modbus device is read in full (every documented register, against its
range), asked what the Modbus rules make it answer (exceptions 01, 02, 03; other unit ids;
broadcasts and framing on RTU, pipelining on TCP), driven through every row of its "Commands by
state" table (devices/spec.py) that can be reached without harm, and watched while the person at
the device does the physical steps it asks for. A frame device (the stub counter) is listened to
and asked for its count. Nothing secret is printed: a card or a reader answer is checked for its
shape, never named.
"""

from __future__ import annotations

from controller.devcheck.frame_check import FrameCheck
from controller.devcheck.modbus_check import ModbusCheck
from controller.devcheck.report import Ask, Outcome, Report
from controller.devcheck.sim_port import SimPort
from devices.config import DeviceConfig, TransportKind
from devices.spec import CommandRow
from devices.variants import variant_of


async def check_device(
    config: DeviceConfig,
    *,
    ask: Ask,
    step_timeout_s: float,
    neighbours: list[DeviceConfig],
    out_of_order: bool = False,
    sim_control: str | None = None,
) -> Report:
    """``out_of_order``: also drive mark_out_of_order, which nothing but the vendor's service
    procedure undoes on the device. ``sim_control``: the simulator's control port, through which
    the check puts the device into the states a real one is put into by hand (sim_port.py)."""
    report = Report()
    if config.profile.registers:
        sim = SimPort(sim_control, config.name) if sim_control is not None else None
        check = ModbusCheck(config, report, ask, step_timeout_s, neighbours, sim)
        check.out_of_order = out_of_order
        await check.run()
    else:
        frame_check = variant_of(config.profile).load_check()  # the variant's: FrameCheck or its like
        assert issubclass(frame_check, FrameCheck), frame_check
        await frame_check(config, report, ask, step_timeout_s).run()
    return report


def transport_note(config: DeviceConfig) -> str:
    ep = config.endpoint
    if ep.transport in (TransportKind.MODBUS_TCP, TransportKind.MQTT):
        return f"{ep.transport.value} {ep.host}:{ep.port}"
    return f"{ep.transport.value} {ep.path}"


__all__ = ["CommandRow", "Outcome", "Report", "check_device", "transport_note"]
