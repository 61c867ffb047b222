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

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from controller.devcheck.master import Master, read_pdu, write_pdu
from devices.config import DeviceConfig, TransportKind
from devices.drivers.factory import build_link
from devices.errors import FrameDecodeError, TransportError
from devices.framing import Frame, LineDecoder, encode_frame, encode_raw
from devices.profiles import DeviceKind, Profile
from devices.spec import COMMAND_ROWS, UNKNOWN, UNKNOWN_CODE, CommandRow

Status = Literal["pass", "fail", "not checked"]
POLL_S = 0.05  # how often a physical step's effect is looked for


@dataclass(frozen=True, slots=True)
class Outcome:
    id: str
    requirement: str
    status: Status
    expected: str = ""
    came: str = ""
    why: str = ""

    def line(self) -> str:
        text = f"{self.status:<11}  {self.id}: {self.requirement}"
        if self.status == "fail":
            text += f" (expected {self.expected}; came {self.came})"
        elif self.status == "not checked":
            text += f" ({self.why})"
        return text

    def as_json(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (
                ("id", self.id),
                ("requirement", self.requirement),
                ("status", self.status),
                ("expected", self.expected),
                ("came", self.came),
                ("why", self.why),
            )
            if v
        }


Ask = Callable[[str, str, float], None]  # (step id, what to do, seconds allowed): tell the person


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def add(self, id_: str, requirement: str, ok: bool, expected: str = "", came: str = "") -> bool:
        status: Status = "pass" if ok else "fail"
        self.outcomes.append(
            Outcome(id_, requirement, status, expected if not ok else "", came if not ok else "")
        )
        return ok

    def skip(self, id_: str, requirement: str, why: str) -> None:
        self.outcomes.append(Outcome(id_, requirement, "not checked", why=why))

    @property
    def passed(self) -> bool:
        return all(o.status != "fail" for o in self.outcomes)


class Unreachable(Exception):
    """A row's state cannot be reached without harm (or the person did not do the step)."""


async def check_device(
    config: DeviceConfig,
    *,
    ask: Ask,
    step_timeout_s: float,
    neighbours: list[DeviceConfig],
    out_of_order: bool = False,
) -> Report:
    """``out_of_order``: also drive mark_out_of_order, which nothing but the vendor's service
    procedure undoes on the device."""
    report = Report()
    if config.profile.registers:
        check = ModbusCheck(config, report, ask, step_timeout_s, neighbours)
        check.out_of_order = out_of_order
        await check.run()
    else:
        await FrameCheck(config, report, ask, step_timeout_s).run()
    return report


# -- Modbus devices ------------------------------------------------------------------------------
class ModbusCheck:
    def __init__(
        self,
        config: DeviceConfig,
        report: Report,
        ask: Ask,
        step_timeout_s: float,
        neighbours: list[DeviceConfig],
    ) -> None:
        self.cfg, self.report, self.ask, self.step_timeout_s = config, report, ask, step_timeout_s
        self.profile: Profile = config.profile
        self.kind = config.kind
        self.unit = config.device_id
        self.master = Master(config)
        self.neighbours = neighbours  # the table's other devices (ids taken on the same line/address)
        self.command_reg = self.profile.registers.get("command")
        self.out_of_order = False

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
            await self.commands()
            await self.physical()
            self.timing()
        finally:
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
        return _STATE_OF[self.kind](self.profile, snap)

    async def commands(self) -> None:
        rows = COMMAND_ROWS.get(self.kind, ())
        if not rows or self.command_reg is None:
            return
        codes = dict(self.profile.commands)
        for i, row in enumerate(rows, start=1):
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
        await _REACH[self.kind](self, state)
        if not await self._is(state):
            raise Unreachable(f"could not bring the device to {state!r} (it reads {await self.state()!r})")

    async def leave(self) -> None:
        """Leave the device as a table expects it after the check."""
        if self.kind is DeviceKind.READER:
            await self.command("reset")
        elif self.kind is DeviceKind.KEYPAD:
            await self.command("unlock")

    # -- physical steps ------------------------------------------------------------------
    async def physical(self) -> None:
        await _PHYSICAL[self.kind](self)

    def timing(self) -> None:
        worst = max(self.master.replies, default=0.0)
        self.report.add(
            "timing.reply",
            f"every reply within the table's timeout_s ({self.cfg.timeout_s:g} s)",
            worst <= self.cfg.timeout_s,
            f"at most {self.cfg.timeout_s:g} s",
            f"{worst * 1000:.0f} ms",
        )


