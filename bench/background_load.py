"""A bounded background load for the benches: what else runs on an appliance on a busy day (the
console, a log shipper, a backup).

One CPU spinner per core, at the default priority, and one writer that writes 64 KB and fsyncs it
over and over in the directory it is given (the journal's, so on the same disk), each in a process
of its own. Bounded: every process ends by itself after ``limit_s`` (a bench that dies leaves
nothing spinning for long), and ``stop()`` ends them at once. ``load_average()`` is the kernel's
one-minute figure, printed beside every figure taken under it.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

WRITE = b"\xa5" * 65536


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def _spin(until: float) -> None:
    n = 0
    while time.monotonic() < until:
        for _ in range(100_000):
            n += 1


def _write(directory: str, until: float) -> None:
    path = Path(directory) / f"background-load-{os.getpid()}.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while time.monotonic() < until:
            os.pwrite(fd, WRITE, 0)
            os.fsync(fd)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


class BackgroundLoad:
    def __init__(self, disk_dir: Path, *, spinners: int | None = None, limit_s: float = 1800.0) -> None:
        self.disk_dir, self.limit_s = disk_dir, limit_s
        self.spinners = spinners if spinners is not None else (os.cpu_count() or 1)
        self._procs: list[Any] = []

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        until = time.monotonic() + self.limit_s  # CLOCK_MONOTONIC: the same in every process
        for _ in range(self.spinners):
            self._procs.append(ctx.Process(target=_spin, args=(until,), daemon=True))
        self._procs.append(ctx.Process(target=_write, args=(str(self.disk_dir), until), daemon=True))
        for p in self._procs:
            p.start()

    def stop(self) -> None:
        for p in self._procs:
            p.terminate()
        for p in self._procs:
            p.join(10)
        for leftover in self.disk_dir.glob("background-load-*.bin"):
            leftover.unlink(missing_ok=True)
        self._procs.clear()

    def describe(self) -> dict[str, Any]:
        return {
            "cpu_spinners": self.spinners,
            "fsync_writer_dir": str(self.disk_dir),
            "write_bytes": len(WRITE),
        }
