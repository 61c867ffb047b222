"""A table file written out whole: the file it extends merged in, as one file without ``extends``
(for a test that takes a device out, which a file extending a base cannot do)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.supervisor.rig import toml_value
from controller.table_file import read_table_doc


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _table(lines: list[str], header: tuple[str, ...], table: Mapping[str, Any]) -> None:
    values = [f"{_key(k)} = {toml_value(v)}" for k, v in table.items() if not isinstance(v, Mapping)]
    if header and (values or not table):
        lines += ["", f"[{'.'.join(_key(h) for h in header)}]"]
    lines += values
    for k, v in table.items():
        if isinstance(v, Mapping):
            _table(lines, (*header, k), v)


def toml_text(doc: Mapping[str, Any]) -> str:
    lines: list[str] = []
    _table(lines, (), doc)
    return "\n".join(lines).lstrip("\n") + "\n"


def flat_text(path: Path) -> str:
    """The table file at ``path`` as the one document it reads as, in TOML: its relative paths
    relative to its folder (a copy elsewhere finds the shipped games and profiles by name)."""
    return f"# {path.name}, written out whole\n" + toml_text(read_table_doc(path))


def flatten(path: Path) -> Path:
    """The table file at ``path`` rewritten in place as ``flat_text``."""
    path.write_text(flat_text(path), encoding="utf-8")
    return path