# -- per kind: naming the state, reaching a state, physical steps --------------------------------
def _shuffler_state(p: Profile, s: dict[str, list[int]]) -> str:
    whole = p.enum_name("shuffler_state", s["state"][0])
    if whole in ("out_of_order", "fault"):
        return whole
    return f"A {p.enum_name('shuffler_state', s['slot_a_state'][0])}"


def _reader_state(p: Profile, s: dict[str, list[int]]) -> str:
    if s["health"][0]:
        return "failed"
    rank = s["up_rank"][0]
    return "no up card" if rank == 0 else f"up card {p.enum_name('rank', rank)}"


def _keypad_state(p: Profile, s: dict[str, list[int]]) -> str:
    out = "locked" if s["locked"][0] else "unlocked"
    if not s["locked"][0]:
        out += "".join(
            f", light {box}/{spot} on"
            for box, word in enumerate(s["lights"], start=1)
            for spot in range(1, 17)
            if word & (1 << (spot - 1))
        )
    return out + (f", meter {s['meter'][0]}" if s["meter"][0] else "")


def _shoe_state(p: Profile, s: dict[str, list[int]]) -> str:
    return "empty" if s["remaining"][0] == 0 else "loaded"


_STATE_OF: dict[DeviceKind, Callable[[Profile, dict[str, list[int]]], str]] = {
    DeviceKind.SHUFFLER: _shuffler_state,
    DeviceKind.READER: _reader_state,
    DeviceKind.KEYPAD: _keypad_state,
    DeviceKind.SHOE: _shoe_state,
}


async def _reach_shuffler(c: ModbusCheck, state: str) -> None:
    now = await c.state()
    if now in ("out_of_order", "fault") or now == "A jammed":
        raise Unreachable(f"the shuffler reads {now}; a power cycle or repair comes first")
    if state in ("A jammed", "fault"):
        raise Unreachable(
            f"{state} cannot be caused safely from outside; cause it at the device and run again"
        )
    if state == "out_of_order":
        await _reach_shuffler(c, "A idle")
        await c.command("mark_out_of_order")
        return
    if now == "A empty" or (state != now and now == "A empty"):
        ok = await c.person("load_slot_a", "load a batch into shuffler slot A", lambda: c._is("A idle"))
        if not ok:
            raise Unreachable("slot A was not loaded in time")
        now = "A idle"
    if state == "A idle":
        if now == "A ready":
            await c.command("start_shuffle", 1)
            now = "A shuffling"
        if now == "A shuffling":
            await c.command("abort_shuffle", 1)
        return
    if state == "A shuffling":
        if now != "A shuffling":
            await _reach_shuffler(c, "A idle")
            await c.command("start_shuffle", 1)
        return
    if state in ("A ready", "A empty"):
        if now == "A idle":
            await c.command("start_shuffle", 1)
        max_cycle = float(c.cfg.options.get("max_cycle_s", 120.0))
        if not await c.wait_for("ready", lambda: c._is("A ready"), max_cycle):
            raise Unreachable(f"slot A was not ready within max_cycle_s ({max_cycle:g} s)")
        if state == "A empty":
            await c.command("eject_to_shoe", 1)
        return
    raise Unreachable(f"no way to {state!r}")


async def _reach_reader(c: ModbusCheck, state: str) -> None:
    if state == "failed":
        raise Unreachable("a failed reader cannot be caused safely from outside")
    await c.command("reset")
    if state.startswith("up card "):
        await c.command("set_up_card", c.profile.enum_value("rank", state.removeprefix("up card ")))


async def _reach_keypad(c: ModbusCheck, state: str) -> None:
    await c.command("unlock")
    await c.command("show_meter", 0, 0)
    if state == "locked":
        await c.command("lock")
    elif state.startswith("unlocked, light "):
        box, spot = state.removeprefix("unlocked, light ").removesuffix(" on").split("/")
        await c.command("set_light", int(box), int(spot), 1)


async def _no_reach(c: ModbusCheck, state: str) -> None:
    raise Unreachable("the device takes no commands")


_REACH: dict[DeviceKind, Callable[[ModbusCheck, str], Awaitable[None]]] = {
    DeviceKind.SHUFFLER: _reach_shuffler,
    DeviceKind.READER: _reach_reader,
    DeviceKind.KEYPAD: _reach_keypad,
    DeviceKind.SHOE: _no_reach,
}


