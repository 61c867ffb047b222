"""A flood of floor commands over MQTT (issue 38 item 8: 995 of 2,000 dropped silently by a queue
of 1,000 and logged as 997 lines). With the table's command handler busy, 2,000 commands arrive
from a floor account (an attacker's process of its own) through a real mosquitto with the shipped
ACL: each gets exactly one result, the ones past the queue a refusal saying why, counted for
/metrics, in one log line."""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
import sys
from typing import Any

import aiomqtt
import pytest
from structlog.testing import capture_logs

from controller import logs
from controller.backoff import BackoffPolicy
from controller.journal import Journal
from controller.supervisor.metrics import Readings, TableMetrics
from controller.telemetry import TableIdentity, Telemetry
from controller.telemetry.config import versions
from controller.telemetry.inbox import COMMAND_QUEUE
from tests.telemetry.conftest import PASSWORD, Broker, observer

ROOT = pathlib.Path(__file__).resolve().parents[2]
FLOOD = 2000


async def _flood(port: int, ca: str) -> None:
    """The attacker: ``FLOOD`` commands at once, QoS 1, as a floor account."""
    import ssl

    async with aiomqtt.Client(
        "127.0.0.1", port, username="floor-console", password=PASSWORD["floor-console"],
        tls_context=ssl.create_default_context(cafile=ca), max_inflight_messages=FLOOD,
    ) as client:  # fmt: skip
        client.pending_calls_threshold = FLOOD + 1
        body = {"version": 1, "who": "floor-ann", "role": "floor"}
        await asyncio.gather(
            *(
                client.publish(
                    "tablectl/site-a/t1/cmd/reshuffle_ordered", json.dumps({**body, "id": f"c-{i}"}), qos=1
                )
                for i in range(FLOOD)
            )
        )


async def test_commands_past_the_queue_are_refused_with_a_result_counted_and_one_line(
    broker: Broker, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    logs.configure(cache=False)  # capture_logs misses cached loggers
    journal = tmp_path / "j.db"
    Journal.open(journal).close()
    release = asyncio.Event()
    handled: list[str] = []

    async def busy(name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        await release.wait()  # the table is busy: commands wait in the queue
        handled.append(name)
        return {"ok": True}

    def results() -> list[dict[str, Any]]:
        return [m.json() for m in floor.on("cmd/reshuffle_ordered/result")]

    with capture_logs() as lines, caplog.at_level(logging.WARNING):
        identity = TableIdentity("site-a", "t1", "double-attack", "sha256:test", versions())
        telemetry = Telemetry(
            broker.settings("site-a/t1", keepalive=30), identity, journal, command=busy,
            backoff=BackoffPolicy(initial_s=0.05, max_s=0.5),
        )  # fmt: skip
        async with observer(broker, topic="tablectl/site-a/t1/#") as floor:
            await telemetry.start()
            try:
                await floor.wait_for(lambda ms: any(m.json().get("online") is True for m in ms))
                attacker = await asyncio.create_subprocess_exec(
                    sys.executable, "-c",
                    "import asyncio, sys; from tests.telemetry.test_command_flood import _flood; "
                    "asyncio.run(_flood(int(sys.argv[1]), sys.argv[2]))",
                    str(broker.port), str(broker.pki / "ca.crt"), cwd=ROOT,
                )  # fmt: skip
                assert await attacker.wait() == 0  # all 2,000 taken by the broker
                # Past the queue: refused at once, while the table is still busy.
                await floor.wait_for(lambda ms: len(results()) >= FLOOD - COMMAND_QUEUE - 1, guard_s=120)
                release.set()
                # The queue's thousand handled one by one: slow on a loaded machine, so a long guard.
                await floor.wait_for(lambda ms: len(results()) >= FLOOD, guard_s=300)
                async with asyncio.timeout(30):
                    await telemetry.overflow.quiet.wait()
            finally:
                await telemetry.stop()
    got = results()
    assert sorted(r["id"] for r in got) == sorted(f"c-{i}" for i in range(FLOOD))  # one each
    refused = [r for r in got if not r["ok"]]
    assert len(refused) + len(handled) == FLOOD and len(refused) >= FLOOD - COMMAND_QUEUE - 1
    assert all("command queue is full" in r["error"] and r["who"] == "floor-ann" for r in refused)
    assert telemetry.overflow.refused == len(refused)
    said = [x for x in lines if x["event"] == "telemetry.commands_refused"]
    assert len(said) == 1 and said[0]["count"] == len(refused), said
    assert not [r for r in caplog.records if "queue" in r.getMessage().lower()]  # aiomqtt's own lines
    # Counted for /metrics (the supervisor reads the telemetry's count at scrape time).
    metrics = TableMetrics("t1")
    metrics.watch(
        Readings(
            table=lambda: None, health={}, event_queue=lambda: 0, outbox_queues=dict,
            journal_seq=lambda: None, published_seq=lambda: None, ready=lambda: True,
            commands_refused=lambda: telemetry.overflow.refused,
        )
    )  # fmt: skip
    value = metrics.registry.get_sample_value("tablectl_commands_refused_total", {"reason": "queue_full"})
    assert value == len(refused)
