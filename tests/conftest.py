"""Fixtures for the whole suite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.journal import store as journal_store
from tests import mosquitto_fixtures, postgres_fixtures


@pytest.fixture(scope="session", autouse=True)
def _no_broker_outlives_the_session() -> Iterator[None]:
    """Every mosquitto and PostgreSQL a test started is gone at the end, even one whose test failed."""
    yield
    mosquitto_fixtures.kill_all()
    postgres_fixtures.kill_all()


@pytest.fixture(scope="session", autouse=True)
def _journal_without_fsync() -> Iterator[None]:
    """Journals written in the test's process commit every append as in the product, without the
    fsync of each (SQLite's synchronous OFF instead of FULL): that wait was most of the time of the
    tests that play shoes through the supervisor, and it protects only from a power cut, which no
    test makes (a killed process loses no commit either way). The ``tablectl`` processes tests start
    keep FULL (but for supervisor/child_wrong_id.py's), and so does a test marked ``fsync``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(journal_store, "SYNCHRONOUS", "OFF")
        yield


@pytest.fixture(autouse=True)
def _fsync_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("fsync") is not None:
        monkeypatch.setattr(journal_store, "SYNCHRONOUS", "FULL")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """For a test that runs a command's ``main`` in-process: the command points structlog and the
    root logger at the stdout of that moment (the test's capture, closed after it); put back what
    was there, so later tests do not write to a closed file."""
    import logging

    import structlog

    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)


DURATIONS = Path(__file__).with_name("durations.json")
RECORD_FROM_S = 1.0  # the tests worth ordering; the rest fill in around them in their own order
UNKNOWN_SLOW_S = 60.0  # a test marked slow that the file does not know yet


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write the tests taking {RECORD_FROM_S:g} s or more to {DURATIONS.name}, to order later runs",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first. On several workers (bin/test) a long test picked up last would
    leave the other workers idle while it finishes; started first, the short ones fill in around
    it. How long a test takes is what tests/durations.json recorded (``--record-durations``); a
    test it does not know is taken as short, or as a minute when it is marked slow. A stale file only orders a
    run less well. The rest keep their order (a stable sort)."""
    try:
        known: dict[str, float] = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}

    def longest_first(item: pytest.Item) -> float:
        unknown = UNKNOWN_SLOW_S if item.get_closest_marker("slow") is not None else 0.0
        return -known.get(item.nodeid, unknown)

    items.sort(key=longest_first)


_durations: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # In the controlling process under xdist too: the workers' reports come back to it.
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not session.config.getoption("record_durations") or hasattr(session.config, "workerinput"):
        return
    long = {k: round(v, 1) for k, v in sorted(_durations.items()) if v >= RECORD_FROM_S}
    DURATIONS.write_text(json.dumps(long, indent=0) + "\n", encoding="utf-8")
