"""The appliance's asyncio shell: device drivers, the journalled table core and telemetry, wired.

See ``Supervisor`` (supervisor.py) and docs/install.md.
"""

from controller.supervisor.health import DeviceHealth
from controller.supervisor.supervisor import Supervisor
from controller.supervisor.telemetry import NullTelemetry, Telemetry

__all__ = ["DeviceHealth", "NullTelemetry", "Supervisor", "Telemetry"]
