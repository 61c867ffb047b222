"""What the supervisor tells the telemetry layer (controller/telemetry/, issue 6).

The supervisor calls these from its one event loop and never awaits them except start and stop, so
a slow or absent broker cannot hold up the table: an implementation queues and publishes on its own
task. ``journal_appended`` carries no data on purpose: telemetry reads the journal by sequence
number (the journal is the outbox) and filters by each record's classification.
"""

from __future__ import annotations

from typing import Any, Protocol


class Telemetry(Protocol):
    async def start(self) -> None:
        """Connect (or begin trying to); called once before the first device is polled."""
        ...

    async def stop(self) -> None:
        """Tell the broker the table is going away (clean death) and disconnect."""
        ...

    def state_changed(self, snapshot: dict[str, Any]) -> None:
        """The public state after a step or a health change (``Supervisor.snapshot()``)."""
        ...

    def journal_appended(self) -> None:
        """One or more records were committed to the journal; publish what is new."""
        ...

    def device_health(self, name: str, health: str) -> None:
        """A device's health changed: connecting, online, degraded, fault or out_of_order."""
        ...


class NullTelemetry:
    """The default: no broker."""

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def state_changed(self, snapshot: dict[str, Any]) -> None:
        return None

    def journal_appended(self) -> None:
        return None

    def device_health(self, name: str, health: str) -> None:
        return None
