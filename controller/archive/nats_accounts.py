"""The NATS cluster's accounts and permissions (``tablectl archive nats-accounts``): the file
config/nats/node.conf includes, made from one list of who is who (docs/scale-out.md,
"Accounts, permissions and TLS"). The same function makes the tests' clusters' accounts.

Every user is in the account FLOOR (the tables' MQTT sessions, the stream and its consumer live
there); what each may do is its permissions, and anything not granted is refused:

- ``<site>/<table>``: the table over MQTT only: its own status, state, events, heartbeat,
  alarms, devices and command results; its own commands and status to read;
- ``<site>/<table>/events``: the same table over NATS only (its JetStream publisher): its own
  events subject, and its own inbox for the PubAcks;
- ``archive-<name>``: a worker: the stream's and its consumer's info, the next messages and their
  acks, its own consumer created again; republish requests out, the tables' results and
  status in; the archive's alarms; never a stream's creation, change or deletion;
- ``floor-<name>`` / ``monitor-<name>``: MQTT only, as on mosquitto (config/mosquitto/acl);
- ``admin``: the JetStream API, for making the stream (``tablectl archive --nats ... --setup``).

MQTT clients need ``$MQTT.sub.>`` (their QoS 1 deliveries); those users may not connect over
NATS, where that subject would show them every other MQTT client's deliveries, and an MQTT client
cannot subscribe to it. Each NATS user reads only its own inbox prefix (controller/telemetry/
nats_link.py), so no one reads the replies another asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from controller.archive.gaps import ANNOUNCEMENTS
from controller.errors import ConfigError
from controller.telemetry.nats_link import inbox_prefix, subject_of
from controller.telemetry.topics import ARCHIVE_LEVEL, ROOT, TableTopics

ACCOUNT = "FLOOR"
STREAM = "TABLECTL_EVENTS"
DURABLE = "archive"
ADMIN = "admin"
_MQTT_SUB = "$MQTT.sub.>"


def events_user(site: str, table: str) -> str:
    """The table's NATS user (its JetStream publisher); its MQTT user is ``<site>/<table>``."""
    return f"{site}/{table}/events"


def _user(name: str, password: str, publish: Iterable[str], subscribe: Iterable[str], kind: str) -> str:
    perms = {"publish": {"allow": sorted(publish)}, "subscribe": {"allow": sorted(subscribe)}}
    return json.dumps(
        {"user": name, "password": password, "allowed_connection_types": [kind], "permissions": perms}
    )


def _table(site: str, table: str, password: str) -> list[str]:
    t = TableTopics(site, table)
    mqtt_pub = [t.status, t.state, t.events, t.heartbeat, t.alarms, t.device("*"), t.command_result("*")]
    mqtt_sub = [t.command("*"), t.status]  # the MQTT filter cmd/+ is the subject cmd.*
    nats_user = events_user(site, table)
    return [
        _user(
            f"{site}/{table}",
            password,
            map(subject_of, mqtt_pub),
            [*map(subject_of, mqtt_sub), _MQTT_SUB],
            "MQTT",
        ),
        _user(nats_user, password, [subject_of(t.events)], [inbox_prefix(nats_user) + ".>"], "STANDARD"),
    ]


def _archive(name: str, password: str) -> str:
    api = "$JS.API"
    publish = [
        f"{api}.INFO",
        f"{api}.STREAM.INFO.{STREAM}",
        f"{api}.CONSUMER.INFO.{STREAM}.{DURABLE}",
        f"{api}.CONSUMER.DURABLE.CREATE.{STREAM}.{DURABLE}",
        f"{api}.CONSUMER.CREATE.{STREAM}.{DURABLE}",
        f"{api}.CONSUMER.CREATE.{STREAM}.{DURABLE}.>",
        f"{api}.CONSUMER.MSG.NEXT.{STREAM}.{DURABLE}",
        f"$JS.ACK.{STREAM}.{DURABLE}.>",
        f"{ROOT}.*.*.cmd.republish",
        f"{ROOT}.*.{ARCHIVE_LEVEL}.alarms",
    ]
    # The tables' republish results and their announcements (status, heartbeat: where each
    # journal stands, controller/archive/gaps.py ANNOUNCEMENTS).
    subscribe = [inbox_prefix(name) + ".>", f"{ROOT}.*.*.cmd.republish.result"]
    subscribe += [subject_of(topic).replace("+", "*") for topic in ANNOUNCEMENTS]
    return _user(name, password, publish, subscribe, "STANDARD")


def render(passwords: Mapping[str, str]) -> str:
    """The ``accounts`` block for every user in ``passwords`` (name -> password), each given its
    role by its name; ConfigError for a name that is none of them."""
    users: list[str] = []
    for name, password in sorted(passwords.items()):
        if not password or any(c.isspace() for c in password):
            raise ConfigError(f"nats-accounts: {ascii(name)[1:-1][:80]}: a password without spaces is needed")
        if name.count("/") == 1:
            site, table = name.split("/")
            try:
                users += _table(site, table, password)
            except ConfigError as e:
                raise ConfigError(f"nats-accounts: {ascii(name)[1:-1][:80]}: {e}") from None
        elif name.startswith("archive-"):
            users.append(_archive(name, password))
        elif name.startswith(("floor-", "monitor-")):
            publish = [f"{ROOT}.*.*.cmd.*"] if name.startswith("floor-") else []
            users.append(_user(name, password, publish, [f"{ROOT}.>", _MQTT_SUB], "MQTT"))
        elif name == ADMIN:
            users.append(_user(name, password, ["$JS.API.>"], [inbox_prefix(name) + ".>"], "STANDARD"))
        else:
            raise ConfigError(
                f"nats-accounts: {ascii(name)[1:-1][:80]}: "
                "not SITE/TABLE, archive-*, floor-*, monitor-* or admin"
            )
    lines = "\n".join(f"      {u}" for u in users)
    return (
        "# Made by `tablectl archive nats-accounts` (docs/scale-out.md); included by node.conf.\n"
        f"accounts {{\n  {ACCOUNT} {{\n    jetstream: enabled\n    users: [\n{lines}\n    ]\n  }}\n}}\n"
    )
