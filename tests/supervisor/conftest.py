"""Fixtures for the appliance tests: a whole table in one process (simulators on real sockets and
ptys, the supervisor over the wire, a virtual dealer), or ``tablectl run`` as a subprocess.

Nothing sleeps to synchronise: the dealer asks the supervisor to poll (``settle``) and waits for
what it handled; the subprocess tests read its JSON log lines. ``asyncio.timeout`` is a guard.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller import logs
from controller.games import blackjack_games, game_ids
from controller.journal import Journal, verify_journal
from controller.shipped import table_file
from controller.supervisor.rig import ROOT, Rig, virtual_table
from controller.table.core import Table
from controller.table.recorder import domain_events, options_of
from tests import mosquitto_fixtures
from tests.ports import free_port

GAMES = list(game_ids())  # each shipped game's example table (config/tables/<game>.toml)
BLACKJACK = list(blackjack_games())
GUARD_S = 60.0  # failure guard only


@pytest.fixture(autouse=True)
def _logs() -> Iterator[None]:
    # capture_logs misses cached loggers (structlog caches a bound logger on first use): caching off in tests.
    logs.configure(cache=False)
    yield
    structlog.contextvars.clear_contextvars()


@pytest.fixture
async def table_rig(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Rig]]]:
    stack: list[Any] = []

    async def make(game: str, seed: int = 11, boxes: int = 6, table: Path | None = None) -> Rig:
        """``table``: another table file than the game's shipped one (e.g. tests/support/keypads.py's)."""
        cm = virtual_table(table or table_file(game), tmp_path / f"{game}.db", seed=seed, boxes=boxes)
        rig = await cm.__aenter__()
        stack.append(cm)
        return rig

    async with asyncio.timeout(GUARD_S):
        yield make
        for cm in reversed(stack):
            await cm.__aexit__(None, None, None)


def journal_kinds(path: Path) -> list[tuple[str, dict[str, Any]]]:
    with Journal.open(path, create=False, readonly=True) as j:
        return [(r.kind, r.payload) for r in j.records()]


def replayed(path: Path) -> Table:
    with Journal.open(path, create=False, readonly=True) as j:
        records = j.records()
        options, table_id = options_of(next(records))
        return Table.replay(options, domain_events(records), table_id)


def assert_journal_sound(rig: Rig) -> None:
    """The journal verifies and its replay is the live table."""
    assert rig.supervisor.jt is not None
    path = rig.supervisor.journal_path
    result = verify_journal(path)
    assert result.ok, result.reason
    assert replayed(path).fingerprint() == rig.supervisor.table.fingerprint()


@pytest.fixture
def broker_port(tmp_path: Path) -> Iterator[int]:
    """A plain mosquitto (anonymous, loopback) on a free port of its own."""
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
        "log_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\nlog_type information\n",
        encoding="utf-8",
    )
    proc = mosquitto_fixtures.start(conf, ready_within_s=60)
    try:
        yield port
    finally:
        mosquitto_fixtures.stop(proc, within_s=10)


@pytest.fixture
def broker(broker_port: int) -> str:
    """That mosquitto's URL."""
    return f"mqtt://127.0.0.1:{broker_port}"


def tablectl(*args: str | Path) -> subprocess.Popen[str]:
    """`tablectl ARGS` as its own process, from the checkout, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
