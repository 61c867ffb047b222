"""Realtime scheduling (SCHED_FIFO), where the appliance grants it.

``tablectl run --realtime-priority N`` gives it to the keypad's key watch process alone
(devices/transport/watch_process.py), which carries the past-posting window (687a.9(b)): its
wakeups (the look's timer, the answer, the lock's write) then run before any normal-priority work
the moment they are due. It sleeps, reads a hundred bytes and sleeps again, so it cannot starve
the box, and the kernel keeps 5 % of every second for normal work whatever realtime tasks do
(sched_rt_runtime_us). The table's own process stays at normal priority: under SCHED_FIFO it did
not shorten the window (its threads share one interpreter lock), measured in docs/benchmarks.md.
The bench gives it to the simulated devices' process too (hardware of their own at a table).

SCHED_RESET_ON_FORK: a process started by one running under it begins at normal priority.
"""

from __future__ import annotations

import os

MAX_PRIORITY = 99


def priority_refused(priority: int) -> str | None:
    """Why ``priority`` is no SCHED_FIFO priority (one line), or None."""
    if not 1 <= priority <= MAX_PRIORITY:
        return f"realtime priority {priority}: 1 to {MAX_PRIORITY}"
    return None


def realtime(priority: int) -> str | None:
    """Run this process (and the threads it starts after) under SCHED_FIFO at ``priority``; None
    when done, else why not (one line: the caller logs it and runs on at normal priority)."""
    if (refused := priority_refused(priority)) is not None:
        return refused
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(priority))
    except (OSError, AttributeError) as e:  # not permitted (no CAP_SYS_NICE, no RLIMIT_RTPRIO)
        return f"realtime priority {priority} not granted: {getattr(e, 'strerror', None) or e}"
    return None
