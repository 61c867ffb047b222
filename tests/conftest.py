"""Fixtures for the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long runs (marked slow) first: on several workers (bin/test) a long test picked up last
    would leave the other workers idle while it finishes; started first, the short ones fill in
    around it. The rest keep their order (a stable sort)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
