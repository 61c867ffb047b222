"""The shipped alert rules (config/prometheus/): Prometheus' own unit tests for them, run by
promtool (Debian's prometheus package, which bin/test installs), and every tablectl_* series they
name is one that `run` or `archive` actually serves."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

import pytest
from prometheus_client import generate_latest

from controller.archive.metrics import registry_for
from controller.game_config import default_options
from controller.shipped import shipped_dir
from controller.supervisor.metrics import Readings, TableMetrics
from controller.table.core import Table

RULES = shipped_dir("prometheus") / "tablectl-rules.yml"


def test_promtool_runs_the_rules_unit_tests() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (bin/test installs Debian's prometheus)")
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", "tablectl-rules.test.yml"],
        cwd=RULES.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


@dataclass
class _Worker:
    stored: int = 0
    duplicates: int = 0
    unreadable: int = 0
    refused: int = 0
    db_failures: int = 0
    batches: int = 0
    lag_s: float | None = 1.0
    last_commit: float | None = 1.0
    timings: dict[str, float] = field(default_factory=dict)
    inbox_depth: int = 0
    db_connected: bool = True
    chain_alarms: dict[str, int] = field(default_factory=dict)


def _served() -> set[str]:
    table = TableMetrics("t")
    table.watch(
        Readings(
            table=lambda: Table(default_options("down-under")),
            health={"shoe": "online"},
            event_queue=lambda: 0,
            outbox_queues=lambda: {"shoe": 0},
            journal_seq=lambda: 5,
            published_seq=lambda: 4,
            ready=lambda: True,
        )
    )
    text = generate_latest(table.registry).decode() + generate_latest(registry_for(_Worker())).decode()
    return set(re.findall(r"(?m)^# TYPE (tablectl_\w+) ", text)) | set(
        re.findall(r"(?m)^(tablectl_\w+)", text)
    )


def test_the_rules_name_only_series_that_are_served() -> None:
    named = set(re.findall(r"\btablectl_[a-z_]+\b", RULES.read_text(encoding="utf-8")))
    assert named and named <= _served(), named - _served()
