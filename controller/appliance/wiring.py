"""Telemetry for a supervisor: built from the table config and ``--broker``, commanding it.

Telemetry is built before the supervisor (the supervisor takes it as an argument) but sends the
floor's commands to that supervisor; ``CommandForwarder`` closes the loop once both exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from controller.supervisor.config import TableConfig
from controller.supervisor.supervisor import Supervisor
from controller.telemetry import Telemetry, telemetry_from_config


class CommandForwarder:
    def __init__(self) -> None:
        self.supervisor: Supervisor | None = None

    async def __call__(self, name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        if self.supervisor is None:
            return {"ok": False, "error": "the table is starting; send the command again"}
        return await self.supervisor.command(name, args, who, role)


def build_telemetry(
    config: TableConfig, broker_url: str | None, journal_path: Path
) -> tuple[Telemetry | None, CommandForwarder]:
    """The table's telemetry (None when no broker is configured) and the forwarder to connect,
    from the table file as ``load_table_config`` read it."""
    forwarder = CommandForwarder()
    try:
        telemetry = telemetry_from_config(
            dict(config.doc),
            config.path.parent,
            broker_url,
            journal_path,
            command=forwarder,
            game=config.options.game.value,
        )
    except ConfigError as e:
        raise ConfigError(f"{config.path}: {e}") from None  # the one line names the file too
    return telemetry, forwarder
