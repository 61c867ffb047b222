"""The clustered pipeline loses a broker node and a worker and nothing else: the shortened
bench/archive_failover.py (20 tables at 10 events a second for 15 s, a three-node NATS cluster,
two ``tablectl archive --nats`` worker processes, SIGKILL to one node and then one worker)."""

from __future__ import annotations

import pathlib

from bench.archive_failover import run
from tests.nats_fixtures import nats_binary


async def test_a_node_and_a_worker_killed_mid_ingest_lose_nothing(tmp_path: pathlib.Path) -> None:
    nats_binary()  # skips when nats-server is not installed
    result = await run(20, 10.0, 15.0, 5.0, tmp_path)
    assert result["events_published"] == 20 * 10 * 15
    assert result["lost"] == 0 and result["duplicated"] == 0, result
    assert result["events_archived"] == result["events_published"], result
    assert result["chain_alarms"] == 0, result
    assert result["table_reconnects"] > 0, "the killed node's tables moved to another"
