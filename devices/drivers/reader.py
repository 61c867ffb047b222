"""Hole-card reader: the peek device (673a.7(h), 665a.7(g)) or the Masque range reader (685a.7(h)).

The profile's ``options.mode`` says which: ``peek`` answers "Blackjack or not", ``masque`` lights
small (2-5, blue light), medium (6-9, red) or large (10-A, yellow). The up card is public; the
controller writes its rank to the device before the hole card goes in, which is how a peek
device knows what Blackjack needs and how this driver tells a peek the up card does not allow
(673a.13(i)).
"""

from __future__ import annotations

from typing import Final

from devices.commands import Command, ResetReader, SetUpCard
from devices.drivers.registers import RegisterDriver, SeqGuard, Snapshot
from devices.errors import CommandRejected, FrameDecodeError
from devices.events import (
    DeviceEvent,
    DeviceGlitch,
    MasqueLight,
    MasqueRange,
    ReaderFailed,
    ReaderMisuse,
    ReaderRestored,
    ReaderResult,
)
from devices.profiles import DeviceKind

# 673a.7(h): ace, king, queen, jack or 10. A table can narrow it (665a.7(g): no 10s in the deck).
DEFAULT_PEEK_UP_RANKS: Final = frozenset({"A", "10", "J", "Q", "K"})


class ReaderDriver(RegisterDriver):
    kind = DeviceKind.READER
    commands = (SetUpCard, ResetReader)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.mode = str(self.profile.options.get("mode", "peek"))
        if self.mode not in ("peek", "masque"):
            raise ValueError(f"{self.profile.path}: options.mode: must be peek or masque")
        self.peek_up_ranks: frozenset[str] | None = self.config.options.get("peek_up_ranks")
        if self.peek_up_ranks is None and self.mode == "peek":
            self.peek_up_ranks = DEFAULT_PEEK_UP_RANKS
        self._inserts = SeqGuard(1, self.profile.reg("insert_seq").bits)  # it holds its last result only

    def counters(self, snap: Snapshot) -> dict[str, int]:
        return {"insert_seq": snap["insert_seq"][0]}

    def settled(self) -> bool:
        return self._inserts.held is None

    def diff(self, prev: Snapshot | None, cur: Snapshot) -> list[DeviceEvent]:
        out: list[DeviceEvent] = []
        health, old_health = cur["health"][0], (prev["health"][0] if prev else 0)
        if health and health != old_health:
            out.append(ReaderFailed(self.name, health))
        elif not health and old_health:
            out.append(ReaderRestored(self.name))
        seq = cur["insert_seq"][0]
        guard = self._inserts
        if guard.trusted is None and "insert_seq" in self.baseline:
            guard.trusted = self.baseline["insert_seq"]  # read on from what the journal has
        verdict = guard.check(seq)
        if verdict is None:
            return out
        base, n, glitch = verdict
        if glitch is not None:
            # The counter read on from, journalled with the alarm: not raised again at a restart.
            out.append(DeviceGlitch(self.name, "reader results", glitch, counters=(("insert_seq", base),)))
        if n == 0:
            guard.commit(seq)
            return out
        if n > 1:  # the reader keeps its last result only: the ones before it are gone
            out.append(DeviceGlitch(self.name, "reader results", "cards inserted while not read", n - 1))
        out += self._result(cur, seq, health)
        guard.commit(seq)
        return out

    def _result(self, cur: Snapshot, seq: int, health: int) -> list[DeviceEvent]:
        out: list[DeviceEvent] = []
        up_code = cur["up_rank"][0]
        up = None if up_code == 0 else self._rank_name(up_code)
        if self.peek_up_ranks is not None and up not in self.peek_up_ranks:
            out.append(ReaderMisuse(self.name, up))
        result = self.profile.enum_name("result", cur["result"][0])
        if result == "none":
            if health:
                return out  # the failure is already reported; a dead reader gives no answer
            raise FrameDecodeError(f"{self.name}: card inserted but the reader gave no result")
        if self.mode == "masque":
            try:
                light = MasqueLight(result)
            except ValueError:
                raise FrameDecodeError(f"{self.name}: result code is not a Masque light") from None
            out.append(MasqueRange(self.name, light, seq))
        else:
            if result not in ("yes", "no"):
                raise FrameDecodeError(f"{self.name}: result code is not a peek answer")
            out.append(ReaderResult(self.name, result == "yes", seq))
        return out

    def _rank_name(self, code: int) -> str:
        return self.profile.enum_name("rank", code)

    async def _send(self, command: Command) -> None:
        match command:
            case SetUpCard(rank=rank):
                if rank is None:
                    code = 0
                else:
                    ranks = self.profile.enums.get("rank", {})
                    if rank not in ranks:
                        raise CommandRejected(f"{self.name}: set_up_card: unknown rank {rank!r}")
                    code = ranks[rank]
                await self._command("set_up_card", code)
            case ResetReader():
                await self._command("reset")
