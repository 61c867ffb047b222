"""``tablectl demo`` (headless) with the hole-card reader answering now and then under the
keypad's unit id on the RTU line they share, so that pymodbus logs ``request ask for id=X but got
id=Y`` with its recent frames: run by tests/supervisor/test_log_secrets.py as its own process.

Every argument is passed to ``tablectl demo``. Only the simulator is changed (a wire fault the
real line can show); the controller is the product as shipped, but for its journal's fsync of each
append, off as in the suite's own process (tests/conftest.py): it was most of the run's time, and
no log line depends on it.
"""

from __future__ import annotations

import asyncio
import sys

from controller.cli import main
from controller.journal import store
from devices.profiles import DeviceKind
from sim.table import SimTable

EVERY_S = 1.5  # real seconds between wrong-id answers: several per shoe, each one retried (a
# reader poll that met one leaves the line quiet for a reply limit before its retry, so answers
# spoiled faster than every poll and its retry can take would keep the reader offline)

_start = SimTable.start


async def _start_with_a_neighbour_answering(self: SimTable) -> None:
    await _start(self)
    reader, keypad = self.by_kind(DeviceKind.READER), self.by_kind(DeviceKind.KEYPAD)
    assert reader is not None and keypad is not None and reader.register_sim is not None
    faults = reader.register_sim.faults
    faults.wrong_id = keypad.config.device_id
    loop = asyncio.get_running_loop()

    def again() -> None:
        faults.wrong_id_count = 1
        loop.call_later(EVERY_S, again)

    again()


SimTable.start = _start_with_a_neighbour_answering  # type: ignore[method-assign]
store.SYNCHRONOUS = "OFF"

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
