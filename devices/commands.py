"""Typed commands: what the supervisor asks a device to do."""

from __future__ import annotations

from dataclasses import dataclass

from devices.events import Slot


@dataclass(frozen=True, slots=True)
class Command:
    pass


@dataclass(frozen=True, slots=True)
class StartShuffle(Command):
    slot: Slot


@dataclass(frozen=True, slots=True)
class AbortShuffle(Command):
    slot: Slot


@dataclass(frozen=True, slots=True)
class EjectToShoe(Command):
    slot: Slot


@dataclass(frozen=True, slots=True)
class ClearFault(Command):
    """Acknowledge a jam or fault after the dealer has cleared the cards."""


@dataclass(frozen=True, slots=True)
class MarkOutOfOrder(Command):
    """673a.13(l): the device is covered / signed out of order."""


@dataclass(frozen=True, slots=True)
class SetUpCard(Command):
    """Tell the peek reader the dealer's up card rank (public) before the hole card goes in."""

    rank: str | None


@dataclass(frozen=True, slots=True)
class ResetReader(Command):
    pass


@dataclass(frozen=True, slots=True)
class LockSensors(Command):
    """687a.9(b): Start Game pressed; no more Progressive wagers are accepted."""


@dataclass(frozen=True, slots=True)
class UnlockSensors(Command):
    pass


@dataclass(frozen=True, slots=True)
class SetLight(Command):
    box: int
    spot: int
    on: bool


@dataclass(frozen=True, slots=True)
class ShowMeter(Command):
    amount_cents: int


@dataclass(frozen=True, slots=True)
class RequestStubCount(Command):
    """Ask the stub counter to report its last count again."""
