"""Fixtures for the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import mosquitto_fixtures, postgres_fixtures


@pytest.fixture(scope="session", autouse=True)
def _no_broker_outlives_the_session() -> Iterator[None]:
    """Every mosquitto and PostgreSQL a test started is gone at the end, even one whose test failed."""
    yield
    mosquitto_fixtures.kill_all()
    postgres_fixtures.kill_all()


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
