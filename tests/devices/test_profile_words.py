"""What a profile declares beyond addresses: a counter's width (u32: 32 bits over two words) and
the order of its words, single named bits of a status word, and the conditions such a bit
raises. The drivers' counter arithmetic takes the declared width: no wrap at 65,536 on a 32-bit
counter."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from devices.drivers.registers import SeqGuard, moved
from devices.errors import ProfileError
from devices.profiles import Halts, parse_profile
from devices.rings import new_in_ring
from tests.devices.conftest import DEVICES


def _shoe(**changes: Any) -> dict[str, Any]:
    doc = tomllib.loads((DEVICES / "ref-shoe.toml").read_text(encoding="utf-8"))
    doc["registers"]["draw_seq"] = {"address": 6, "type": "u32"}  # words 6-7, the reserved ones
    doc["registers"]["status"] = {"address": 0, "type": "bits"}
    del doc["registers"]["cover"]
    doc["bits"] = {"cover": {"register": "status", "bit": 0}, "door_open": {"register": "status", "bit": 3}}
    doc["conditions"] = {"door_open": {"message": "door", "action": "close it", "halts": "in_round"}}
    for key, value in changes.items():
        doc[key] = {**doc.get(key, {}), **value}
    return doc


def test_a_32_bit_counter_moves_past_65535_without_a_wrap() -> None:
    assert moved(65_535, 65_536, 32) == 1 and moved(65_535, 0, 16) == 1
    assert moved(0xFFFF_FFFF, 0, 32) == 1 and moved(65_536, 65_535, 32) is None
    assert new_in_ring(65_534, 65_537, 16, 32) == ([65_535, 65_536, 65_537], 0)
    assert new_in_ring(65_534, 1, 16) == ([65_535, 0, 1], 0)  # a 16-bit counter still wraps
    guard = SeqGuard(16, 32)
    guard.commit(65_535)
    assert guard.check(65_540) == (65_535, 5, None)


@pytest.mark.parametrize(("order", "words"), [("high_first", [1, 2]), ("low_first", [2, 1])])
def test_a_u32_is_read_and_written_in_the_declared_word_order(order: str, words: list[int]) -> None:
    prof = parse_profile(_shoe(profile={"word_order": order}), Path("shoe.toml"))
    value = (1 << 16) | 2
    assert prof.reg("draw_seq").bits == 32 and prof.encode("draw_seq", [value]) == words
    start, count = prof.poll_span()
    block = [0] * count
    for spec, enc in prof.encode_all({"draw_seq": [value], "cover": [1], "door_open": [1]}):
        block[spec.address - start : spec.address - start + len(enc)] = enc
    assert block[0] == 0b1001  # both bits in the one status word
    snap = prof.decode_block(start, block)
    assert (snap["draw_seq"], snap["cover"], snap["door_open"]) == ([value], [1], [1])


def test_a_condition_names_a_bit_and_says_when_it_halts() -> None:
    prof = parse_profile(_shoe(), Path("shoe.toml"))
    assert prof.conditions["door_open"].halts is Halts.IN_ROUND
    assert prof.has("cover") and "cover" not in prof.registers


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({"bits": {"tilt": {"register": "nope", "bit": 1}}}, "bits.tilt.register: must name a readable"),
        ({"bits": {"tilt": {"register": "status", "bit": 16}}}, "bits.tilt.bit: must be an integer 0-15"),
        (
            {"conditions": {"tilt": {"message": "m", "action": "a"}}},
            "conditions.tilt: must be the name of a bit",
        ),
        ({"profile": {"word_order": "middle"}}, "profile.word_order: must be one of high_first, low_first"),
    ],
)
def test_a_bad_bit_condition_or_word_order_is_one_line(changes: dict[str, Any], line: str) -> None:
    with pytest.raises(ProfileError, match=f"shoe.toml: {line}"):
        parse_profile(_shoe(**changes), Path("shoe.toml"))


def test_a_shoe_without_a_cover_register_or_bit_is_refused() -> None:
    doc = _shoe()
    del doc["bits"]["cover"]
    with pytest.raises(ProfileError, match=r"registers\.cover: a shoe profile must define this register"):
        parse_profile(doc, Path("shoe.toml"))
