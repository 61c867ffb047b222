"""Bounded parsing: every JSON and TOML document tablectl reads goes through here.

The standard library's parsers recurse once per ``[`` or ``{``: a few kilobytes of nested
brackets raise RecursionError (not ValueError), which the callers did not expect and which ended
whole tasks (issue 11). So each parse here has a size limit and a nesting limit checked before the
parser runs, and every failure is an ``InputRefused`` whose text is one line saying which rule the
input broke. It never quotes the input: a payload may hold a card.

Callers add where the input came from (a file and key, a topic, a journal record) and turn the
refusal into their own error type.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from controller.errors import TablectlError, short_reason

MAX_DEPTH = 32  # our deepest document (a journal payload, a command) is under 6 levels
MAX_CONFIG_BYTES = 1 << 20  # a table, game or profile file is a few kilobytes
MAX_MESSAGE_BYTES = 64 << 10  # a retained state or status message is well under 8 KiB
MAX_RECORD_BYTES = 1 << 20  # one journal record's payload

# Strings and comments can hold brackets that do not nest; removed before counting.
_TOML_STRINGS = re.compile(
    r'"""(?:[^\\]|\\.)*?"""' r"|'''.*?'''" r'|"(?:[^"\\\n]|\\.)*"' r"|'[^'\n]*'" r"|#[^\n]*",
    re.DOTALL,
)
# Every byte but a quote or a bracket, for bytes.translate to delete.
_NOT_QUOTE_OR_BRACKET = bytes(b for b in range(256) if b not in b'"[]{}')
_BRACKETS = re.compile(r"[\[\]{}]")


class InputRefused(TablectlError):
    """A document refused before or during parsing; the text is one line naming the rule."""


def _check_depth(brackets: Iterable[str], max_depth: int) -> None:
    depth = 0
    for b in brackets:
        if b in ("[", "{"):
            depth += 1
            if depth > max_depth:
                raise InputRefused(f"nested deeper than {max_depth} levels")
        else:
            depth -= 1


def _json_depth(data: bytes, max_depth: int) -> None:
    # Fast path (C speed): fewer opening brackets than the limit cannot nest past it. Journal
    # replay reads every record, so the common case must cost next to nothing.
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return
    # The brackets outside strings, with C-speed byte operations (a regex over every string cost
    # a gaming day's restart 0.2 s for its 1,500 settlements): drop the escape pairs that can hide
    # a quote (``\\`` first, then ``\"``), keep only quotes and brackets, and drop what lies
    # between a string's two quotes. Exact for valid JSON; for anything else the count may be off,
    # but then the parser refuses it (and a nesting it reaches first is caught as RecursionError).
    kept = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_QUOTE_OR_BRACKET)
    outside = b"".join(kept.split(b'"')[::2])
    _check_depth(outside.decode("ascii"), max_depth)


def load_json(data: bytes | str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in ``data``, or InputRefused naming the rule it broke."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise InputRefused(f"larger than {max_bytes} bytes")
    _json_depth(raw, max_depth)
    try:
        # Decoded here: json.loads would guess UTF-16 or UTF-32 from the first bytes.
        text = raw.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise InputRefused(f"not UTF-8 (byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputRefused(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except (ValueError, RecursionError) as e:  # huge integers; a depth the scan missed
        raise InputRefused(f"not valid JSON: {short_reason(e)}") from None


def load_toml(text: str, *, max_bytes: int = MAX_CONFIG_BYTES, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The TOML document in ``text``, or InputRefused naming the rule it broke."""
    if len(text) > max_bytes:
        raise InputRefused(f"larger than {max_bytes} bytes")
    if text.count("[") + text.count("{") > max_depth:
        _check_depth(_BRACKETS.findall(_TOML_STRINGS.sub("", text)), max_depth)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputRefused(f"not valid TOML: {short_reason(e)}") from None
    except RecursionError:
        raise InputRefused(f"nested deeper than {max_depth} levels") from None


def read_text(path: Path, *, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """A config file's text, or InputRefused: unreadable, too large, or not UTF-8 (with where)."""
    try:
        with path.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise InputRefused(f"cannot read: {e.strerror or short_reason(e)}") from None
    if len(raw) > max_bytes:
        raise InputRefused(f"larger than {max_bytes} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputRefused(f"not UTF-8 (byte {e.start}, line {line})") from None


def read_toml(path: Path, *, max_bytes: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """A TOML file, bounded: InputRefused (one line, without the path) when it cannot be used."""
    return load_toml(read_text(path, max_bytes=max_bytes), max_bytes=max_bytes)
