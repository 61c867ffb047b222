"""The cluster's users and their permissions as `tablectl archive nats-accounts` writes them, and
the NATS settings a table or a worker is given: what each name may do, and the refusals in one
line. (tests/archive/test_nats_security.py runs them on a real cluster.)"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from nats.aio.msg import Msg

from controller.archive.jetstream import JetStreamSettings, JetStreamWorker, Pulled
from controller.archive.nats_accounts import render
from controller.errors import ConfigError
from controller.telemetry.nats_link import inbox_prefix, nats_settings, parse_servers, subject_of, topic_of


def users(text: str) -> dict[str, dict[str, Any]]:
    found = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    return {u["user"]: u for u in found}


def test_each_table_has_an_mqtt_user_and_a_nats_user_limited_to_its_own_subjects() -> None:
    got = users(render({"floor-1/dab-01": "pw", "archive-1": "pw2", "admin": "pw3"}))
    mqtt, js = got["floor-1/dab-01"], got["floor-1/dab-01/events"]
    assert mqtt["allowed_connection_types"] == ["MQTT"]
    assert all(s.startswith("tablectl.floor-1.dab-01.") for s in mqtt["permissions"]["publish"]["allow"])
    assert "tablectl.floor-1.dab-01.cmd.*.result" in mqtt["permissions"]["publish"]["allow"]
    assert "tablectl.floor-1.dab-01.cmd.*" in mqtt["permissions"]["subscribe"]["allow"]
    assert js["allowed_connection_types"] == ["STANDARD"]
    assert js["permissions"]["publish"]["allow"] == ["tablectl.floor-1.dab-01.events"]
    assert js["permissions"]["subscribe"]["allow"] == ["_INBOX_floor-1_dab-01_events.>"]
    archive = got["archive-1"]["permissions"]
    assert not any(s.startswith("$JS.API.STREAM.") and "INFO" not in s for s in archive["publish"]["allow"])
    assert got["admin"]["permissions"]["publish"]["allow"] == ["$JS.API.>"]


@pytest.mark.parametrize(
    ("passwords", "error"),
    [
        ({"someone": "pw"}, "not SITE/TABLE, archive-*, floor-*, monitor-* or admin"),
        ({"floor-1/archive": "pw"}, "reserved for the casino's archive"),
        ({"floor-1/dab+01": "pw"}, "one MQTT topic level"),
        ({"archive-1": "two words"}, "a password without spaces"),
    ],
)
def test_a_name_or_password_that_is_no_role_is_refused_in_one_line(
    passwords: dict[str, str], error: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)) as e:
        render(passwords)
    assert "\n" not in str(e.value)


def test_subjects_follow_the_mqtt_listeners_mapping() -> None:
    assert subject_of("tablectl/floor-1/bj.7/events") == "tablectl.floor-1.bj//7.events"
    assert topic_of("tablectl.floor-1.bj//7.events") == "tablectl/floor-1/bj.7/events"
    assert inbox_prefix("floor-1/bj.7/events") == "_INBOX_floor-1_bj_7_events"


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("", "no servers"),
        ("mqtt://a:1883", "is not nats://host:port or tls://host:port"),
        ("nats://u:p@a:4222", "may not carry credentials"),
        ("nats://a:4222,tls://b:4222", "not a mix"),
    ],
)
def test_bad_server_lists_are_refused(spec: str, error: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)):
        parse_servers(spec)


def test_credentials_come_from_the_environment_and_a_user_only_with_a_password() -> None:
    open_cluster = nats_settings("nats://a:4222", {}, username="archive-1")
    assert open_cluster.username is None
    s = nats_settings("tls://a:4222", {"TABLECTL_NATS_PASSWORD": "pw"}, username="archive-1")
    assert (s.username, s.password, s.tls) == ("archive-1", "pw", True)
    assert "pw" not in repr(s)


def test_the_gap_grace_follows_how_long_records_wait_in_the_stream() -> None:
    """35.5: records 20 s old in the stream, or a backlog in the consumer, make the sweep wait
    longer before asking a table again (the grace is --gap-grace + 2 x this)."""
    worker = JetStreamWorker(JetStreamSettings(["nats://127.0.0.1:1"], gap_grace_s=10.0))
    assert worker.behind_s() == 0.0
    stored_ns = int((time.time() - 20.0) * 1e9)  # the stream's timestamp of the message, 20 s ago
    msg = Msg(
        _client=None,
        subject="tablectl.f.t.events",
        reply=f"$JS.ACK.TABLECTL_EVENTS.archive.1.7.7.{stored_ns}.0",
    )  # type: ignore[arg-type]
    worker._lag.observe(time.time(), [Pulled(msg, "tablectl/f/t/events", b"", datetime.now(UTC))])
    assert 19.0 < worker.behind_s() < 30.0
    worker.pending = 10_000  # more than a batch waits in the consumer
    assert worker.behind_s() > 29.0
