"""controller/bounded.py: size and nesting limits before the standard parsers, one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.bounded import InputRefused, load_json, load_toml, read_toml
from controller.telemetry.commands import Refused, parse_command


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b"[" * 3000, "nested deeper than 32 levels"),
        (b'{"a":' * 100 + b"1" + b"}" * 100, "nested deeper than 32 levels"),
        (b"x" * 5000, "larger than 4096 bytes"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"a": ', "not valid JSON"),
        (b"1" * 5000, "larger than 4096 bytes"),
    ],
)
def test_hostile_json_is_one_line_naming_the_rule(data: bytes, rule: str) -> None:
    with pytest.raises(InputRefused) as info:
        load_json(data, max_bytes=4096)
    assert rule in str(info.value) and "\n" not in str(info.value)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    doc = {"name": "[" * 500 + "{" * 500, "escaped": '\\"[[[['}
    import json

    assert load_json(json.dumps(doc), max_bytes=1 << 20) == doc


def test_a_huge_integer_is_refused_not_raised() -> None:
    with pytest.raises(InputRefused, match="not valid JSON"):
        load_json(b"9" * 5000, max_bytes=1 << 20)


@pytest.mark.parametrize(
    "text",
    ["a = " + "[" * 3000 + "]" * 3000, "a = " + "{b = " * 200 + "1" + "}" * 200],
)
def test_deeply_nested_toml_is_refused(text: str) -> None:
    with pytest.raises(InputRefused, match="nested deeper than 32 levels"):
        load_toml(text)


def test_toml_strings_and_comments_with_brackets_are_fine() -> None:
    text = 'a = "' + "[" * 100 + '"\n# ' + "{" * 100 + "\nb = '''" + "[" * 100 + "'''\n[t]\nc = [[1], [2]]\n"
    assert load_toml(text)["t"] == {"c": [[1], [2]]}


def test_a_file_that_is_not_utf8_names_the_byte_and_line(tmp_path: Path) -> None:
    p = tmp_path / "t.toml"
    p.write_bytes(b'[table]\nid = "t1"\nname = "caf\xe9"\n')
    with pytest.raises(InputRefused, match=r"not UTF-8 \(byte 29, line 3\)"):
        read_toml(p)


def test_nested_brackets_on_a_command_topic_are_refused_with_a_result() -> None:
    # Issue 11 item 1: this payload raised RecursionError out of parse_command and ended telemetry.
    with pytest.raises(Refused, match="payload nested deeper than 32 levels"):
        parse_command("order_reshuffle", b"[" * 3000)
