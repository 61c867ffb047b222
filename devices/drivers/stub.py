"""53-card stub counter (687a.9(f)-(h)), speaking checksummed text frames over a serial line or
MQTT. It sends a heartbeat frame every second or so and a count frame after each count."""

from __future__ import annotations

import asyncio

from controller.clock import REAL_CLOCK, Clock
from devices.commands import Command, RequestStubCount
from devices.config import DeviceConfig
from devices.drivers.base import Driver
from devices.errors import CommandRejected, DeviceError, FrameDecodeError, TransportError
from devices.events import DeviceDegraded, DeviceEvent, FrameError, Health, StubCounted
from devices.framing import Frame, LineDecoder, encode_frame
from devices.profiles import DeviceKind
from devices.transport.links import ByteLink


class StubCounterDriver(Driver):
    kind = DeviceKind.STUB_COUNTER
    commands = (RequestStubCount,)
    reads_a_stream = True  # each poll waits on the line (up to a heartbeat period) for frames

    def __init__(
        self,
        config: DeviceConfig,
        link: ByteLink,
        *,
        clock: Clock = REAL_CLOCK,
        events: asyncio.Queue[DeviceEvent] | None = None,
    ) -> None:
        super().__init__(config, clock=clock, events=events)
        self.link = link
        self.profile = config.profile
        self.heartbeat_timeout_s = float(config.options.get("heartbeat_timeout_s", 3.0))
        self._decoder = LineDecoder(self.profile)
        self._last_seq: int | None = None
        self._baseline_read = False  # the journal's last count number, taken once at start
        self._device_health = 0
        self._burst: int | None = None  # frame errors held back since the burst's first (None: no burst)

    async def _poll(self) -> None:  # pragma: no cover - poll_once is overridden
        raise NotImplementedError

    async def poll_once(self) -> bool:
        """Read what the line has (waiting at most one heartbeat period) and act on it."""
        if not self._baseline_read:
            self._baseline_read = True
            self._last_seq = self.baseline.get("count_seq")  # counts the journal has are not news
        if self.health is Health.OFFLINE:
            # The device may come back power-cycled, its seq started again from 0
            # (docs/devices/stub-counter.md): after a lost line its next count is news whatever
            # its seq (a restarted counter's first count, seq 1, was taken for a repeat of the
            # last one and dropped). A device that was not cycled repeats a count only when asked.
            self._last_seq = None
        try:
            data = await self.link.read(self.heartbeat_timeout_s)
        except TransportError as exc:
            self._last_seq = None  # the line is gone: as above
            self._failed(exc)
            return False
        bad: FrameDecodeError | None = None
        good = 0
        for item in self._decoder.feed(data):
            if isinstance(item, FrameDecodeError):
                self._frame_errors(item)
                bad = item
            else:
                good += 1
                self._end_burst()
                self._frame(item)
        if bad is None:
            self._end_burst()
        if bad is not None and not good:
            # Counted against health; DeviceError (not FrameDecodeError) so no second FrameError.
            self._failed(DeviceError(str(bad)))
            return False
        if good:
            self._ok()
        return True

    def _frame_errors(self, error: FrameDecodeError) -> None:
        """A burst of broken frames (noise, a flood) is two events at most: the first error at
        once, then, when a good frame or a clean read ends the burst, how many more there were."""
        if self._burst is None:
            self._burst = 0
            self.emit(FrameError(self.name, str(error), error.count))
        else:
            self._burst += error.count

    def _end_burst(self) -> None:
        burst, self._burst = self._burst, None
        if burst:
            self.emit(FrameError(self.name, f"{burst} more frame errors in the same burst", burst))

    def _frame(self, frame: Frame) -> None:
        v = frame.values
        if frame.name == "count":
            if v["seq"] == self._last_seq:
                return  # a repeat (answer to a request, or a resend): already reported
            self._last_seq = v["seq"]
            # ok is the device's own word that it counted every card cleanly. Whether the stub
            # holds what it should (53 minus the cards dealt, 687a.9(g),(h)) only the table knows.
            self.emit(StubCounted(self.name, v["count"], bool(v["verified"]), v["seq"]))
        elif frame.name == "heartbeat":
            health = v["health"]
            if health and health != self._device_health:
                self.emit(DeviceDegraded(self.name, f"stub counter reports fault code {health}"))
            self._device_health = health

    async def close(self) -> None:
        await self.link.close()

    async def _send(self, command: Command) -> None:
        if isinstance(command, RequestStubCount):
            if "request" not in self.profile.frames:
                raise CommandRejected(f"{self.name}: profile has no request frame")
            try:
                await self.link.write(encode_frame(self.profile, "request", {}))
            except TransportError as exc:
                raise CommandRejected(f"{self.name}: request not sent: {exc}") from None
