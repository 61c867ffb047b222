"""Ops telemetry over MQTT: birth and death, state, the journal's events, alarms, devices, commands.

See docs/mqtt.md. The supervisor builds one with ``telemetry_from_config`` and calls the
``Telemetry`` methods ``start``, ``stop``, ``state_changed``, ``journal_appended`` and
``device_health``.
"""

from __future__ import annotations

from controller.telemetry.broker import BrokerSettings, parse_broker_url
from controller.telemetry.commands import COMMANDS
from controller.telemetry.config import telemetry_from_config
from controller.telemetry.payloads import PAYLOAD_VERSION
from controller.telemetry.publisher import CommandHandler, TableIdentity, Telemetry
from controller.telemetry.topics import TableTopics, parse_topic

__all__ = [
    "COMMANDS",
    "PAYLOAD_VERSION",
    "BrokerSettings",
    "CommandHandler",
    "TableIdentity",
    "TableTopics",
    "Telemetry",
    "parse_broker_url",
    "parse_topic",
    "telemetry_from_config",
]
