"""``tablectl run --metrics``: a running table's /metrics, scraped over HTTP as Prometheus would and
parsed with prometheus_client's own parser, and its /healthz (issue 26)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.relocated import relocated_table
from tests.supervisor.conftest import ROOT, tablectl
from tests.supervisor.test_run_beside_sim import _log_until, _stop

DEVICES = {"shuffler", "shoe", "reader", "keypad"}


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def _samples(text: str) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def _value(samples: dict[str, list[Sample]], name: str, **labels: str) -> float:
    (match,) = [s.value for s in samples[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    return match


def test_a_running_table_serves_its_metrics_and_health(tmp_path: Path) -> None:
    config = relocated_table("down-under", tmp_path)
    sim = tablectl("sim", "--config", config, "--seed", "3")
    try:
        assert sim.stdout is not None
        listing = [sim.stdout.readline() for _ in range(4)]
        assert all(" at=" in line for line in listing), listing
        run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db", "--metrics", "127.0.0.1:0")
        try:
            lines = _log_until(run, lambda seen: {"ready", "metrics_listening"} <= {x["event"] for x in seen})
            (listening,) = [x for x in lines if x["event"] == "metrics_listening"]
            url = listening["url"]
            status, content_type, text = _get(url)
            health = _get(url.replace("/metrics", "/healthz"))
            missing = _get(url.replace("/metrics", "/secrets"))
        finally:
            assert _stop(run) == 0
    finally:
        assert _stop(sim) == 0
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    assert health[0] == 200 and health[2] == "ok\n" and missing[0] == 404
    m = _samples(text)
    assert _value(m, "tablectl_ready") == 1
    for device in DEVICES:
        # Every device answered (ready), so each has a round trip in its histogram.
        assert _value(m, "tablectl_device_poll_seconds_count", device=device) >= 1
        assert _value(m, "tablectl_device_poll_seconds_bucket", device=device, le="+Inf") >= 1
        assert _value(m, "tablectl_device_health", device=device, health="online") == 1
        assert _value(m, "tablectl_device_health", device=device, health="fault") == 0
        assert _value(m, "tablectl_queue_depth", queue="commands", device=device) >= 0
    assert _value(m, "tablectl_queue_depth", queue="device_events", device="") >= 0
    assert _value(m, "tablectl_journal_seq") >= 1  # table_opened at least
    assert _value(m, "tablectl_round_number") == 0
    assert _value(m, "tablectl_journal_commit_seconds_count") >= 0  # declared before any step
    assert "tablectl_published_seq" not in m  # no broker: nothing to publish to, nothing claimed


def test_a_table_waiting_for_its_devices_is_not_healthy(tmp_path: Path) -> None:
    config = relocated_table("down-under", tmp_path)
    # The table file's [metrics] listen, as a systemd unit would run it (no --metrics).
    config.write_text(config.read_text(encoding="utf-8") + '\n[metrics]\nlisten = "127.0.0.1:0"\n')
    run = tablectl("run", "--config", config, "--journal", tmp_path / "j.db")
    try:
        lines = _log_until(run, lambda seen: seen[-1]["event"] == "metrics_listening")
        (listening,) = [x for x in lines if x["event"] == "metrics_listening"]
        health = _get(listening["url"].replace("/metrics", "/healthz"))
        m = _samples(_get(listening["url"])[2])
    finally:
        assert _stop(run) == 0
    assert health[0] == 503 and health[2].startswith("starting: waiting for ")
    assert _value(m, "tablectl_ready") == 0
    assert _value(m, "tablectl_device_health", device="shoe", health="connecting") == 1


def test_a_bad_metrics_address_in_the_table_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.cli import main

    config = relocated_table("down-under", tmp_path)
    config.write_text(config.read_text(encoding="utf-8") + '\n[metrics]\nlisten = "everywhere:9470"\n')
    assert main(["config", "check", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"{config}: metrics.listen: must be HOST:PORT with an IP address, e.g. 127.0.0.1:9470\n"
    )


async def test_a_metrics_process_that_dies_is_started_again(tmp_path: Path) -> None:
    """/metrics runs in a process of its own: killed, it is said in one line and served again on
    the same address by the table's process, which goes on meanwhile."""
    config = relocated_table("down-under", tmp_path)
    config.write_text(config.read_text(encoding="utf-8") + '\n[metrics]\nlisten = "127.0.0.1:0"\n')
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", "run", "--config", str(config),
        "--journal", str(tmp_path / "j.db"), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None

    async def until(event: str) -> dict[str, Any]:
        assert proc.stdout is not None
        while raw := await proc.stdout.readline():
            line: dict[str, Any] = json.loads(raw)
            if line["event"] == event:
                return line
        raise AssertionError(f"tablectl run ended before {event}")

    try:
        async with asyncio.timeout(120):
            started = await until("metrics_started")
            url = (await until("metrics_listening"))["url"]
            os.kill(started["pid"], signal.SIGKILL)
            died = await until("metrics_process_died")
            assert died["returncode"] == -signal.SIGKILL and died["level"] == "error"
            again = await until("metrics_started")
            assert again["pid"] != started["pid"] and again["restarts"] == 1
            status, _, text = await asyncio.to_thread(_get, url)
            assert status == 200 and "tablectl_ready" in text, text
    finally:
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
    assert proc.returncode == 0
