"""`tablectl run` and `tablectl sim` on one example table file, as two processes: the file as
shipped (moved to free ports and a private folder) connects them; `run` is ready only once every
device has answered, and until then says which device it waits for, where, and why."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.relocated import relocated_table
from tests.supervisor.conftest import tablectl

GUARD_S = 60.0  # failure guard only


def _log_until(proc: subprocess.Popen[str], done: Any) -> list[dict[str, Any]]:
    """`run`'s JSON log lines up to and including the first that ``done`` accepts (the process is
    killed by the timeout of the test if it never comes)."""
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    for raw in proc.stdout:
        seen.append(json.loads(raw))
        if done(seen):
            return seen
    raise AssertionError(f"tablectl run ended ({proc.wait()}): {proc.stderr.read() if proc.stderr else ''}")


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_run_without_its_devices_is_never_ready_and_names_each_missing_device(tmp_path: Path) -> None:
    config = relocated_table("down-under", tmp_path)
    run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db")
    try:
        lines = _log_until(
            run,
            lambda seen: (
                {x["device"] for x in seen if x["event"] == "waiting_for_device"}
                >= {"shuffler", "shoe", "reader", "keypad"}
            ),
        )
    finally:
        assert _stop(run) == 0
    assert not any(x["event"] == "ready" for x in lines)
    waiting = {x["device"]: x for x in lines if x["event"] == "waiting_for_device"}
    assert waiting["reader"]["where"] == str(tmp_path / "rs485") and waiting["reader"]["error"]
    assert waiting["shoe"]["where"].startswith("127.0.0.1:")


def test_run_beside_sim_on_one_table_file_is_ready(tmp_path: Path) -> None:
    config = relocated_table("down-under", tmp_path)
    sim = tablectl("sim", "--config", config, "--seed", "3")
    try:
        assert sim.stdout is not None
        listing = [sim.stdout.readline() for _ in range(4)]  # printed once every device listens
        assert all(" at=" in line for line in listing), listing
        run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db")
        try:
            lines = _log_until(run, lambda seen: seen[-1]["event"] == "ready")
        finally:
            assert _stop(run) == 0
    finally:
        assert _stop(sim) == 0
    health = {x["device"]: x["health"] for x in lines if x["event"] == "device_health"}
    assert health == dict.fromkeys(("shuffler", "shoe", "reader", "keypad"), "online")


def test_run_refuses_a_port_only_the_simulator_may_choose(tmp_path: Path) -> None:
    config = relocated_table("down-under", tmp_path)
    config.write_text(
        config.read_text(encoding="utf-8").replace("\nport = ", "\nport = 0 #", 1), encoding="utf-8"
    )
    run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db")
    _, err = run.communicate(timeout=GUARD_S)
    assert run.returncode == 2
    assert err.strip() == (
        f"tablectl run: {config}: devices.shuffler.port: tablectl run needs the device's TCP port"
        " (0 or empty lets only tablectl sim choose)"
    )


def test_run_started_before_its_simulators_waits_for_them_without_an_alarm(tmp_path: Path) -> None:
    """Issue 12: `run` started before `sim` raised halting alarms (the shoe failed, the reader
    malfunctioned) for devices that were simply not up yet. Within the connect grace they are
    `connecting`; once `sim` is up the table is ready, and nothing was ever a failure."""
    config = relocated_table("down-under", tmp_path)
    run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db")
    try:
        waiting = _log_until(
            run,
            lambda seen: (
                {x["device"] for x in seen if x["event"] == "waiting_for_device"}
                >= {"shuffler", "shoe", "reader", "keypad"}
            ),
        )
        sim = tablectl("sim", "--config", config, "--seed", "3")
        try:
            lines = waiting + _log_until(run, lambda seen: seen[-1]["event"] == "ready")
        finally:
            assert _stop(sim) == 0
    finally:
        assert _stop(run) == 0
    assert not [x for x in lines if x["event"] in ("alarm", "dealing_halted", "progressive_closed")]
    health = [(x["device"], x["health"]) for x in lines if x["event"] == "device_health"]
    assert sorted(health) == sorted((d, "online") for d in ("shuffler", "shoe", "reader", "keypad"))


def test_a_device_still_silent_after_its_connect_grace_fails_with_its_alarm(tmp_path: Path) -> None:
    config = relocated_table("down-under", tmp_path)
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("[devices.shoe]\n", "[devices.shoe]\nconnect_grace_s = 0.5\n", 1), "utf-8")
    run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db")
    try:
        lines = _log_until(run, lambda seen: seen[-1]["event"] == "alarm")
    finally:
        assert _stop(run) == 0
    alarm = lines[-1]
    assert (alarm["device"], alarm["section"], alarm["halts"]) == ("shoe", "685a.7(a)", True)
    assert "no answer in the 0.5 s after start (" in alarm["message"]
    # Only the shoe's grace ran out: the others are still connecting, as their health says.
    health = {x["device"]: x["health"] for x in lines if x["event"] == "device_health"}
    assert health == {"shoe": "fault"}
