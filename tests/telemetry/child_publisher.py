"""A telemetry process for the Last Will test: publishes a table until it is killed with SIGKILL.

Run as ``python -m tests.telemetry.child_publisher PORT CA_FILE JOURNAL``; the password comes from
TABLECTL_MQTT_PASSWORD, as in production, never from the command line.
"""

from __future__ import annotations

import asyncio
import os
import sys

from controller.backoff import BackoffPolicy
from controller.telemetry import BrokerSettings, TableIdentity, Telemetry
from controller.telemetry.config import versions


async def main(port: int, ca_file: str, journal: str) -> None:
    settings = BrokerSettings(
        "127.0.0.1",
        port,
        True,
        __import__("pathlib").Path(ca_file),
        "site-a/t2",
        os.environ["TABLECTL_MQTT_PASSWORD"],
        keepalive=3,
    )
    identity = TableIdentity("site-a", "t2", "down-under", "sha256:child", versions())
    telemetry = Telemetry(settings, identity, journal, backoff=BackoffPolicy(0.05, 0.5))
    await telemetry.start()
    telemetry.device_health("shoe", "online")
    await asyncio.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
