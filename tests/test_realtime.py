"""Realtime scheduling (controller/realtime.py, which ``tablectl run --realtime-priority N`` gives
the key watch's process): refused in one line out of range, and what it sets is what a child
process does not inherit (reset on fork)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from controller.realtime import realtime


@pytest.mark.parametrize("priority", [0, 100, -1])
def test_a_priority_out_of_range_is_refused_in_one_line(priority: int) -> None:
    refused = realtime(priority)
    assert refused is not None and "1 to 99" in refused and "\n" not in refused


def test_the_process_runs_fifo_and_its_children_do_not() -> None:
    """In a child of its own (the test process keeps its policy): FIFO when granted, else one line
    that says why; either way a process it starts runs at normal priority."""
    code = (
        "import os, subprocess, sys\n"
        "from controller.realtime import realtime\n"
        "why = realtime(5)\n"
        "mine = os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK\n"
        "child = subprocess.run([sys.executable, '-c', 'import os; print(os.sched_getscheduler(0))'],"
        " capture_output=True, text=True, check=True).stdout.strip()\n"
        "print(why is None, mine == os.SCHED_FIFO, child == str(os.SCHED_OTHER))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    granted, fifo, child_normal = out.stdout.split()
    assert granted == fifo  # FIFO exactly when it said it was granted
    assert child_normal == "True"