async def _physical_shoe(c: ModbusCheck) -> None:
    before = await c.snapshot()
    assert before is not None
    if before["remaining"][0] == 0:
        seq = before["batch_seq"][0]

        async def loaded() -> bool:
            s = await c.snapshot()
            return s is not None and s["batch_seq"][0] != seq and s["remaining"][0] > 0

        if not await c.person("load_shoe", "load a shuffled batch into the shoe", loaded):
            c.report.skip(
                "step.draw",
                "a drawn card is counted and its card word is in the ring",
                "the shoe was not loaded in time",
            )
            return
        before = await c.snapshot()
        assert before is not None
        after_load = before
        c.report.add(
            "step.load",
            "a loaded batch shows batch_seq + 1 and remaining = batch_size",
            after_load["remaining"][0] == after_load["batch_size"][0],
            "remaining = batch_size",
            f"{after_load['remaining'][0]} of {after_load['batch_size'][0]}",
        )
    seq, left = before["draw_seq"][0], before["remaining"][0]

    async def drawn() -> bool:
        s = await c.snapshot()
        return s is not None and s["draw_seq"][0] != seq

    if not await c.person("draw_card", "draw one card from the shoe", drawn):
        c.report.skip(
            "step.draw",
            "a drawn card is counted and its card word is in the ring",
            "no card was drawn in time",
        )
        return
    after = await c.snapshot()
    assert after is not None
    n = after["draw_seq"][0]
    ring = after["draw_ring"]
    word = ring[(n - 1) % len(ring)]
    try:
        c.profile.card_fields(word) if word else None
        shape = "a card word" if word else "0 (no card)"
    except FrameDecodeError:
        shape = "a word that names no card"
    ok = n == (seq + 1) & 0xFFFF and after["remaining"][0] == left - 1 and shape == "a card word"
    c.report.add(
        "step.draw",
        "one draw: draw_seq + 1, remaining - 1, and the card word in draw_ring[(n - 1) mod 8]",
        ok,
        "draw_seq + 1, remaining - 1, a card word",
        f"draw_seq + {(n - seq) & 0xFFFF}, remaining {after['remaining'][0] - left:+d}, {shape}",
    )


async def _physical_reader(c: ModbusCheck) -> None:
    await c.command("reset")
    await c.command("set_up_card", c.profile.enum_value("rank", "A"))
    before = await c.snapshot()
    assert before is not None
    seq = before["insert_seq"][0]

    async def inserted() -> bool:
        s = await c.snapshot()
        return s is not None and s["insert_seq"][0] != seq

    if not await c.person("reader_card", "put the test card in the reader", inserted):
        c.report.skip("step.insert", "an insertion counts and gives a result", "no card was inserted in time")
        return
    after = await c.snapshot()
    assert after is not None
    ok = after["insert_seq"][0] == (seq + 1) & 0xFFFF and after["result"][0] != 0
    c.report.add(
        "step.insert",
        "an insertion: insert_seq + 1 and a result code other than none, in one update",
        ok,
        "insert_seq + 1 and a result",
        f"insert_seq + {(after['insert_seq'][0] - seq) & 0xFFFF}, "
        f"{'a result' if after['result'][0] else 'no result'}",
    )
    await c.command("reset")


async def _physical_keypad(c: ModbusCheck) -> None:
    before = await c.snapshot()
    assert before is not None
    seq = before["key_seq"][0]

    async def pressed() -> bool:
        s = await c.snapshot()
        return s is not None and s["key_seq"][0] != seq

    if await c.person("start_game", "press Start Game on the keypad", pressed):
        after = await c.snapshot()
        assert after is not None
        n = after["key_seq"][0]
        key = after["key_ring"][(n - 1) % len(after["key_ring"])]
        want = c.profile.enum_value("key", "start_game")
        c.report.add(
            "step.key",
            "a key press: key_seq + 1 and the key in key_ring[(n - 1) mod 8]",
            n == (seq + 1) & 0xFFFF and key == want,
            f"key_seq + 1, key code {want}",
            f"key_seq + {(n - seq) & 0xFFFF}, key code {key}",
        )
    else:
        c.report.skip(
            "step.key", "a key press: key_seq + 1 and the key in key_ring", "no key was pressed in time"
        )

    async def chip() -> bool:
        s = await c.snapshot()
        return s is not None and bool(s["sensors"][0] & 1)

    await c.command("unlock")
    if await c.person("chip_1_1", "put a chip on box 1, spot 1", chip):
        c.report.add("step.sensor", "a chip on box 1 spot 1 sets bit 0 of the first sensors word", True)
    else:
        c.report.skip("step.sensor", "a chip on box 1 spot 1 is sensed", "no chip was sensed in time")


