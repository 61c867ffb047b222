"""A loaded table config as plain JSON-able data, paths relative to the checkout: what
tests/test_table_extends.py compares the shipped example tables' loadings against."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel

from devices.profiles import Profile

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "controller" / "shipped"


def _path(s: str) -> str:
    for prefix, name in ((SHIPPED, "<shipped>"), (ROOT / "config", "<shipped>"), (ROOT, "<root>")):
        s = s.replace(f"{prefix}/", f"{name}/")
    return s


def plain(value: Any) -> Any:
    """``value`` as JSON data: dataclasses and models as dicts of their fields, enums as their
    values, paths with the checkout's folder replaced, sets sorted. A device profile is its name
    and file (its contents are the profile file's, not the table file's)."""
    if isinstance(value, Profile):
        return {"name": value.name, "path": plain(value.path)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):
        return {k: plain(v) for k, v in value.__dict__.items()}
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, PurePath):
        return _path(str(value))
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime.time | datetime.date | datetime.timedelta | datetime.tzinfo):
        return str(value)
    if isinstance(value, str):
        return _path(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    raise TypeError(f"no plain form for {type(value).__name__}")
