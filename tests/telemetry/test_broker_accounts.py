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
from paho.mqtt.reasoncodes import ReasonCode

from tests.telemetry.conftest import GUARD_S, MOSQUITTO_DIR, Broker, observer

ARCHIVE_ALARMS = "tablectl/site-a/archive/alarms"
T1 = "tablectl/site-a/t1"


def _add_user(tmp_path: pathlib.Path, role: str, name: str) -> subprocess.CompletedProcess[str]:
    acl = tmp_path / "acl"
    if not acl.exists():
        shutil.copy(MOSQUITTO_DIR / "acl", acl)
    env = {**os.environ, "TABLECTL_NEW_PASSWORD": "a-long-test-password"}
    return subprocess.run(
        [
            str(MOSQUITTO_DIR / "add-user.sh"),
            str(tmp_path / "passwd"),
            str(acl),
            str(tmp_path / "dynsec.json"),
            role,
            name,
        ],
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


async def test_the_archive_account_hears_every_table_s_birth_and_heartbeat(broker: Broker) -> None:
    """The shipped ACL (and add-user.sh's archive block) let a table publish its heartbeat and the
    archive read it and the retained birth: how the archive sees records it never received
    (docs/journal.md, "Gaps close themselves"); the table's other retained topics stay unread."""
    beat = b'{"version":1,"journal":{"last_seq":9,"published_seq":9}}'
    sentinel = b'{"version":1,"sentinel":true}'
    async with observer(broker, "archive-main") as obs:
        await _publish(
            broker,
            "site-a/t1",
            [
                (f"{T1}/state", beat),
                (f"{T1}/heartbeat", beat),
                (f"{T1}/status", beat),
                (f"{T1}/events", sentinel),
            ],
        )
        await obs.wait_for(lambda ms: any(m.payload == sentinel for m in ms))
        assert [m.topic for m in obs.messages] == [f"{T1}/heartbeat", f"{T1}/status", f"{T1}/events"]


async def _subscribe(broker: Broker, user: str, topic: str) -> int:
    """The reason code the broker answers ``user``'s SUBSCRIBE to ``topic`` with (MQTT 5)."""
    s = broker.settings(user)
    async with aiomqtt.Client(
        s.host,
        s.port,
        username=s.username,
        password=s.password,
        tls_context=s.tls_context(),
        protocol=aiomqtt.ProtocolVersion.V5,
    ) as client:
        (code,) = await client.subscribe(topic, qos=1)
        return int(code.value) if isinstance(code, ReasonCode) else int(code)


NOT_AUTHORIZED = 135  # MQTT 5 SUBACK reason code


@pytest.mark.parametrize("user", ["monitor-ops", "floor-console", "site-a/t1", "site-a/archive"])
async def test_no_account_but_the_archive_s_joins_its_shared_subscription(broker: Broker, user: str) -> None:
    """Issue 38: under acl_file alone a monitor joined $share/archive/tablectl/+/+/events and took
    its share of every table's events. The dynamic-security plugin refuses every $share/
    subscription of every account but an archive account's; the account's plain reads stand."""
    for topic in ("$share/archive/tablectl/+/+/events", "$share/archive/#", "$share/other/tablectl/#"):
        assert await _subscribe(broker, user, topic) == NOT_AUTHORIZED, topic
    if "/" not in user:
        assert await _subscribe(broker, user, "tablectl/+/+/events") == 1


async def test_the_archive_account_joins_no_other_shared_subscription(broker: Broker) -> None:
    assert await _subscribe(broker, "archive-main", "$share/archive/tablectl/+/+/events") == 1
    assert await _subscribe(broker, "archive-main", "$share/db2/tablectl/+/+/events") == 1
    for topic in ("$share/archive/tablectl/#", "$share/archive/tablectl/+/+/cmd/+"):
        assert await _subscribe(broker, "archive-main", topic) == NOT_AUTHORIZED, topic


async def test_no_account_changes_the_accounts_over_mqtt(broker: Broker) -> None:
    """The plugin takes commands on $CONTROL/dynamic-security/v1; no account has a grant there, so
    a floor's createClient is dropped and the account it made up cannot connect."""
    create = {"commands": [{"command": "createClient", "username": "floor-evil", "password": "pw"}]}
    await _publish(broker, "floor-console", [("$CONTROL/dynamic-security/v1", json.dumps(create).encode())])
    s = broker.settings("floor-console")
    with pytest.raises(aiomqtt.MqttError, match=r"[Nn]ot authori[sz]ed"):
        async with aiomqtt.Client(
            s.host, s.port, username="floor-evil", password="pw", tls_context=s.tls_context()
        ):
            pass


def test_add_user_gives_only_archive_accounts_the_archive_s_group(tmp_path: pathlib.Path) -> None:
    for role, name in [
        ("archive", "archive-db1"),
        ("monitor", "monitor-x"),
        ("table", "example-floor/dab-01"),
    ]:
        assert _add_user(tmp_path, role, name).returncode == 0
    doc = json.loads((tmp_path / "dynsec.json").read_text(encoding="utf-8"))
    roles = {c["username"]: [r["rolename"] for r in c["roles"]] for c in doc["clients"]}
    assert roles == {
        "archive-db1": ["tablectl-archive"],
        "monitor-x": ["tablectl-no-shared"],
        "example-floor/dab-01": ["tablectl-no-shared"],
    }
    # The plugin answers nothing but these subscriptions: every other right is the ACL's.
    assert set(doc["defaultACLAccess"].values()) == {False}


@pytest.mark.parametrize(
    "line",
    [
        "floor-old:$6$c2FsdA==$aGFzaA==",  # mosquitto 1.x's SHA512: no PBKDF2 form to copy
        'floor-"x:$7$101$c2FsdA==$aGFzaA==',  # would end the JSON string
        "floor-\\x:$7$101$c2FsdA==$aGFzaA==",
    ],
)
def test_dynsec_accounts_refuses_what_it_cannot_copy_and_keeps_the_old_file(
    tmp_path: pathlib.Path, line: str
) -> None:
    assert _add_user(tmp_path, "monitor", "monitor-x").returncode == 0
    before = (tmp_path / "dynsec.json").read_text(encoding="utf-8")
    with (tmp_path / "passwd").open("a", encoding="utf-8") as f:
        f.write(line + "\n")
    done = subprocess.run(
        [str(MOSQUITTO_DIR / "dynsec-accounts.sh"), str(tmp_path / "passwd"), str(tmp_path / "dynsec.json")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done
    assert done.stderr.startswith("dynsec-accounts.sh: line 2: "), done.stderr
    assert (tmp_path / "dynsec.json").read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acl", "dynsec.json", "passwd"]
