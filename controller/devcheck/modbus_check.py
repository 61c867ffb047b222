"""A Modbus device against its page: every documented register read against its range, the
Modbus rules (exceptions 01, 02, 03; other unit ids; broadcasts and framing on RTU, pipelining on
TCP), every reachable row of its "Commands by state" table (devices/spec.py), and the physical
steps a person does at the device (controller/devcheck/steps.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from controller.devcheck.master import Master, read_pdu, write_pdu
from controller.devcheck.report import POLL_S, Ask, Report, Unreachable
from controller.devcheck.sim_port import SimPort
from controller.devcheck.steps import CheckSteps
from devices.config import DeviceConfig
from devices.errors import FrameDecodeError, TransportError
from devices.profiles import Profile
from devices.spec import UNKNOWN, UNKNOWN_CODE
from devices.variants import variant_of


# -- Modbus devices ------------------------------------------------------------------------------
class ModbusCheck:
    def __init__(
        self,
        config: DeviceConfig,
        report: Report,
        ask: Ask,
        step_timeout_s: float,
        neighbours: list[DeviceConfig],
        sim: SimPort | None = None,
    ) -> None:
        self.cfg, self.report, self.ask, self.step_timeout_s = config, report, ask, step_timeout_s
        self.profile: Profile = config.profile
        self.kind = config.kind
        steps = variant_of(self.profile).load_check()
        assert isinstance(steps, CheckSteps), steps
        self.steps: CheckSteps = steps  # the variant's (devices/variants/)
        self.unit = config.device_id
        self.master = Master(config)
        self.neighbours = neighbours  # the table's other devices (ids taken on the same line/address)
        self.command_reg = self.profile.registers.get("command")
        self.out_of_order = False
        # A simulator's control port: the states a real device is put into by hand (sim_port.py).
        self.sim = sim

    async def run(self) -> None:
        try:
            await self.master.open()
        except (OSError, TimeoutError, TransportError) as exc:
            self.report.add(
                "link",
                f"the device can be reached at {self._where()}",
                False,
                "a connection",
                f"{type(exc).__name__}",
            )
            return
        try:
            if not await self.read_map():
                return
            await self.exceptions()
            await self.addressing()
            await self.framing()
            # The rows that mark the device out of order go last: only its vendor's service
            # procedure undoes that, and the physical steps need a device in service.
            await self.commands(out_of_order=False)
            await self.physical()
            await self.commands(out_of_order=True)
            self.timing()
        finally:
            try:
                if self.sim is not None:
                    await self.sim.mend()
            except Unreachable:
                pass  # the port went away meanwhile: the report already says what was checked
            await self.master.close()

    def _where(self) -> str:
        ep = self.cfg.endpoint
        return ep.path if self.master.rtu else f"{ep.host}:{ep.port}"

    # -- reads --------------------------------------------------------------------------
    async def snapshot(self) -> dict[str, list[int]] | None:
        start, count = self.profile.poll_span()
        reply = await self.master.request(self.unit, read_pdu(start, count))
        if reply.pdu is None or reply.pdu[0] != 3 or reply.pdu[1] != 2 * count:
            return None
        words = [int.from_bytes(reply.pdu[2 + 2 * i : 4 + 2 * i], "big") for i in range(count)]
        try:
            return self.profile.decode_block(start, words)
        except FrameDecodeError:
            return None

    async def read_map(self) -> bool:
        start, count = self.profile.poll_span()
        reply = await self.master.request(self.unit, read_pdu(start, count))
        ok = reply.pdu is not None and reply.pdu[0] == 3 and len(reply.pdu) == 2 + 2 * count
        if not self.report.add(
            "read.map",
            f"reads every documented register ({count} words from {start}, function 3)",
            ok,
            f"{2 * count} bytes of registers",
            reply.describe(),
        ):
            return False
        assert reply.pdu is not None
        words = [int.from_bytes(reply.pdu[2 + 2 * i : 4 + 2 * i], "big") for i in range(count)]
        try:
            self.profile.decode_block(start, words)
            self.report.add("read.ranges", "every register within the range its page documents", True)
        except FrameDecodeError as exc:
            self.report.add(
                "read.ranges",
                "every register within the range its page documents",
                False,
                "values in range",
                str(exc).split(": ", 1)[-1],
            )
        return True

    async def exceptions(self) -> None:
        start, _ = self.profile.poll_span()
        end = max(r.address + r.words for r in self.profile.registers.values())  # command block too
        cases = [
            (
                "exception.01",
                "an undocumented function (4, input registers) gets exception 01",
                read_pdu(start, 1, fc=4),
                1,
            ),
            ("exception.02", "a read past the end of the map gets exception 02", read_pdu(end, 1), 2),
            ("exception.03", "a read of 0 registers gets exception 03", read_pdu(start, 0), 3),
            (
                "exception.02.write",
                "a write anywhere but the command block gets exception 02",
                write_pdu(start, [0]),
                2,
            ),
        ]
        for id_, text, pdu, code in cases:
            reply = await self.master.request(self.unit, pdu)
            self.report.add(id_, text, reply.exception == code, f"exception {code:02d}", reply.describe())
        if self.command_reg is not None:
            reg = self.command_reg
            reply = await self.master.request(self.unit, read_pdu(reg.address, reg.count))
            zeros = reply.pdu is not None and reply.pdu[0] == 3 and not any(reply.pdu[2:])
            self.report.add(
                "command.reads_0",
                "the write-only command block reads 0 in every word",
                zeros,
                "zeros",
                reply.describe() if not zeros or reply.pdu is None else "non-zero words",
            )

    def _free_unit(self) -> int:
        taken = {self.unit} | {
            n.device_id for n in self.neighbours if n.endpoint.bus_key == self.cfg.endpoint.bus_key
        }
        return next(u for u in range(247, 0, -1) if u not in taken)

    async def addressing(self) -> None:
        start, _ = self.profile.poll_span()
        other = self._free_unit()
        reply = await self.master.request(other, read_pdu(start, 1))
        self.report.add(
            "unit.other",
            f"a request for another unit id ({other}) is not answered",
            reply.pdu is None,
            "no answer",
            reply.describe(),
        )
        if self.master.rtu:
            reply = await self.master.request(0, read_pdu(start, 1))
            self.report.add(
                "rtu.broadcast.read",
                "a broadcast read (id 0) is not answered",
                reply.pdu is None,
                "no answer",
                reply.describe(),
            )
            if self.command_reg is not None:
                words = [UNKNOWN_CODE] + [0] * (self.command_reg.count - 1)
                reply = await self.master.request(0, write_pdu(self.command_reg.address, words))
                self.report.add(
                    "rtu.broadcast.write",
                    "a broadcast write (id 0) is never answered",
                    reply.pdu is None,
                    "no answer",
                    reply.describe(),
                )
            after = await self.master.request(self.unit, read_pdu(start, 1))
            self.report.add(
                "rtu.after_broadcast",
                "the next request after a broadcast is answered",
                after.pdu is not None and after.pdu[0] == 3,
                "a reply",
                after.describe(),
            )
            return
        alone = not any(n.endpoint.bus_key == self.cfg.endpoint.bus_key for n in self.neighbours)
        if not alone:
            self.report.skip(
                "tcp.unit_ff",
                "a device alone on its address answers unit id 0xFF",
                "another device of the table shares this address (a gateway)",
            )
            return
        reply = await self.master.request(0xFF, read_pdu(start, 1))
        self.report.add(
            "tcp.unit_ff",
            "a device alone on its address answers unit id 0xFF",
            reply.pdu is not None and reply.pdu[0] == 3,
            "a reply",
            reply.describe(),
        )

    async def framing(self) -> None:
        start, _ = self.profile.poll_span()
        m = self.master
        if m.rtu:
            await m.send_raw(b"\x00\xff\x13" + m.frame(self.unit, read_pdu(start, 1)))
            reply = await m.reply(self.unit)
            self.report.add(
                "rtu.noise",
                "a valid frame after noise bytes is found (by CRC) and answered",
                reply.pdu is not None and reply.pdu[0] == 3,
                "a reply",
                reply.describe(),
            )
            await m.send_raw(m.frame(self.unit, read_pdu(start, 1)) + m.frame(self.unit, read_pdu(start, 2)))
            first, second = await m.reply(self.unit), await m.reply(self.unit)
            both = first.pdu is not None and second.pdu is not None and second.pdu[1:2] == b"\x04"
            self.report.add(
                "rtu.back_to_back",
                "two requests sent back to back are each answered, in order",
                both,
                "two replies",
                f"{first.describe()}, then {second.describe()}",
            )
            return
        a, b = m.frame(self.unit, read_pdu(start, 1)), m.frame(self.unit, read_pdu(start, 2))
        await m.send_raw(a + b)
        tids = {int.from_bytes(a[:2], "big"), int.from_bytes(b[:2], "big")}
        got = [await m.reply(self.unit) for _ in range(2)]
        ok = all(r.pdu is not None for r in got)
        self.report.add(
            "tcp.pipelined",
            "two requests sent without waiting are each answered (their own ids)",
            ok,
            f"answers to transactions {sorted(tids)}",
            ", ".join(r.describe() for r in got),
        )

    # -- commands by state ---------------------------------------------------------------
    async def write(self, words: tuple[int, ...] | list[int]) -> str:
        assert self.command_reg is not None
        reply = await self.master.request(self.unit, write_pdu(self.command_reg.address, list(words)))
        if reply.pdu is None:
            return "no answer"
        return f"{reply.exception:02d}" if reply.exception is not None else "ok"

    async def command(self, name: str, *args: int) -> str:
        assert self.command_reg is not None
        words = (self.profile.commands[name], *args, 0, 0, 0, 0)[: self.command_reg.count]
        return await self.write(words)

    async def state(self) -> str:
        snap = await self.snapshot()
        if snap is None:
            return "(unreadable)"
        return self.steps.state_of(self.profile, snap)

    async def commands(self, *, out_of_order: bool) -> None:
        """The rows of the page's command table that involve out_of_order, or the others."""
        rows = self.steps.rows
        if not rows or self.command_reg is None:
            return
        codes = dict(self.profile.commands)
        for i, row in enumerate(rows, start=1):
            if ("out_of_order" in (row.state, row.then)) != out_of_order:
                continue
            id_ = f"state.{i:02d}"
            args = "".join(f" {a}" for a in row.args)
            text = f"{row.state}: {row.command}{args} -> {row.answer}, {row.then}"
            if row.command != UNKNOWN and row.command not in codes:
                self.report.skip(id_, text, f"the profile has no {row.command} command")
                continue
            if "out_of_order" in (row.state, row.then) and not self.out_of_order:
                self.report.skip(
                    id_, text, "only the vendor's service procedure undoes it; run with --out-of-order"
                )
                continue
            try:
                await self.reach(row.state)
            except Unreachable as exc:
                self.report.skip(id_, text, str(exc))
                continue
            answer = await self.write(row.words(codes, self.command_reg.count))
            then = await self.state()
            self.report.add(
                id_,
                text,
                (answer, then) == (row.answer, row.then),
                f"{row.answer}, then {row.then}",
                f"{answer}, then {then}",
            )
        await self.leave()

    async def wait_for(self, what: str, predicate: Callable[[], Awaitable[bool]], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if await predicate():
                return True
            await asyncio.sleep(POLL_S)
        return await predicate()

    async def person(self, step: str, text: str, predicate: Callable[[], Awaitable[bool]]) -> bool:
        """Ask the person at the device for a physical step; True once its effect is seen."""
        if await predicate():
            return True
        if self.step_timeout_s <= 0:
            return False
        self.ask(step, text, self.step_timeout_s)
        return await self.wait_for(step, predicate, self.step_timeout_s)

    async def _is(self, state: str) -> bool:
        return await self.state() == state

    async def reach(self, state: str) -> None:
        if await self._is(state):
            return
        await self.steps.reach(self, state)
        if not await self._is(state):
            raise Unreachable(f"could not bring the device to {state!r} (it reads {await self.state()!r})")

    async def leave(self) -> None:
        """Leave the device as a table expects it after the check."""
        if self.sim is not None:
            await self.sim.mend()  # what the check caused through the control port
        await self.steps.leave(self)

    # -- physical steps ------------------------------------------------------------------
    async def physical(self) -> None:
        await self.steps.physical(self)

    def timing(self) -> None:
        worst = max(self.master.replies, default=0.0)
        self.report.add(
            "timing.reply",
            f"every reply within the table's timeout_s ({self.cfg.timeout_s:g} s)",
            worst <= self.cfg.timeout_s,
            f"at most {self.cfg.timeout_s:g} s",
            f"{worst * 1000:.0f} ms",
        )
