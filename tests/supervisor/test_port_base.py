"""Two copies of a shipped example table on one host (issue 37: their fixed loopback ports and
/tmp/tablectl/<id>/ serial paths collided with anyone else's `tablectl sim`): `sim` and `run`
given the same --port-base and --run-dir find each other, and another copy beside them, moved
elsewhere, starts too. Real processes, real sockets and ptys; every wait ends on a line."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from controller.supervisor.rig import ROOT
from tests.ports import free_port

GUARD_S = 60.0  # failure guard only
DEVICES = 4  # the down-under example: shuffler and shoe on TCP, reader and keypad on one RTU line


async def _start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(GUARD_S):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def _listing(proc: asyncio.subprocess.Process) -> list[str]:
    """The sim's one line per device, as it puts them on the wire."""
    assert proc.stdout is not None
    lines = []
    while len(lines) < DEVICES:
        line = (await proc.stdout.readline()).decode()
        assert line, (await proc.stderr.read()).decode() if proc.stderr else "sim ended"
        lines.append(line)
    return lines


async def test_two_copies_of_a_table_on_one_host_with_their_own_ports_and_run_dirs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    base_a, base_b = free_port(), free_port()
    sims = [
        await _start("sim", "--config", "down-under", "--port-base", str(base_a), "--run-dir", str(a)),
        await _start("sim", "--config", "down-under", "--port-base", str(base_b), "--run-dir", str(b)),
    ]
    run = None
    try:
        async with asyncio.timeout(GUARD_S):
            first, second = [await _listing(sim) for sim in sims]
        assert f"at=127.0.0.1:{base_a} " in first[0] and f"at=127.0.0.1:{base_a + 1} " in first[1], first
        assert f"at={a}/rs485 " in first[2], first
        assert f"at=127.0.0.1:{base_b} " in second[0] and f"at={b}/rs485 " in second[2], second
        run = await _start(
            "run", "--config", "down-under", "--port-base", str(base_a), "--run-dir", str(a),
            "--journal", str(tmp_path / "j.db"),
        )  # fmt: skip
        assert run.stdout is not None
        async with asyncio.timeout(GUARD_S):
            while True:  # every device answered: the run found its own sim's devices
                line = await run.stdout.readline()
                assert line, (await run.stderr.read()).decode() if run.stderr else "run ended"
                if json.loads(line).get("event") == "ready":
                    break
        assert all(sim.returncode is None for sim in sims)  # both copies still on the wire
    finally:
        for proc in [*([run] if run else []), *sims]:
            await _stop(proc)
