"""The shell around the core: authorised commands refused in one line and changing nothing, logs
that carry the table and device and no secrets, a driver that crashes restarts on its own,
``tablectl config check``, and a clean stop that leaves the sensors locked."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from controller import logs
from controller.cli import main as tablectl
from controller.supervisor.config import load_table_config
from controller.supervisor.health import DeviceHealth
from controller.supervisor.rig import TABLES, Rig
from controller.supervisor.supervisor import Supervisor
from devices import commands as dc
from devices.events import Key

MakeRig = Callable[..., Awaitable[Rig]]
CARD = re.compile(r"\b(10|[2-9AJQK])[SHDC]\b")


@pytest.mark.parametrize(
    ("name", "args", "role", "error"),
    [
        ("launch_missiles", {}, "floor", "unknown command"),
        ("reader_replaced", {}, "dealer", "may not do this"),
        ("alarm_acknowledged", {"alarm": "1"}, "floor", "must be an integer"),
        ("alarm_acknowledged", {}, "floor", "missing argument"),
        ("new_dealer", {"name": "x", "extra": 1}, "floor", "unknown argument"),
        ("first_player_seated", {"seat": True}, "dealer", "must be an integer"),
        ("alarm_acknowledged", {"alarm": 99}, "floor", "alarm: no active alarm 99"),
        ("key", {"key": "jump"}, "dealer", "argument 'key' must be one of start_game, hit"),
        ("start_round", {"boxes": []}, "dealer", "list of 1 to 6 integers"),
        ("start_round", {"boxes": [7]}, "dealer", "out of range"),
        ("device_restored", {"device": "shoe"}, "floor", "not marked out of order"),
        ("device_restored", {"device": "toaster"}, "floor", "no device 'toaster'"),
    ],
)
async def test_bad_commands_are_refused_and_change_nothing(
    name: str, args: dict[str, object], role: str, error: str, table_rig: MakeRig
) -> None:
    rig = await table_rig("double-back-jack")
    sup = rig.supervisor
    before, seq = sup.table.fingerprint(), sup.jt.journal.last_seq if sup.jt else 0
    result = await sup.command(name, args, "someone", role)
    assert result["ok"] is False and error in result["error"] and "\n" not in result["error"]
    assert sup.table.fingerprint() == before and sup.jt is not None and sup.jt.journal.last_seq == seq


async def test_a_command_is_journalled_with_who_did_it(table_rig: MakeRig) -> None:
    rig = await table_rig("double-back-jack")
    result = await rig.supervisor.command("new_dealer", {"name": "dana"}, "floor-7", "floor")
    assert result == {"ok": True, "events": ["new_dealer"], "seq": result["seq"]}
    inspected = await rig.supervisor.command(
        "inspection_verified", {"back": "red", "dealer": "dana"}, "floor-7", "floor"
    )
    assert inspected["ok"] and "decks_opened" in inspected["events"]
    assert rig.supervisor.table.batches["red"].opened_at is not None


async def test_logs_carry_table_and_device_and_no_card(table_rig: MakeRig) -> None:
    out = io.StringIO()
    logs.configure(stream=out, cache=False)
    rig = await table_rig("down-under")
    await rig.dealer.open_table()
    for _ in range(3):
        await rig.dealer.play_round()
    with capture_logs() as captured:  # the same, seen as structured events
        for _ in range(2):
            await rig.dealer.play_round()
    assert captured and not any(k in e for e in captured for k in ("card", "hole", "blackjack", "light"))
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    steps = [x for x in lines if x["event"] == "step"]
    mine = [x for x in lines if x["event"] != "listening"]  # the simulators share the process
    assert steps and all(x["table"] == "dub-01" and "device" in x for x in mine), [
        x for x in mine if x["table"] != "dub-01"
    ][:3]
    assert {x["device"] for x in steps} >= {"shoe", "keypad", "reader"}
    assert not CARD.search(out.getvalue())  # no card identity anywhere in the output
    structlog.reset_defaults()


async def test_a_crashing_driver_restarts_without_stopping_the_table(
    table_rig: MakeRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = await table_rig("double-back-jack")
    sup = rig.supervisor
    reader = sup.drivers["reader"]
    real = reader.poll_once
    crashes = iter([True])

    async def buggy() -> bool:
        if next(crashes, False):
            raise RuntimeError("a bug in the driver")
        return await real()

    monkeypatch.setattr(reader, "poll_once", buggy)
    async with asyncio.timeout(10):
        with capture_logs() as captured:
            await _crash_and_recover(rig)
    crashed = [e for e in captured if e["event"] == "driver_crashed"]
    assert crashed and crashed[0]["device"] == "reader" and crashed[0]["restart_in_s"] > 0
    await rig.dealer.open_table()
    await rig.dealer.play_round()  # the other devices never stopped; the reader is back
    assert not sup.table.halted


async def _crash_and_recover(rig: Rig) -> None:
    sup = rig.supervisor
    await sup.settle("reader")
    assert sup.health["reader"] is DeviceHealth.FAULT
    done = sup.progress.polls_done["reader"]
    rig.clock.advance(1.0)  # the backoff runs on the clock; the restarted loop polls at once
    await sup.wait_for(lambda: sup.progress.polls_done["reader"] > done and sup.idle())
    await sup.settle("reader", "shoe")
    assert sup.health["reader"] is DeviceHealth.ONLINE


async def test_stop_locks_the_sensors(table_rig: MakeRig) -> None:
    rig = await table_rig("dj-wild")
    await rig.dealer.open_table()
    assert not rig.dealer.keypad.locked
    await rig.supervisor.stop()
    assert rig.dealer.keypad.locked


def test_config_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for table in TABLES.glob("*.toml"):
        assert tablectl(["config", "check", str(table)]) == 0
    bad = tmp_path / "t.toml"
    bad.write_text((TABLES / "dj-wild.toml").read_text().replace('id = "djw-01"', 'id = ""'))
    capsys.readouterr()
    assert tablectl(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"{bad}: table.id: must be a non-empty string"
    bad.write_text((TABLES / "dj-wild.toml").read_text().replace('"../games/dj-wild.toml"', '"nope.toml"'))
    assert tablectl(["config", "check", str(bad)]) == 2
    assert "table.game" in capsys.readouterr().err


def test_a_bad_site_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "t.toml"
    # The site is a topic level (tablectl/<site>/<table>) and part of broker user names.
    text = (TABLES / "dj-wild.toml").read_text()
    bad.write_text(text.replace("[table]\n", '[table]\nsite = "floor/+"\n'))
    assert tablectl(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"{bad}: table.site: letters, digits, '.', '_' and '-' only, at most 64 characters"


def test_an_mqtt_device_defaults_to_the_topic_the_acl_grants(tmp_path: Path) -> None:
    table = tmp_path / "tables" / "djw.toml"
    table.parent.mkdir()
    text = (TABLES / "dj-wild.toml").read_text().replace("../", f"{TABLES.parent}/")
    serial = 'transport = "serial-line"\npath = "/tmp/tablectl/djw-01/stub"\nbaudrate = 9600'
    text = text.replace(serial, 'transport = "mqtt"\nport = 1883')
    table.write_text(text)
    stub = next(d for d in load_table_config(table).devices if d.name == "stub")
    # config/mosquitto/acl: pattern write tabledev/%u/+/out, the user being <site>/<table>.
    assert stub.endpoint.topic == "tabledev/example-floor/djw-01/stub"
    explicit = text.replace("port = 1883", 'port = 1883\ntopic = "lab/stub-7"')
    table.write_text(explicit)
    stub = next(d for d in load_table_config(table).devices if d.name == "stub")
    assert stub.endpoint.topic == "lab/stub-7"


async def _lose_the_cancel(inside: asyncio.Event) -> None:
    """Wait for a reply on its way and lose the cancel that lands meanwhile: what asyncio.wait_for
    does on Python 3.11 when the reply and the cancel coincide (pymodbus awaits it)."""
    inside.set()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.Event().wait()


async def _stop_once_inside(sup: Supervisor, inside: asyncio.Event) -> list[dict[str, Any]]:
    """Stop the supervisor once a task is in ``_lose_the_cancel``; what the stop logged."""
    async with asyncio.timeout(10):
        await inside.wait()
        with capture_logs() as captured:
            await sup.stop()
    return captured


async def test_stop_ends_a_poll_that_swallowed_its_cancel(
    table_rig: MakeRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pymodbus awaits asyncio.wait_for, which on Python 3.11 can swallow a cancel that lands as
    the reply arrives. A poll loop that carried on would outlive the shutdown (seen in the Start
    Game bench as ``task_did_not_stop``); the loop must notice it was cancelled and end."""
    rig = await table_rig("double-back-jack")
    sup = rig.supervisor
    reader = sup.drivers["reader"]
    in_poll = asyncio.Event()

    async def swallowing() -> bool:
        await _lose_the_cancel(in_poll)
        return True

    monkeypatch.setattr(reader, "poll_once", swallowing)
    sup.progress.poke["reader"].set()
    captured = await _stop_once_inside(sup, in_poll)
    assert not [e for e in captured if e["event"] == "task_did_not_stop"], captured
    assert any(e["event"] == "stopped" for e in captured)


async def test_stop_ends_an_event_whose_device_command_swallowed_its_cancel(
    table_rig: MakeRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same loss of a cancel in the event consumer: a device command under way (here the
    keypad's lock after Start Game) when shutdown cancels the consumer."""
    rig = await table_rig("double-back-jack")
    sup = rig.supervisor
    await rig.dealer.open_table()
    keypad = sup.drivers["keypad"]
    real = keypad.send
    in_send = asyncio.Event()

    async def swallowing(command: dc.Command) -> None:
        if in_send.is_set():  # shutdown's own lock goes through
            return await real(command)
        await _lose_the_cancel(in_send)

    monkeypatch.setattr(keypad, "send", swallowing)
    rig.dealer.keypad.place_bet(1, 1)
    rig.dealer.keypad.press(Key.START_GAME)
    sup.progress.poke["keypad"].set()
    captured = await _stop_once_inside(sup, in_send)
    assert not [e for e in captured if e["event"] == "task_did_not_stop"], captured
