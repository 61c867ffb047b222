"""Latency of Journal.append (each one committed and fsynced) and throughput of append_many.

Writes to a temporary journal on the project's own disk (a temp dir under --dir, default the
working directory), never /dev/shm: an fsync on tmpfs costs nothing and would flatter the figure.
Prints median, p90, p99 and max of append(), appends per second, records per second for
append_many in batches, and the bare fsync of the same disk for scale. Target: median < 2 ms.

    .venv/bin/python bench/journal_append.py [--records 2000] [--batch 20] [--dir .]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.journal import Classification, Journal, canonical_json  # noqa: E402
from controller.journal.model import prepare, record_hash  # noqa: E402

WARMUP = 50


def _payload(i: int) -> dict[str, Any]:
    # The shape of a dealt card as the table core journals it: about 200 bytes of canonical JSON.
    return {
        "table": "DBJ-07",
        "game": "double-back-jack",
        "round": 1200 + i // 9,
        "box": i % 7,
        "card": ["AS", "10H", "QD", "7C", "2S"][i % 5],
        "batch": "A" if (i // 400) % 2 == 0 else "B",
        "shoe_index": i % 312,
        "face_up": i % 3 != 0,
        "dealer": "D-10442",
        "floor": "F-2201",
        "decision": ["hit", "stand", "double", "split"][i % 4],
        "hand_total": 4 + i % 18,
    }


def _pct(sorted_samples: list[float], q: float) -> float:
    return sorted_samples[min(len(sorted_samples) - 1, int(q * len(sorted_samples)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _time_each(call: Callable[[Any], object], items: Sequence[Any]) -> tuple[list[float], float]:
    """Each call's latency, sorted, and the wall time of the whole run."""
    lat: list[float] = []
    t_start = time.perf_counter()
    for item in items:
        t0 = time.perf_counter()
        call(item)
        lat.append(time.perf_counter() - t0)
    wall = time.perf_counter() - t_start
    lat.sort()
    return lat, wall


def bare_fsync(directory: pathlib.Path, count: int = 300) -> float:
    """Median time of write(4 KiB) + fsync on the same file system: the floor under any append."""
    path = directory / "fsync.probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    samples = []
    try:
        for _ in range(count):
            os.write(fd, b"\0" * 4096)
            t0 = time.perf_counter()
            os.fsync(fd)
            samples.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(samples)


def run(records: int, batch: int, directory: pathlib.Path) -> None:
    entries = [
        ("card_dealt", _payload(i), Classification.PUBLIC, 1_765_000_000.0 + i * 0.8) for i in range(records)
    ]
    size = statistics.mean(len(canonical_json(e[1]).encode()) for e in entries)
    with tempfile.TemporaryDirectory(prefix="bench-journal-", dir=directory) as tmp:
        tmpdir = pathlib.Path(tmp)
        print(f"journal in {tmpdir} (payload {size:.0f} bytes of JSON on average)")
        print(f"bare write+fsync of 4 KiB, median: {_ms(bare_fsync(tmpdir))}")

        with Journal.open(tmpdir / "append.db") as j:
            for e in entries[:WARMUP]:
                j.append(*e)
            lat, wall = _time_each(lambda e: j.append(*e), entries)
        print(
            f"append() x{records}: median {_ms(statistics.median(lat))}, p90 {_ms(_pct(lat, 0.90))}, "
            f"p99 {_ms(_pct(lat, 0.99))}, max {_ms(lat[-1])}; {records / wall:,.0f} appends/s"
        )

        # The CPU part of an append, without SQLite: validation, canonical JSON, sha256.
        t0 = time.perf_counter()
        prev = "0" * 64
        for n, e in enumerate(entries, 1):
            p = prepare(*e)
            prev = record_hash(n, p.at, p.kind, p.classification.value, p.payload_json, prev)
        cpu = (time.perf_counter() - t0) / records
        print(f"  of which validate + encode + hash: {cpu * 1e6:.1f} µs per record")

        batches = [entries[k : k + batch] for k in range(0, records, batch)]
        with Journal.open(tmpdir / "many.db") as j:
            j.append_many(batches[0])
            blat, wall = _time_each(j.append_many, batches)
        print(
            f"append_many() of {batch} x{len(batches)}: median {_ms(statistics.median(blat))} per batch, "
            f"p99 {_ms(_pct(blat, 0.99))}; {records / wall:,.0f} records/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=2000, help="appends to time (default 2000)")
    parser.add_argument("--batch", type=int, default=20, help="records per append_many (default 20)")
    parser.add_argument(
        "--dir", type=pathlib.Path, default=pathlib.Path.cwd(), help="where the temp dir goes"
    )
    args = parser.parse_args()
    run(args.records, args.batch, args.dir)


if __name__ == "__main__":
    main()
