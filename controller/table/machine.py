"""The parts every machine of the table core shares: what a step returns, the two registries
that route an input to the machine that decides it and an event to the transition that applies
it, and the views derived from the machines' state (the replay check, the public fields).

Dispatch is by type, through dicts filled by the ``handles`` and ``applies`` decorators at import:
the decorator's argument and the function's parameter have the same type, so mypy checks that a
handler is given the input it is registered for (no method names built from strings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from controller.game_config import GameOptions
from controller.rules.round import Round
from controller.table.events import DomainEvent, Event
from controller.table.inputs import Input

if TYPE_CHECKING:
    from controller.table.core import Table


@dataclass(frozen=True, slots=True)
class Command:
    """An effect for a device, carried out by the supervisor after the events are journalled."""

    device: str  # shuffler | shoe | reader | keypad | stub_counter
    action: str
    args: tuple[Any, ...] = ()


@dataclass(slots=True)
class Step:
    events: list[DomainEvent] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)


In = TypeVar("In", bound=Input)
Ev = TypeVar("Ev", bound=Event)

Handler = Callable[["Table", Any, Step], None]
Transition = Callable[["Table", Any], None]

HANDLERS: dict[type[Input], Handler] = {}
TRANSITIONS: dict[type[Event], Transition] = {}


def handles(
    kind: type[In],
) -> Callable[[Callable[[Table, In, Step], None]], Callable[[Table, In, Step], None]]:
    """Register the function that decides what an input of ``kind`` means (one per input type)."""

    def register(fn: Callable[[Table, In, Step], None]) -> Callable[[Table, In, Step], None]:
        if kind in HANDLERS:
            raise TypeError(f"{kind.__name__} already has a handler")
        HANDLERS[kind] = fn
        return fn

    return register


def applies(kind: type[Ev]) -> Callable[[Callable[[Table, Ev], None]], Callable[[Table, Ev], None]]:
    """Register the one state transition for events of ``kind`` (replay calls only these)."""

    def register(fn: Callable[[Table, Ev], None]) -> Callable[[Table, Ev], None]:
        if kind in TRANSITIONS:
            raise TypeError(f"{kind.__name__} already has a transition")
        TRANSITIONS[kind] = fn
        return fn

    return register


def public(key: str, view: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """Field metadata: the field is shown in the table's public snapshot under ``key`` (through
    ``view`` when given). Fields are private unless marked: a new field never leaks by default."""
    return {"public": key, "view": view}


def public_fields(state: Any) -> Iterator[tuple[str, Any]]:
    """The fields of a machine's state marked ``public``, as (snapshot key, value shown)."""
    for f in fields(state):
        key = f.metadata.get("public")
        if key is not None:
            view = f.metadata["view"]
            value = getattr(state, f.name)
            yield key, value if view is None else view(value)


_ATOMS: frozenset[type] = frozenset({str, int, float, bool, type(None)})
# A dataclass's field names, looked up once per class; () for a class that is not a dataclass.
_FIELDS: dict[type, tuple[str, ...]] = {}


def plain(x: Any) -> Any:
    """``x`` as plain, comparable data: dataclasses field by field, mappings and sets in order.
    The replay check (``Table.fingerprint``) is this of the whole state, so no field escapes it.

    Called before and after every step of the property tests, so the common cases go first: a
    scalar is itself, a class's fields are looked up once, and a mapping is ordered by its keys'
    text (distinct keys; only when two keys read alike does the value decide)."""
    kind = type(x)
    if kind in _ATOMS:
        return x
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(f.name for f in fields(x)) if is_dataclass(kind) else ()
    if isinstance(x, Round):  # a generator inside: its state and what it asks next
        return {"state": plain(x.state), "request": repr(x.request)}
    if isinstance(x, GameOptions):
        return None  # fixed for the table's life, and the same object live and replayed
    atoms = _ATOMS
    if names:
        out = {}
        for name in names:
            value = getattr(x, name)
            out[name] = value if type(value) in atoms else plain(value)
        return out
    if isinstance(x, Enum):
        return x.value
    if isinstance(x, dict):
        pairs = [
            (k if type(k) in atoms else plain(k), v if type(v) in atoms else plain(v)) for k, v in x.items()
        ]
        keys = [repr(k) for k, _ in pairs]
        if len(set(keys)) < len(keys):
            return sorted(pairs, key=repr)
        return [pair for _, pair in sorted(zip(keys, pairs, strict=True))]  # distinct keys decide
    if isinstance(x, set | frozenset):
        return sorted((plain(v) for v in x), key=repr)
    if isinstance(x, list | tuple):
        return [v if type(v) in atoms else plain(v) for v in x]
    return x
