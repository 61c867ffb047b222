"""controller/schema.py: every document's refusal is one line naming the key, never the value."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field, ValidationError

from controller.schema import Document, NonEmpty, Range, Rule, between, one_line


class Inner(Document):
    port: Annotated[int, between(0, 65535)] = 0
    name: NonEmpty = "x"
    secret: Annotated[str, Rule("must be a scrypt hash")] = ""


class Outer(Document):
    devices: dict[str, Inner] = Field(default_factory=dict)
    lines: list[Inner] = Field(default_factory=list)
    inner: Inner | None = None
    ratio: Annotated[float, Rule("must be a fraction", ge=0, le=1)] = 0.5
    seat: Annotated[int, Rule("must be an integer"), Range("is out of range", ge=1, le=6)] = 1


def _line(doc: object) -> str:
    with pytest.raises(ValidationError) as info:
        Outer.model_validate(doc)
    return one_line(info.value, "t.toml", model=Outer)


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        (
            {"devices": {"a": {"prot": 1}}},
            "t.toml: devices.a.prot: unknown key (expected port, name, secret)",
        ),
        ({"lines": [{}, {"x": 1}]}, "t.toml: lines[1].x: unknown key (expected port, name, secret)"),
        ({"inner": {"port": True}}, "t.toml: inner.port: must be an integer 0-65535"),
        ({"inner": {"port": 65536}}, "t.toml: inner.port: must be an integer 0-65535"),
        ({"inner": {"name": "  "}}, "t.toml: inner.name: must be a non-empty string"),
        ({"ratio": float("nan")}, "t.toml: ratio: must be a fraction"),
        ({"ratio": "0.5"}, "t.toml: ratio: must be a fraction"),
        ({"seat": "1"}, "t.toml: seat: must be an integer"),
        ({"seat": 7}, "t.toml: seat: is out of range"),
        ({"sections": 1}, "t.toml: sections: unknown key (expected devices, lines, inner, ratio, seat)"),
        ({"devices": 3}, "t.toml: devices: must be a table"),
    ],
)
def test_one_line_naming_file_key_and_rule(doc: object, line: str) -> None:
    assert _line(doc) == line


def test_the_value_is_never_quoted() -> None:
    line = _line({"inner": {"secret": 12345678}, "devices": {"a": {"secret": ["hunter2-pass"]}}})
    assert "12345678" not in line and "hunter2" not in line and "\n" not in line
