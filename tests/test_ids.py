"""One validator for each kind of name (controller/ids.py), matched whole: a trailing newline, which
``re.match`` with ``$`` lets through, is refused by every parser that takes a name."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller import ids
from controller.actions import BadAction, check
from controller.archive.messages import Unreadable, parse_event
from controller.errors import ConfigError, TablectlError
from controller.journal import Classification, JournalError
from controller.journal.model import prepare
from controller.server_settings import console_settings
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import ROOT
from controller.telemetry.commands import Refused, parse_command
from controller.telemetry.monitor import parse_allow_host
from controller.telemetry.topics import TableTopics

TABLE = "tables/double-attack.toml"


def test_every_pattern_refuses_a_trailing_newline() -> None:
    good = {
        ids.IDENTIFIER: "dbj-01",
        ids.EVENT_KIND: "card_dealt",
        ids.TEXT: "Pat Floor",
        ids.USER_NAME: "pat",
        ids.BACK_COLOUR: "red",
        ids.ENV_NAME: "TABLECTL_PASSWORD",
    }
    for pattern, value in good.items():
        assert ids.matches(pattern, value), pattern
        assert not ids.matches(pattern, value + "\n"), pattern
        assert not ids.matches(pattern, 7), pattern
    assert ids.is_identifier("dbj-01") and not ids.is_identifier("dbj-01\n")
    assert ids.is_host_name("ops.example.") and not ids.is_host_name("ops.example\n")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "config", tmp_path / "config", ignore=shutil.ignore_patterns("mosquitto", "systemd")
    )
    return tmp_path / "config"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('id = "dab-01"', 'id = "dab-01\\n"', "table.id"),
        ("[table]\n", '[table]\nsite = "example-floor\\n"\n', "table.site"),
        (
            "[devices.shuffler]\n",
            '[devices.shuffler]\nbacks = ["red\\n", "blue"]\n',
            "devices.shuffler.backs",
        ),
        ("[devices.shoe]", '[devices."shoe\\n"]', "devices.shoe\\\\n"),
    ],
    ids=["table id", "site", "back colour", "device name"],
)
def test_the_table_file_refuses_a_name_with_a_newline(config: Path, old: str, new: str, key: str) -> None:
    load_table_config(config / TABLE)
    _edit(config / TABLE, old, new)
    with pytest.raises(ConfigError, match=f"{key}: "):
        load_table_config(config / TABLE)


def test_the_topic_tree_refuses_it() -> None:
    with pytest.raises(ConfigError):
        TableTopics("example-floor", "dbj-01\n")
    with pytest.raises(ConfigError):
        TableTopics("example-floor\n", "dbj-01")


def test_commands_refuse_it() -> None:
    with pytest.raises(BadAction, match="device"):
        check("mark_out_of_order", {"device": "shoe\n"}, "Pat Floor", "floor")
    with pytest.raises(BadAction, match="who"):
        check("mark_out_of_order", {"device": "shoe"}, "Pat\nFloor", "floor")
    payload = b'{"version": 1, "id": "r1", "who": "Pat\\n", "role": "floor", "args": {"device": "shoe"}}'
    with pytest.raises(Refused, match="who"):
        parse_command("mark_out_of_order", payload)


def test_the_journal_and_the_archive_refuse_such_a_kind() -> None:
    prepare("card_dealt", {}, Classification.PUBLIC, 1.0)
    with pytest.raises(JournalError, match="kind"):
        prepare("card_dealt\n", {}, Classification.PUBLIC, 1.0)
    body = b'{"version": 1, "seq": 1, "kind": "card_dealt\\n", "classification": "public"}'
    with pytest.raises(Unreadable, match="kind"):
        parse_event("tablectl/example-floor/dbj-01/events", body, datetime.now(UTC))


def test_host_names_for_the_console_and_the_monitor_refuse_it(tmp_path: Path) -> None:
    with pytest.raises(TablectlError):
        parse_allow_host("ops.example\n")
    doc = {"console": {"allow_hosts": ["table-12.pit.example\n"]}}
    with pytest.raises(ConfigError, match="allow_hosts"):
        console_settings(doc, tmp_path, "t.toml", need_users=False)
