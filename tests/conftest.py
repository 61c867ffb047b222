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
