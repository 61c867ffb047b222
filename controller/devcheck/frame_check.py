"""The stub counter (text frames, no Modbus): its frames listened to for their checksum, tag and
fields, its heartbeat timed, and its count asked for after a stub the person puts in."""

from __future__ import annotations

import time
from collections.abc import Callable

from controller.devcheck.report import Ask, Report
from devices.config import DeviceConfig
from devices.drivers.factory import build_link
from devices.errors import FrameDecodeError, TransportError
from devices.framing import Frame, LineDecoder, encode_frame, encode_raw

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
