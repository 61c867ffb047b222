"""Table device sections and device profiles: the examples load, bad ones fail in one line."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from controller.errors import ConfigError
from devices.config import TransportKind
from devices.config_file import load_devices
from devices.errors import ProfileError
from devices.profiles import DeviceKind, load_profile
from sim.table import read_table
from tests.devices.conftest import DEVICES, TABLES

SHUFFLER: dict[str, Any] = {
    "kind": "shuffler",
    "profile": "../devices/ref-shuffler.toml",
    "transport": "modbus-tcp",
}


@pytest.mark.parametrize(
    ("table", "kinds", "reader_mode"),
    [
        ("double-back-jack", {"shuffler", "shoe", "reader", "keypad"}, "peek"),
        ("double-attack", {"shuffler", "shoe", "reader", "keypad"}, "peek"),
        ("down-under", {"shuffler", "shoe", "reader", "keypad"}, "masque"),
        ("dj-wild", {"shuffler", "stub_counter", "keypad"}, None),
    ],
)
def test_example_tables_list_every_device_of_their_game(
    table: str, kinds: set[str], reader_mode: str | None
) -> None:
    game, devices = read_table(TABLES / f"{table}.toml")
    assert game.id.value == table
    assert {d.kind.value for d in devices} == kinds
    readers = [d for d in devices if d.kind is DeviceKind.READER]
    assert [r.profile.options["mode"] for r in readers] == ([reader_mode] if reader_mode else [])


def test_every_profile_loads() -> None:
    names = {load_profile(p).name for p in DEVICES.glob("*.toml")}
    assert len(names) == len(list(DEVICES.glob("*.toml")))


def test_a_good_section_gives_its_settings() -> None:
    [cfg] = load_devices(
        {"s": {**SHUFFLER, "port": 1502, "device_id": 4, "gap_ms": 2, "backs": ["red", "green"]}}, TABLES
    )
    assert cfg.endpoint.transport is TransportKind.MODBUS_TCP
    assert (cfg.endpoint.port, cfg.device_id, cfg.endpoint.gap_s) == (1502, 4, 0.002)
    assert cfg.options["backs"] == ("red", "green")


@pytest.mark.parametrize(
    ("section", "key", "rule"),
    [
        ({**SHUFFLER, "kind": "toaster"}, "kind", "must be one of"),
        ({**SHUFFLER, "profile": "../devices/nope.toml"}, "profile", "no profile at ../devices/nope.toml"),
        ({**SHUFFLER, "profile": "../devices/ref-shoe.toml"}, "profile", "is a shoe profile"),
        ({**SHUFFLER, "transport": "carrier-pigeon"}, "transport", "must be one of"),
        ({**SHUFFLER, "transport": "mqtt"}, "transport", "cannot carry a modbus profile"),
        ({**SHUFFLER, "port": 70000}, "port", "must be an integer 0-65535"),
        ({**SHUFFLER, "device_id": 0}, "device_id", "must be an integer 1-247"),
        ({**SHUFFLER, "timeout_s": "fast"}, "timeout_s", "must be a number"),
        ({**SHUFFLER, "timeout_s": float("nan")}, "timeout_s", "must be a number"),
        ({**SHUFFLER, "colour": "red"}, "colour", "unknown key for a shuffler"),
        ({**SHUFFLER, "backs": ["red", "red"]}, "backs", "two batches' back colours"),
        (
            {
                "kind": "reader",
                "profile": "../devices/ref-reader-peek.toml",
                "transport": "modbus-rtu",
                "peek_up_ranks": ["A", "1"],
            },
            "peek_up_ranks",
            "list of ranks",
        ),
        (
            {
                "kind": "stub_counter",
                "profile": "../devices/ref-stub-counter.toml",
                "transport": "mqtt",
                "topic": "a/#",
            },
            "topic",
            "without wildcards",
        ),
    ],
)
def test_bad_sections_fail_in_one_line_naming_file_key_and_rule(
    section: dict[str, Any], key: str, rule: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_devices({"dev": section}, TABLES, source="tables/t1.toml")
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"tables/t1.toml: devices.dev.{key}: ")
    assert rule in msg


def test_two_devices_with_one_id_on_one_bus_are_refused() -> None:
    a = {
        "kind": "keypad",
        "profile": "../devices/ref-keypad.toml",
        "transport": "modbus-rtu",
        "path": "/dev/ttyS1",
        "device_id": 3,
    }
    b = {
        "kind": "reader",
        "profile": "../devices/ref-reader-peek.toml",
        "transport": "modbus-rtu",
        "path": "/dev/ttyS1",
        "device_id": 3,
    }
    with pytest.raises(ConfigError, match=r"devices.b.device_id: 3 is already used by devices.a"):
        load_devices({"a": a, "b": b}, TABLES)
    with pytest.raises(ConfigError, match=r"devices.b.gap_ms: devices on one bus must agree"):
        load_devices({"a": a, "b": {**b, "device_id": 2, "gap_ms": 9}}, TABLES)


# -- profiles -------------------------------------------------------------------------------------


def _profile(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    p = tmp_path / "vendor.toml"
    p.write_text(text, encoding="utf-8")
    return p


GOOD_SHUFFLER = (DEVICES / "ref-shuffler.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("edit", "key", "rule"),
    [
        (lambda t: t.replace('kind = "shuffler"', 'kind = "blender"'), "profile.kind", "one of"),
        (
            lambda t: t.replace("[registers.cycle]\naddress = 1", "[registers.cycle]\naddress = 0"),
            "registers.",
            "overlaps register",
        ),
        (
            lambda t: t.replace("[registers.fault_code]", "[registers.unused]"),
            "registers.fault_code",
            "must define this register",
        ),
        (
            lambda t: t.replace("mark_out_of_order = 5", ""),
            "commands.mark_out_of_order",
            "must define this command",
        ),
        (
            lambda t: t.replace("\nout_of_order = 5", "\nbroken = 5"),
            "enums.shuffler_state",
            "unknown state name",
        ),
        (lambda t: t.replace("max = 1000", "max = -1"), "registers.cards_counted.max", "integer"),
        (
            lambda t: t.replace('type = "enum"\nenum = "back"', 'type = "enum"\nenum = "hue"', 1),
            "registers.slot_a_back.enum",
            "must name a table",
        ),
        (lambda t: t + "\n[registers.x\n", "", "not valid TOML"),
        # A misspelt key is refused, not silently ignored.
        (lambda t: t.replace("[profile]", '[profile]\ncolour = "red"'), "profile.colour", "unknown key ("),
        (lambda t: t.replace("address = 1\n", "adress = 1\n", 1), "registers.cycle.adress", "unknown key"),
        (lambda t: t.replace("address = 1\n", 'address = "1"\n', 1), "registers.cycle.address", "0-65535"),
    ],
)
def test_bad_profiles_fail_in_one_line(tmp_path: pathlib.Path, edit: Any, key: str, rule: str) -> None:
    path = _profile(tmp_path, edit(GOOD_SHUFFLER))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path)) and key in msg and rule in msg


def test_card_bit_fields_must_not_overlap(tmp_path: pathlib.Path) -> None:
    text = (DEVICES / "ref-shoe.toml").read_text(encoding="utf-8")
    path = _profile(tmp_path, text.replace("suit = { shift = 4", "suit = { shift = 3"))
    with pytest.raises(ProfileError, match="card: bit fields overlap"):
        load_profile(path)


def test_a_vendor_with_another_map_needs_only_a_profile(tmp_path: pathlib.Path) -> None:
    # Same meaning, registers moved to 100+ and the command block first: decodes the same way.
    text = GOOD_SHUFFLER
    for reg in range(13, -1, -1):
        text = text.replace(f"address = {reg}\n", f"address = {reg + 104}\n")
    text = text.replace("address = 114\ncount = 4", "address = 100\ncount = 4")
    prof = load_profile(_profile(tmp_path, text))
    start, count = prof.poll_span()
    assert start == 104 and count == 10
    assert prof.reg("command").address == 100
