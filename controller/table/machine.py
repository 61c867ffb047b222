"""The parts every machine of the table core shares: what a step returns, and the two registries
that route an input to the machine that decides it and an event to the transition that applies it.

Dispatch is by type, through dicts filled by the ``handles`` and ``applies`` decorators at import:
the decorator's argument and the function's parameter have the same type, so mypy checks that a
handler is given the input it is registered for (no method names built from strings).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

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
