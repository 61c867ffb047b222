"""Round trip of one Modbus read through our transport vs a bare pymodbus client.

Both talk to the same simulated shuffler (pymodbus TCP server on a free local port) in the same
run, in alternating batches so that warm-up and machine noise fall on both alike. Prints the
median and p99 of each and the ratio of the medians (target: ours within 1.3x of bare).

    .venv/bin/python bench/modbus_roundtrip.py [--requests 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402
from pymodbus.client import AsyncModbusTcpClient  # noqa: E402

from controller.games import GAMES, GameId  # noqa: E402
from devices.config_file import load_devices  # noqa: E402
from devices.transport.modbus import ModbusBus  # noqa: E402
from sim.clock import RealClock  # noqa: E402
from sim.modbus_server import ModbusTcpSim, RegisterSim  # noqa: E402
from sim.models import ShufflerModel  # noqa: E402


def _pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


async def run(requests: int, batch: int) -> None:
    [cfg] = load_devices(
        {
            "shuffler": {
                "kind": "shuffler",
                "profile": "../devices/ref-shuffler.toml",
                "transport": "modbus-tcp",
                "port": 0,
            }
        },
        ROOT / "config" / "tables",
    )
    model = ShufflerModel(RealClock(), GAMES[GameId.DOUBLE_BACK_JACK], 6)
    server = ModbusTcpSim([RegisterSim(cfg.kind, model, cfg.profile)])
    await server.start()
    start, count = cfg.profile.poll_span()
    ours_bus = ModbusBus(cfg.with_endpoint(port=server.port).endpoint)
    bare = AsyncModbusTcpClient("127.0.0.1", port=server.port, timeout=2, retries=0)
    await bare.connect()
    ours: list[float] = []
    theirs: list[float] = []

    async def one_ours() -> None:
        await ours_bus.read_holding(1, start, count, timeout_s=2.0, attempts=1)

    async def one_bare() -> None:
        rr = await bare.read_holding_registers(start, count=count, device_id=1)
        if rr.isError():
            raise RuntimeError("bare client got an exception response")

    for fn in (one_ours, one_bare):  # warm both connections up
        for _ in range(50):
            await fn()
    done = 0
    while done < requests:
        for fn, out in ((one_ours, ours), (one_bare, theirs)):
            for _ in range(batch):
                t0 = time.perf_counter()
                await fn()
                out.append(time.perf_counter() - t0)
        done += batch
    bare.close()
    ours_bus.close()
    await server.stop()

    med_o, med_b = statistics.median(ours), statistics.median(theirs)
    print(f"requests per client: {len(ours)} (read {count} holding registers, TCP, localhost)")
    print(f"bare pymodbus : median {med_b * 1e6:8.1f} us   p99 {_pct(theirs, 0.99) * 1e6:8.1f} us")
    print(f"our transport : median {med_o * 1e6:8.1f} us   p99 {_pct(ours, 0.99) * 1e6:8.1f} us")
    verdict = "within" if med_o / med_b <= 1.3 else "OVER"
    print(f"ratio (ours / bare, median): {med_o / med_b:.3f}  ({verdict} the 1.3x target)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--batch", type=int, default=100)
    args = p.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    asyncio.run(run(args.requests, args.batch))


if __name__ == "__main__":
    main()
