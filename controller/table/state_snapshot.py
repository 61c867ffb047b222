"""The table's state as JSON, for the journal's ``state_snapshot`` record that a restart replays from.

A gaming day is ~50,000 records, and replaying them all took most of a restart (issue 16: under
2 s after kill -9). A state snapshot is the fold of every record before it: the machines' dataclass
state, encoded field by field from the fields' type hints, so a field added to any machine is
carried without touching this module (a type this module cannot carry fails the replay-equality
tests instead of being dropped). Taken only between rounds: a round in play holds the rules'
generator (``controller.rules.round.Round``), which has no data form; between rounds the state is
plain data.

Dicts are written as lists of pairs (their keys may be numbers or enums, and their order is kept);
sets as sorted lists; a card as its text and back.
"""

from __future__ import annotations

import types
import typing
from collections import Counter
from dataclasses import fields, is_dataclass, replace
from enum import Enum
from functools import cache
from typing import Any, Final, Union

from controller.cards import Card, parse_card
from controller.errors import TablectlError
from controller.game_config import GameOptions
from controller.table.core import Table, TableState

KIND: Final = "state_snapshot"
FORMAT: Final = 1


class SnapshotError(TablectlError):
    """A snapshot that cannot be taken or read; the message names the field, never its value."""


def take(table: Table, device_seen: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """The record's payload for ``table`` now (between rounds only); ``device_seen`` in place of
    the table's counters when given (the recorder's, with its step's counters merged in)."""
    if table.in_round:
        raise SnapshotError("snapshot: a round is in play; its state is not data")
    state = table.state
    if device_seen is not None:
        state = replace(state, devices=replace(state.devices, seen=device_seen))
    return {"format": FORMAT, "state": _encode(state, TableState, "state")}


def restore(options: GameOptions, table_id: str, payload: Any) -> Table:
    """The table a snapshot's payload describes."""
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or "state" not in payload:
        raise SnapshotError(f"snapshot: not a format {FORMAT} snapshot")
    table = Table(options, table_id)
    table.state = _decode(payload["state"], TableState, "state")
    return table


@cache
def _hints(cls: type) -> dict[str, Any]:
    # localns={} so a field named like a module (TableState.round) does not shadow the module.
    return typing.get_type_hints(cls, localns={})


def _encode(value: Any, tp: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value.value if isinstance(value, Enum) else value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Card):
        return [str(value), value.back]
    if is_dataclass(value) and not isinstance(value, type):
        hints = _hints(type(value))
        return {
            f.name: _encode(getattr(value, f.name), hints[f.name], f"{where}.{f.name}") for f in fields(value)
        }
    args = _arms(tp)
    if isinstance(value, dict):
        key_tp, value_tp = args if len(args) == 2 else (Any, Any)
        return [[_encode(k, key_tp, where), _encode(v, value_tp, where)] for k, v in value.items()]
    if isinstance(value, set | frozenset):
        item = args[0] if args else Any
        return sorted((_encode(v, item, where) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [_encode(v, _item(args, i), where) for i, v in enumerate(value)]
    raise SnapshotError(f"snapshot: {where} holds a {type(value).__name__}, which has no data form")


def _arms(tp: Any) -> tuple[Any, ...]:
    """The type arguments of ``tp``, looking through ``X | None``."""
    if _is_union(tp):
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        return _arms(arms[0]) if len(arms) == 1 else ()
    return typing.get_args(tp)


def _item(args: tuple[Any, ...], i: int) -> Any:
    if not args:
        return Any
    if len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return args[i] if i < len(args) else Any


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _decode(doc: Any, tp: Any, where: str) -> Any:
    if tp is Any:
        return doc
    if _is_union(tp):
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        if doc is None:
            return None
        if len(arms) != 1:
            raise SnapshotError(f"snapshot: {where} has a type with several arms ({tp})")
        return _decode(doc, arms[0], where)
    origin = typing.get_origin(tp) or tp
    args = typing.get_args(tp)
    try:
        if origin is Card:
            text, back = doc
            return parse_card(text, back)
        if isinstance(origin, type) and issubclass(origin, Enum):
            return origin(doc)
        if origin in (bool, int, float, str):
            if type(doc) is not origin and not (origin is float and type(doc) is int):
                raise SnapshotError(f"snapshot: {where} is not a {origin.__name__}")
            return doc
        if is_dataclass(origin) and isinstance(origin, type):
            hints = _hints(origin)
            obj = object.__new__(origin)  # not __init__: a __post_init__ must not rework restored fields
            for f in fields(origin):
                object.__setattr__(obj, f.name, _decode(doc[f.name], hints[f.name], f"{where}.{f.name}"))
            return obj
        if origin in (dict, Counter):
            if origin is Counter:  # Counter[K]: the counts are ints
                key_tp, value_tp = (args[0] if args else Any), int
            else:
                key_tp, value_tp = args if args else (Any, Any)
            pairs = {_decode(k, key_tp, where): _decode(v, value_tp, where) for k, v in doc}
            return Counter(pairs) if origin is Counter else pairs
        if origin in (set, frozenset):
            return origin(_decode(v, args[0] if args else Any, where) for v in doc)
        if origin in (list, tuple):
            items = [_decode(v, _item(args, i), where) for i, v in enumerate(doc)]
            return items if origin is list else tuple(items)
    except (KeyError, TypeError, ValueError) as e:
        raise SnapshotError(f"snapshot: {where} cannot be read ({type(e).__name__})") from None
    raise SnapshotError(f"snapshot: {where} has a type with no data form ({tp})")
