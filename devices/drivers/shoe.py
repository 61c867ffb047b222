"""Counting dealing shoe: every card drawn, cards remaining, cover card, batch loaded."""

from __future__ import annotations

from controller.cards import CardError, card
from devices.commands import Command
from devices.drivers.registers import RegisterDriver, Snapshot, new_in_ring, ring_word
from devices.errors import FrameDecodeError
from devices.events import BatchLoaded, CardDrawn, CoverCardReached, DeviceEvent, DrawsMissed
from devices.profiles import DeviceKind


class ShoeDriver(RegisterDriver):
    kind = DeviceKind.SHOE
    commands = ()

    def diff(self, prev: Snapshot | None, cur: Snapshot) -> list[DeviceEvent]:
        out: list[DeviceEvent] = []
        remaining = cur["remaining"][0]
        if prev is not None and cur["batch_seq"][0] != prev["batch_seq"][0]:
            code = cur["batch_back"][0]
            back = None if code == 0 else self.profile.enum_name("back", code)
            out.append(BatchLoaded(self.name, back, cur["batch_size"][0]))
        if prev is not None:
            ring = cur["draw_ring"]
            seqs, missed = new_in_ring(prev["draw_seq"][0], cur["draw_seq"][0], len(ring))
            if missed:
                out.append(DrawsMissed(self.name, missed))
            for i, seq in enumerate(seqs):
                rank, suit, back, face_up = self.profile.card_fields(ring_word(ring, seq))
                try:
                    c = card(rank, suit, back)
                except CardError:
                    msg = f"{self.name}: card word is not a playing card"
                    raise FrameDecodeError(msg) from None
                left = remaining + (len(seqs) - 1 - i)
                out.append(CardDrawn(self.name, c, face_up, seq, left))
        if cur["cover"][0] and not (prev and prev["cover"][0]):
            out.append(CoverCardReached(self.name, remaining))
        return out

    async def _send(self, command: Command) -> None:  # pragma: no cover - no commands
        raise AssertionError(command)
