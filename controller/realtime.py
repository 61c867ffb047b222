"""Realtime scheduling for the table's process, when the appliance grants it.

The past-posting window (687a.9(b)) is a few wakeups long: the key watch's timer, its read and the
lock's write. On a busy box a normal-priority thread can wait a scheduler slice (milliseconds)
behind CPU-bound work at each of them. Under SCHED_FIFO the table's threads run before any
normal-priority work the moment they wake. The whole process, not the watch's thread alone: its
threads share one interpreter lock, and a watch that outranked the thread holding it would wait
for that thread all the same (priority inversion). The table's own share is a few per cent of a
core and the kernel keeps 5 % of every second for normal work whatever realtime tasks do
(sched_rt_runtime_us), so a realtime table cannot lock the box up.

SCHED_RESET_ON_FORK: the processes it starts (the console) begin at normal priority, niced below it.
"""

from __future__ import annotations

import os

MAX_PRIORITY = 99


def realtime(priority: int) -> str | None:
    """Run this process (and the threads it starts after) under SCHED_FIFO at ``priority``; None
    when done, else why not (one line: the caller logs it and runs on at normal priority)."""
    if not 1 <= priority <= MAX_PRIORITY:
        return f"realtime priority {priority}: 1 to {MAX_PRIORITY}"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(priority))
    except (OSError, AttributeError) as e:  # not permitted (no CAP_SYS_NICE, no RLIMIT_RTPRIO)
        return f"realtime priority {priority} not granted: {getattr(e, 'strerror', None) or e}"
    return None
