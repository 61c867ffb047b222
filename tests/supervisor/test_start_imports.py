"""The table's dark time after a restart is mostly imports: ``tablectl run`` reaches ``ready``
(journal replayed, every device answered) without the heavy libraries only other commands or
optional sections need (docs/benchmarks.md, "Dark time").

``tablectl run`` is a subprocess against simulators in this process, as in
bench/appliance_restart.py, with its stdout watched from inside: the moment it writes its
``ready`` line, the heavy modules already in ``sys.modules`` are written first.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from controller.shipped import table_file
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import ROOT, concrete_config
from sim.table import SimTable

GUARD_S = 120.0  # failure guard only

# Each is a tenth of a second of CPU or more (with what it imports), and `run` reaches `ready`
# without it: NATS and aiohttp (JetStream events, /metrics, the console: optional or in processes
# of their own), rich and pygments (terminal views), zxcvbn (console passwords), psycopg (the
# archive), and libraries tablectl does not use at all.
HEAVY = (
    "nats",
    "aiohttp",
    "rich",
    "pygments",
    "zxcvbn",
    "psycopg",
    "jsonschema",
    "matplotlib",
    "playwright",
)

# Runs `tablectl run` with a stdout that, on the `ready` line, first says which HEAVY modules are
# loaded (structlog writes each line to the stream it was configured with: this one).
WATCHED_RUN = """
import json, sys
heavy, argv = json.loads(sys.argv[1]), sys.argv[2:]
real = sys.stdout

class Watch:
    def write(self, text):
        try:
            event = json.loads(text).get("event")
        except (ValueError, AttributeError):
            event = None
        if event == "ready":
            loaded = sorted(m for m in heavy if m in sys.modules)
            real.write(json.dumps({"event": "heavy_imports", "loaded": loaded}) + "\\n")
        return real.write(text)

    def flush(self):
        real.flush()

sys.stdout = Watch()
from controller.cli import main
sys.exit(main(argv))
"""


async def test_run_reaches_ready_without_heavy_imports(tmp_path: Path) -> None:
    cfg = load_table_config(table_file("down-under"))
    sim = SimTable(list(cfg.devices), cfg.options.spec, seed=1, decks=cfg.options.decks)
    await sim.start()
    proc = None
    try:
        conf = concrete_config("down-under", sim, tmp_path / "table.toml")
        run = ["run", "--config", str(conf), "--journal", str(tmp_path / "journal.db")]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WATCHED_RUN,
            json.dumps(HEAVY),
            *run,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        loaded = None
        async with asyncio.timeout(GUARD_S):
            while True:
                raw = await proc.stdout.readline()
                assert raw, "tablectl run ended before it was ready"
                line = json.loads(raw)
                if line["event"] == "heavy_imports":
                    loaded = line["loaded"]
                if line["event"] == "ready":
                    break
        assert loaded == [], f"imported by `tablectl run` before ready: {loaded}"
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await sim.stop()
