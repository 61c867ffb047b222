"""Broker accounts (issue 23 item 4): add-user.sh refuses reserved and malformed names and an
existing account, and the shipped ACL keeps every account but the archive's out of the archive's
topics. The broker is a real mosquitto with the shipped ACL and add-user.sh's accounts
(tests/telemetry/conftest.py)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import shutil
import subprocess

import aiomqtt
import pytest

from tests.telemetry.conftest import GUARD_S, MOSQUITTO_DIR, Broker, observer

ARCHIVE_ALARMS = "tablectl/site-a/archive/alarms"
T1 = "tablectl/site-a/t1"


def _add_user(tmp_path: pathlib.Path, role: str, name: str) -> subprocess.CompletedProcess[str]:
    acl = tmp_path / "acl"
    if not acl.exists():
        shutil.copy(MOSQUITTO_DIR / "acl", acl)
    env = {**os.environ, "TABLECTL_NEW_PASSWORD": "a-long-test-password"}
    return subprocess.run(
        [str(MOSQUITTO_DIR / "add-user.sh"), str(tmp_path / "passwd"), str(acl), role, name],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("role", "name"),
    [
        ("table", "example-floor/archive"),  # the archive's topics (issue 23: forged archive alarms)
        ("table", "example-floor/ARCHIVE"),
        ("table", "example-floor/dab-01/x"),  # three levels
        ("table", "example-floor/+"),
        ("table", "example-floor/#"),
        ("table", "+/dab-01"),
        ("table", "/dab-01"),
        ("table", "example-floor/"),
        ("table", "example-floor/dab 01"),
        ("table", "example-floor/dab-01\nuser floor-evil"),  # a line of its own in the ACL
        ("table", "dab-01"),  # no site
        ("table", "example-floor/" + "t" * 65),
        ("floor", "floor-a/b"),
        ("floor", "floor-+"),
        ("floor", "floor-#"),
        ("floor", "floor-"),
        ("floor", "monitor-ops"),  # another role's name
        ("floor", "archive"),
        ("monitor", "monitor-x\ntopic write #"),
        ("monitor", "floor-console"),
        ("archive", "archive"),
        ("archive", "archive-a/b"),
        ("archive", "monitor-archive"),
        ("device", "device-x"),  # not a role add-user.sh makes
    ],
)
def test_add_user_refuses_reserved_and_malformed_names(tmp_path: pathlib.Path, role: str, name: str) -> None:
    done = _add_user(tmp_path, role, name)
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("add-user.sh: "), done.stderr
    assert not (tmp_path / "passwd").exists()
    assert (tmp_path / "acl").read_text(encoding="utf-8") == (MOSQUITTO_DIR / "acl").read_text(
        encoding="utf-8"
    )


@pytest.mark.parametrize(("role", "name"), [("table", "example-floor/dab-01"), ("floor", "floor-jsmith")])
def test_add_user_refuses_an_existing_account(tmp_path: pathlib.Path, role: str, name: str) -> None:
    assert _add_user(tmp_path, role, name).returncode == 0
    passwd, acl = (tmp_path / "passwd").read_text(), (tmp_path / "acl").read_text()
    again = _add_user(tmp_path, role, name)
    assert again.returncode == 2 and "already has an account" in again.stderr
    assert (tmp_path / "passwd").read_text() == passwd and (tmp_path / "acl").read_text() == acl


def test_add_user_archive_account_gets_its_block(tmp_path: pathlib.Path) -> None:
    assert _add_user(tmp_path, "archive", "archive-db1").returncode == 0
    block = (
        "user archive-db1\ntopic read tablectl/+/+/events\ntopic read tablectl/+/+/status\n"
        "topic read tablectl/+/+/heartbeat\ntopic read tablectl/+/+/cmd/republish/result\n"
        "topic write tablectl/+/+/cmd/republish\ntopic write tablectl/+/archive/alarms\n"
    )  # events in, where each journal stands (status, heartbeat), gaps asked for, its alarms out
    assert (tmp_path / "acl").read_text().endswith(block)


async def _publish(broker: Broker, user: str, messages: list[tuple[str, bytes]]) -> None:
    """Each publish acknowledged: the broker has dealt with it (delivered or dropped) on return."""
    s = broker.settings(user)
    async with aiomqtt.Client(
        s.host, s.port, username=s.username, password=s.password, tls_context=s.tls_context()
    ) as client:
        for topic, body in messages:
            await client.publish(topic, body, qos=1)


def _alarm(detail: str) -> bytes:
    doc = {"version": 1, "site": "site-a", "table": "t1", "seq": 7, "alarm": "fork", "detail": detail}
    return json.dumps(doc).encode()


async def test_only_the_archive_account_publishes_archive_alarms(broker: Broker) -> None:
    """Issue 23: an appliance account named <site>/archive published forged archive alarms that the
    monitor showed. The ACL denies tablectl/<site>/archive/ to every account but the archive's,
    whatever its name; the archive's account publishes its alarms and nothing as a table."""
    sentinel = b'{"version":1,"online":true,"birth":"sentinel"}'
    async with observer(broker, "monitor-ops") as obs:
        forged = _alarm("forged")
        await _publish(
            broker,
            "site-a/archive",
            [(ARCHIVE_ALARMS, forged), ("tablectl/site-a/archive/events", forged)],
        )
        await _publish(
            broker, "site-a/t1", [(ARCHIVE_ALARMS, forged), ("tablectl/site-b/archive/alarms", forged)]
        )
        await _publish(broker, "floor-console", [(ARCHIVE_ALARMS, forged)])
        await _publish(broker, "archive-main", [(f"{T1}/events", forged), (f"{T1}/status", forged)])
        real = _alarm("real")
        await _publish(broker, "archive-main", [(ARCHIVE_ALARMS, real)])
        await _publish(broker, "site-a/t1", [(f"{T1}/status", sentinel)])
        # Each publish above was acknowledged before the next client sent: the broker had dealt
        # with all of them, in this order, when the sentinel reached the monitor.
        await obs.wait_for(lambda ms: any(m.payload == sentinel for m in ms))
        assert [(m.topic, m.payload) for m in obs.messages] == [
            (ARCHIVE_ALARMS, real),
            (f"{T1}/status", sentinel),
        ]


async def test_the_archive_account_reads_events_through_a_shared_subscription(broker: Broker) -> None:
    s = broker.settings("archive-main")
    async with aiomqtt.Client(
        s.host,
        s.port,
        username=s.username,
        password=s.password,
        tls_context=s.tls_context(),
        protocol=aiomqtt.ProtocolVersion.V5,
    ) as client:
        await client.subscribe("$share/archive/tablectl/+/+/events", qos=1)
        await _publish(broker, "site-a/t1", [(f"{T1}/events", b'{"version":1}')])
        async with asyncio.timeout(GUARD_S):
            message = await anext(aiter(client.messages))
        assert message.topic.value == f"{T1}/events"
