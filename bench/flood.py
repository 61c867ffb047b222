"""A flood on the stub counter's serial line, and what it costs the keypad (issue 11).

The DJ Wild table (shuffler, stub counter on a serial line, keypad on RS-485) on simulated
devices over real ptys, the supervisor on the real clock polling at the shipped config's rates,
as in production. First the keypad's latency alone: from a key pressed on the simulated keypad
until the supervisor has handled it (wall time; it includes up to one poll interval). Then the
same while ``--mib`` MiB of ``$`` (each one a frame start, the worst case for a decoder) are
written to the stub counter's line as fast as it drains, and the time until the stub counter's
next count is read after the flood. Prints one JSON object.

    .venv/bin/python bench/flood.py [--mib 1] [--presses 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import pathlib
import random
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller import logs  # noqa: E402
from controller.supervisor.config import load_table_config  # noqa: E402
from controller.supervisor.rig import table_file  # noqa: E402
from controller.supervisor.supervisor import Supervisor  # noqa: E402
from devices import events as dev  # noqa: E402
from devices.events import Key  # noqa: E402
from devices.framing import encode_frame  # noqa: E402
from sim.clock import REAL_CLOCK  # noqa: E402
from sim.frame_server import PtySink  # noqa: E402
from sim.table import SimTable  # noqa: E402


def _summary(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "n": len(s),
        "median_ms": round(statistics.median(s) * 1000, 3),
        "p99_ms": round(s[min(len(s) - 1, int(0.99 * len(s)))] * 1000, 3),
        "max_ms": round(s[-1] * 1000, 3),
    }


async def run(mib: float, presses: int) -> dict[str, Any]:
    logs.configure(logging.CRITICAL, cache=False)
    with tempfile.TemporaryDirectory() as tmp:
        config = load_table_config(table_file("dj-wild"), side="both")
        sim = SimTable(
            list(config.devices), config.options.spec, seed=3, clock=REAL_CLOCK, decks=config.options.decks
        )
        await sim.start()
        sup = Supervisor(config, pathlib.Path(tmp) / "j.db", devices=sim.driver_configs())
        handled: list[dev.DeviceEvent] = []
        on_event = sup.device_events.on_event

        async def spy(event: dev.DeviceEvent) -> None:
            handled.append(event)
            await on_event(event)

        sup.device_events.on_event = spy  # type: ignore[method-assign]
        await sup.start()
        try:
            await asyncio.wait_for(sup.ready.wait(), 30)
            stub = sim.devices["stub"].frame_sim
            assert stub is not None and isinstance(stub.sink, PtySink)
            keypad = sim.devices["keypad"].model
            interval = sup.drivers["keypad"].config.poll_interval_s

            def keys() -> int:
                return sum(isinstance(e, dev.ButtonPressed) for e in handled)

            async def press() -> float:
                # At a random phase of the keypad's poll, as a dealer's finger would be.
                await asyncio.sleep(random.uniform(0, interval))
                before = keys()
                t = time.perf_counter()
                keypad.press(Key.NEXT)
                await sup.wait_for(lambda: keys() > before)
                return time.perf_counter() - t

            quiet = [await press() for _ in range(presses)]
            size = int(mib * (1 << 20))
            began = time.perf_counter()
            flood = asyncio.create_task(stub.sink.send_all(b"$" * size))
            during: list[float] = []
            while not flood.done():
                during.append(await press())
            await flood
            written_s = time.perf_counter() - began
            m = stub.model
            m.count_stub(53)
            count = {"seq": m.seq, "count": m.count, "verified": 1}
            await stub.sink.send_all(encode_frame(stub.profile, "count", count))
            await sup.wait_for(lambda: any(isinstance(e, dev.StubCounted) for e in handled))
            absorbed_s = time.perf_counter() - began
            errors = [e for e in handled if isinstance(e, dev.FrameError)]
            link = sup.drivers["stub"].link  # type: ignore[attr-defined]
            return {
                "flood_bytes": size,
                "flood_written_s": round(written_s, 3),
                "until_next_stub_count_s": round(absorbed_s, 3),
                "link_overrun_bytes": link.overrun_bytes,
                "frame_error_events": len(errors),
                "frame_errors_counted": sum(e.count for e in errors),
                "keypad_quiet": _summary(quiet),
                "keypad_during_flood": _summary(during) if during else None,
                "keypad_poll_interval_s": interval,
                "python": sys.version.split()[0],
            }
        finally:
            await sup.stop()
            await sim.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=float, default=1.0)
    p.add_argument("--presses", type=int, default=200)
    args = p.parse_args()
    print(json.dumps(asyncio.run(run(args.mib, args.presses)), indent=2))


if __name__ == "__main__":
    main()
