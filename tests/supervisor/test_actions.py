"""The one allow-list: the docs list exactly its actions, every action is reachable through the
supervisor, and a device marked out of order comes back (673a.13(l))."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from controller.action_docs import DOCS, generated, markdown_table
from controller.actions import ACTIONS, FLOOR, BadAction, check_args
from controller.supervisor.health import DeviceHealth
from controller.supervisor.rig import ROOT, Rig
from controller.telemetry.commands import COMMANDS
from tests.supervisor.conftest import assert_journal_sound, journal_kinds

MakeRig = Callable[..., Awaitable[Rig]]
REGENERATE = "regenerate with: python -m controller.action_docs"


def _generated(doc: str) -> str:
    table = generated((ROOT / doc).read_text(encoding="utf-8"))
    assert table is not None, f"{doc}: the generated actions table is missing"
    return table


def test_the_docs_list_the_allow_list() -> None:
    for doc, roles in DOCS.items():
        assert _generated(doc) == markdown_table(roles), f"{doc}: {REGENERATE}"
    mqtt = _generated("docs/mqtt.md")
    assert {n for n in ACTIONS if f"`{n}`" in mqtt} == set(COMMANDS)


def test_every_action_is_carried_out_by_the_supervisor() -> None:
    source = (Path(ROOT) / "controller/supervisor/command_api.py").read_text(encoding="utf-8")
    telemetry = (Path(ROOT) / "controller/telemetry/publisher.py").read_text(encoding="utf-8")
    for action in ACTIONS.values():
        if action.telemetry:  # answered from the journal by the telemetry; no rule of play
            assert f'"{action.name}"' in telemetry and action.section == "-", action.name
            continue
        assert action.build is not None or f'name == "{action.name}"' in source, action.name
        assert action.roles and re.match(r"6[0-9]{2}a\.", action.section), action.name


async def test_a_device_marked_out_of_order_is_restored(table_rig: MakeRig) -> None:
    rig = await table_rig("double-back-jack")
    sup = rig.supervisor
    assert (await sup.command("mark_out_of_order", {"device": "shuffler"}, "floor-7", "floor"))["ok"]
    assert sup.table.shuffler_out_of_order and sup.health["shuffler"] is DeviceHealth.OUT_OF_ORDER
    restored = await sup.command("device_restored", {"device": "shuffler"}, "floor-7", "floor")
    assert restored["ok"] and restored["events"] == ["shuffler_restored"], restored
    assert not sup.table.shuffler_out_of_order and sup.health["shuffler"] is DeviceHealth.ONLINE
    for device in ("reader", "keypad", "shoe"):
        assert (await sup.command("mark_out_of_order", {"device": device}, "floor-7", "floor"))["ok"]
        assert sup.health[device] is DeviceHealth.OUT_OF_ORDER
        assert (await sup.command("device_restored", {"device": device}, "floor-7", "floor"))["ok"]
        assert sup.health[device] is DeviceHealth.ONLINE
    assert not sup.table.reader_failed and not sup.shoe_failed and not sup.translator.progressive_closed


SAMPLE = {
    "back": "red",
    "device": "shuffler",
    "section": "673a.13(l)",
    "key": "next",
    "name": "dana",
    "dealer": "dana",
    "reason": "the floor's reason",
}


async def test_every_action_reaches_the_table(table_rig: MakeRig) -> None:
    """Each action, with arguments of the right shape, is carried out or refused by the table's
    own rules (a section), never by the plumbing (unknown, not implemented, role)."""
    rig = await table_rig("double-back-jack")
    for action in ACTIONS.values():
        if action.telemetry:  # the telemetry answers it (tests/archive/test_gaps.py); not the table
            result = await rig.supervisor.command(action.name, {"from_seq": 1, "to_seq": 1}, "someone", FLOOR)
            assert "over MQTT only" in str(result.get("error")), result
            continue
        args: dict[str, object] = {}
        for key, arg in action.args.items():
            if key == "ask":  # the ask it answers: the one the table asks now
                args[key] = rig.supervisor.snapshot()["asking"]["id"]
            elif arg.kind is str:
                args[key] = SAMPLE[key]
            elif arg.kind is bool:
                args[key] = False
            elif arg.kind is list:
                args[key] = [1]
            else:
                args[key] = arg.minimum if arg.minimum is not None else 1
        role = sorted(action.roles)[0]
        result = await rig.supervisor.command(action.name, args, "someone", role)
        error = str(result.get("error", ""))
        by_rule = re.match(r"(6[0-9]{2}a\.[0-9]|alarm: |input: )", error) is not None
        assert result["ok"] or by_rule or "not marked out of order" in error, (action.name, result)
    # The reasons went into the journal with who took each action, and a restart replays them.
    assert any(p.get("reason") for k, p in journal_kinds(rig.supervisor.journal_path) if k == "action_taken")
    assert_journal_sound(rig)


def test_a_reason_is_one_printable_line_of_at_most_200_characters() -> None:
    """The reason a destructive action takes goes into the journal as given: one line, bounded."""

    void = ACTIONS["void_round"]
    ok = {"section": "665a.13(h)(1)", "reason": "r" * 200}
    assert check_args(void, ok) == ok
    for bad in ("r" * 201, "two\nlines", ""):
        with pytest.raises(BadAction, match="argument 'reason'"):
            check_args(void, {"section": "665a.13(h)(1)", "reason": bad})
