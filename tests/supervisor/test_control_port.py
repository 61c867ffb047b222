"""The control port of `tablectl sim` (sim/control.py, docs/simulators.md): a test in another
process deals at the table by hand and makes its devices fail, while `tablectl run` runs the table;
and the port refuses hostile input in one line, bounded."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controller.shipped import table_file
from sim.control import MAX_BODY_BYTES, ControlPort
from sim.models import DealtCard
from sim.mqtt_link import MqttLink
from sim.table import SimTable
from tests.relocated import relocated_table
from tests.supervisor.conftest import tablectl

GUARD_S = 120.0  # failure guard only


@pytest.fixture
async def port() -> AsyncIterator[tuple[str, SimTable]]:
    sim = SimTable.from_file(table_file("down-under"), seed=3)
    await sim.start()
    control = ControlPort(sim)
    host, number = await control.start("127.0.0.1", 0)
    try:
        yield f"http://{host}:{number}", sim
    finally:
        await control.stop()
        await sim.stop()


async def _post(url: str, body: bytes | dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as s:
        kw: dict[str, Any] = {"data": body} if isinstance(body, bytes) else {"json": body}
        async with s.post(url, **kw) as r:
            return r.status, await r.json()


async def test_each_human_action_acts_on_the_devices(port: tuple[str, SimTable]) -> None:
    url, sim = port
    async with aiohttp.ClientSession() as s, s.get(f"{url}/") as r:
        index = await r.json()
    assert set(index["devices"]) == {"shuffler", "shoe", "reader", "keypad"}
    assert "jam" in index["faults"] and "chips" in index["actions"]
    assert await _post(f"{url}/action", {"action": "chips", "box": 2, "spot": 1}) == (200, {"ok": True})
    assert await _post(f"{url}/action", {"action": "key", "key": "start_game"}) == (200, {"ok": True})
    keypad = sim.devices["keypad"].model
    assert keypad.sensed() == {(2, 1)} and keypad.key_seq == 1
    status, drawn = await _post(f"{url}/action", {"action": "draw"})
    assert status == 400 and drawn == {"ok": False, "error": "the shoe is empty"}  # nothing ejected yet
    sim.devices["shoe"].model.load([DealtCard(c) for c in sim.game.batch(6, "red")], "red")
    status, drawn = await _post(f"{url}/action", {"action": "draw"})
    assert status == 200 and drawn["ok"] and len(drawn["card"]) in (2, 3)
    assert (await _post(f"{url}/action", {"action": "hole_into_reader", "card": "KS"}))[0] == 200
    assert sim.devices["reader"].model.insert_seq == 1
    async with aiohttp.ClientSession() as s, s.get(f"{url}/devices") as r:
        seen = (await r.json())["devices"]
    assert seen["keypad"]["chips"] == [[2, 1]] and seen["shoe"]["cards"] == 311
    assert "KS" not in str(seen)  # what is seen of the devices holds no card


async def test_each_fault_the_models_have(port: tuple[str, SimTable]) -> None:
    url, sim = port
    models = {name: d.model for name, d in sim.devices.items()}
    for body in (
        {"fault": "jam", "at_card": 100},
        {"fault": "incomplete_cycle"},
        {"fault": "reader_failure"},
        {"fault": "sensor_stuck", "box": 1, "spot": 2},
        {"fault": "power_off", "device": "shoe"},
    ):
        assert await _post(f"{url}/fault", body) == (200, {"ok": True}), body
    assert models["shuffler"].faults.jam_at_card == 100 and models["shuffler"].faults.stall
    assert models["reader"].faults.dead and (1, 2) in models["keypad"].sensed()
    assert sim.devices["shoe"].register_sim is not None and sim.devices["shoe"].register_sim.faults.silent
    assert await _post(f"{url}/fault", {"fault": "power_on", "device": "shoe"}) == (200, {"ok": True})
    assert not sim.devices["shoe"].register_sim.faults.silent
    assert await _post(f"{url}/fault", {"fault": "clear"}) == (200, {"ok": True})
    assert not models["reader"].faults.dead and models["shuffler"].faults.jam_at_card is None
    assert models["keypad"].sensed() == set()


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/action", b"[" * 3000, "the body: nested deeper than 32 levels"),
        ("/action", b"x" * (MAX_BODY_BYTES + 1), f"the body is over {MAX_BODY_BYTES} bytes"),
        ("/action", b"{not json", "the body: "),
        ("/action", b"[1]", "the body must be one JSON object"),
        ("/action", {"action": "fly"}, "no action 'fly'"),
        ("/action", {"action": "chips", "box": 99, "spot": 1}, "box: a whole number 1 to 16 is required"),
        ("/action", {"action": "chips", "box": 8, "spot": 1}, "no sensor 8/1"),
        ("/action", {"action": "key", "key": "boom"}, "key: one of start_game"),
        ("/action", {"action": "hole_into_reader", "card": "ZZ"}, "card: "),
        ("/fault", {"fault": "melt"}, "no fault 'melt'"),
        ("/fault", {"fault": "power_off", "device": "toaster"}, "no device 'toaster'"),
        ("/fault", {"nothing": 1}, "fault: required, a string"),
    ],
)
async def test_hostile_input_is_refused_in_one_line(
    port: tuple[str, SimTable], path: str, body: bytes | dict[str, Any], error: str
) -> None:
    url, _ = port
    status, answer = await _post(f"{url}{path}", body)
    assert status == 400 and answer["ok"] is False
    assert answer["error"].startswith(error) and "\n" not in answer["error"]


# -- end to end: `tablectl sim --control` beside `tablectl run`, driven by hand -----------------


async def _until(link: MqttLink, what: str, ok: Any) -> dict[str, Any]:
    snap = await link.state()
    while not ok(snap):
        snap = await link.wait()
    return snap


async def _hand_dealt_round(control: str, link: MqttLink) -> None:
    """The floor opens the table (MQTT); a person deals through the control port; the table
    hears every act over the wire, and a reader failure injected stops dealing."""
    snap = await _until(
        link,
        "every device online",
        lambda s: s.get("devices") and all(h == "online" for h in s["devices"].values()),
    )
    for back in snap["batches"]:
        await link.floor("inspection_verified", {"back": back, "dealer": "dealer-1"})
    await link.floor("new_dealer", {"name": "dealer-1"})
    # 673a.5(b)-(d): the stack out of the shuffler, cut by the dealer (no player yet), the cover
    # card placed, into the shoe; the table asks for each step.
    snap = await _until(link, "the cut", lambda s: s["asking"].get("what") == "cut")
    assert snap["asking"]["seat"] == 0  # the dealer is seat 0 everywhere
    for _ in range(10_000):  # the table asks once it has journalled the eject; the stack follows
        async with aiohttp.ClientSession() as s, s.get(f"{control}/devices") as r:
            if (await r.json())["devices"].get("hand", {}).get("tray") == snap["asking"]["back"]:
                break
    status, taken = await _post(f"{control}/action", {"action": "take_stack"})
    assert status == 200 and taken["cards"] == 312
    await link.floor("cut_made", {"at": 150, "by": 0})
    assert (await _post(f"{control}/action", {"action": "cut_stack", "at": 150}))[0] == 200
    snap = await _until(link, "the cover card", lambda s: s["asking"].get("what") == "cover_card")
    await link.floor("cover_card_placed", {"from_bottom": 80})
    snap = await _until(link, "the stack into the shoe", lambda s: s["asking"].get("what") == "cut_to_shoe")
    assert (await _post(f"{control}/action", {"action": "stack_into_shoe", "cover_from_bottom": 80}))[
        0
    ] == 200
    snap = await _until(link, "a batch in the shoe", lambda s: s.get("batch_in_shoe"))
    while snap["asking"]["what"] == "burn":  # 673a.7(c)
        assert (await _post(f"{control}/action", {"action": "draw"}))[0] == 200
        burns = snap["asking"]["cards"]
        snap = await _until(link, "the burn", lambda s, left=burns: s["asking"].get("cards") != left)
    assert snap["asking"]["what"] == "bets"
    assert (await _post(f"{control}/action", {"action": "chips", "box": 1, "spot": 1}))[0] == 200
    assert (await _post(f"{control}/action", {"action": "key", "key": "start_game"}))[0] == 200
    snap = await _until(link, "the round", lambda s: s.get("in_round"))
    assert snap["asking"]["what"] == "card" and snap["asking"]["seat"] == 1 and snap["round"] == 1
    assert (await _post(f"{control}/fault", {"fault": "reader_failure"}))[0] == 200
    snap = await _until(link, "the reader's failure", lambda s: s["asking"]["what"] == "floor")
    assert snap["reader_failed"] and snap["asking"]["section"] == "685a.12(i)"


def test_a_test_deals_by_hand_through_the_control_port(tmp_path: Path, broker: str) -> None:
    config = relocated_table("down-under", tmp_path)
    config.write_text(
        config.read_text(encoding="utf-8").replace("cycle_s = 30", "cycle_s = 1"), encoding="utf-8"
    )
    sim = tablectl("sim", "--config", config, "--control", "127.0.0.1:0", "--seed", "4")
    run = None
    try:
        assert sim.stdout is not None
        lines = [sim.stdout.readline() for _ in range(5)]
        control = next(line.split("at=")[1].strip() for line in lines if line.startswith("control"))
        run = tablectl(
            "run",
            "--config",
            config,
            "--journal",
            tmp_path / "j.db",
            "--broker",
            broker,
            "--log-level",
            "warning",
        )

        async def drive() -> None:
            async with asyncio.timeout(GUARD_S), MqttLink(broker, "example-floor", "dub-01") as link:
                await _hand_dealt_round(control.rstrip("/"), link)

        asyncio.run(drive())
    finally:
        for proc in (sim, run):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=GUARD_S)
    assert sim.returncode == 0