async def _physical_shuffler(c: ModbusCheck) -> None:
    c.report.skip("step.jam", "a jam reads jammed with fault_code 11", "a jam is not caused on purpose")


_PHYSICAL: dict[DeviceKind, Callable[[ModbusCheck], Awaitable[None]]] = {
    DeviceKind.SHOE: _physical_shoe,
    DeviceKind.READER: _physical_reader,
    DeviceKind.KEYPAD: _physical_keypad,
    DeviceKind.SHUFFLER: _physical_shuffler,
}


# -- the stub counter (text frames) ---------------------------------------------------------------
STUB_CARDS = 37  # a stub after a DJ Wild round with two boxes: 53 - (2 x 5 + 5 + 1)


class FrameCheck:
    def __init__(self, config: DeviceConfig, report: Report, ask: Ask, step_timeout_s: float) -> None:
        self.cfg, self.report, self.ask, self.step_timeout_s = config, report, ask, step_timeout_s
        self.profile = config.profile
        self.link = build_link(config)
        self.decoder = LineDecoder(self.profile)
        self.heartbeat_s = float(config.options.get("heartbeat_timeout_s", 3.0))
        self.bad: list[str] = []

    async def until(
        self, name: str, seconds: float, test: Callable[[Frame], bool] = lambda f: True
    ) -> Frame | None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                data = await self.link.read(left)
            except TransportError:
                return None
            for item in self.decoder.feed(data):
                if isinstance(item, FrameDecodeError):
                    self.bad.append(str(item))
                elif item.name == name and test(item):
                    return item
        return None

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            await self.link.close()

    async def _run(self) -> None:
        hb = await self.until("heartbeat", self.heartbeat_s)
        self.report.add(
            "frame.heartbeat",
            f"a heartbeat within heartbeat_timeout_s ({self.heartbeat_s:g} s)",
            hb is not None,
            "an HB frame",
            "none",
        )
        if hb is not None:
            self.report.add(
                "frame.health",
                "the heartbeat says healthy (0)",
                hb.values["health"] == 0,
                "0",
                str(hb.values["health"]),
            )
        assert self.profile.line is not None
        await self.link.write(encode_raw(self.profile.line, "ZZ", ["1"]) + b"noise\r\n")
        hb2 = await self.until("heartbeat", self.heartbeat_s)
        self.report.add(
            "frame.noise",
            "a frame it cannot read is ignored; heartbeats go on",
            hb2 is not None,
            "an HB frame after the noise",
            "none",
        )
        if self.step_timeout_s <= 0:
            self.report.skip(
                "step.stub",
                f"a stub of {STUB_CARDS} cards: count {STUB_CARDS}, verified 1",
                "physical steps were not asked for (--no-steps)",
            )
        else:
            self.ask(
                "stub_37",
                f"put a stub of exactly {STUB_CARDS} cards into the stub counter",
                self.step_timeout_s,
            )
            sc = await self.until("count", self.step_timeout_s)
            if sc is None:
                self.report.skip(
                    "step.stub",
                    f"a stub of {STUB_CARDS} cards: count {STUB_CARDS}, verified 1",
                    "no count came in time",
                )
            else:
                got = (sc.values["count"], sc.values["verified"])
                self.report.add(
                    "step.stub",
                    f"a stub of {STUB_CARDS} cards: count {STUB_CARDS}, verified 1 (the device "
                    "never compares with 53)",
                    got == (STUB_CARDS, 1),
                    f"count {STUB_CARDS}, verified 1",
                    f"count {got[0]}, verified {got[1]}",
                )
                await self.link.write(encode_frame(self.profile, "request", {}))
                again = await self.until("count", self.heartbeat_s)
                self.report.add(
                    "frame.request",
                    "RQ repeats the last count with the same seq",
                    again is not None and again.values["seq"] == sc.values["seq"],
                    f"seq {sc.values['seq']}",
                    "none" if again is None else f"seq {again.values['seq']}",
                )
        self.report.add(
            "frame.valid",
            "every frame the device sent has a valid checksum, tag and fields",
            not self.bad,
            "no broken frames",
            f"{len(self.bad)} broken, first: {self.bad[0] if self.bad else ''}",
        )


def transport_note(config: DeviceConfig) -> str:
    ep = config.endpoint
    if ep.transport in (TransportKind.MODBUS_TCP, TransportKind.MQTT):
        return f"{ep.transport.value} {ep.host}:{ep.port}"
    return f"{ep.transport.value} {ep.path}"


__all__ = ["CommandRow", "Outcome", "Report", "check_device", "transport_note"]
