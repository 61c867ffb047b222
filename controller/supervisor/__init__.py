"""The table's asyncio shell: device drivers and the journalled table core, wired, publishing
through the ``Telemetry`` port it is handed. It imports nothing of telemetry/ or console/;
controller/appliance/ composes them (docs/design.md, "Layers, one way").

See ``Supervisor`` (supervisor.py) and docs/install.md.
"""

from controller.supervisor.health import DeviceHealth
from controller.supervisor.supervisor import Supervisor
from controller.supervisor.telemetry import NullTelemetry, Telemetry

__all__ = ["DeviceHealth", "NullTelemetry", "Supervisor", "Telemetry"]
