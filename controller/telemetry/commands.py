"""Floor commands that arrive on ``.../cmd/<name>``: the allow-list and the JSON shape of each.

The broker's ACL decides who may publish a command at all (only floor accounts); this module
decides whether a message is a well-formed command we know. Anything else is refused here, with a
result, before the supervisor is ever called, so a malformed message changes nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from controller.telemetry.payloads import PAYLOAD_VERSION

_TEXT = re.compile(r"[^\x00-\x1f\x7f]{1,64}\Z")  # a name or id: printable, short, one line
_DEVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}\Z")
ROLES = frozenset({"floor"})  # who may command a table; the broker's ACL enforces it first


@dataclass(frozen=True, slots=True)
class Arg:
    kind: type
    required: bool = True
    minimum: int | None = None
    maximum: int | None = None
    pattern: re.Pattern[str] = _TEXT


# name -> its arguments. Nothing else is ever passed to the supervisor.
COMMANDS: dict[str, dict[str, Arg]] = {
    "acknowledge_alarm": {"alarm": Arg(int, minimum=1)},
    "order_reshuffle": {},
    "mark_out_of_order": {"device": Arg(str, pattern=_DEVICE)},
    "device_restored": {"device": Arg(str, pattern=_DEVICE)},
    "verify_inspection": {"back": Arg(str), "dealer": Arg(str, required=False)},
    "new_dealer": {"name": Arg(str)},
    "reader_replaced": {},
    "first_player_seated": {"seat": Arg(int, minimum=1, maximum=6)},
}
_ENVELOPE = frozenset({"version", "id", "who", "role", "args"})
MAX_COMMAND_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    request_id: str
    who: str
    role: str
    args: dict[str, Any]


class Refused(Exception):
    """A command that is not passed on; the message is one line for the result topic."""

    def __init__(self, message: str, request_id: str | None = None, who: str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.who = who


def _text(doc: dict[str, Any], key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not _TEXT.match(value):
        raise Refused(f"{key} must be a string of 1-64 printable characters")
    return value


def _check_arg(name: str, arg: Arg, value: object) -> None:
    if arg.kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Refused(f"args.{name} must be an integer")
        too_low = arg.minimum is not None and value < arg.minimum
        too_high = arg.maximum is not None and value > arg.maximum
        if too_low or too_high:
            raise Refused(f"args.{name} is out of range")
    elif arg.kind is str and (not isinstance(value, str) or not arg.pattern.match(value)):
        raise Refused(f"args.{name} must be a short one-line string")


def parse_command(name: str, payload: bytes) -> Command:
    """The command in ``payload``, or Refused naming what is wrong (never quoting the payload)."""
    spec = COMMANDS.get(name)
    if spec is None:
        raise Refused("unknown command (allowed: " + ", ".join(sorted(COMMANDS)) + ")")
    if len(payload) > MAX_COMMAND_BYTES:
        raise Refused(f"payload larger than {MAX_COMMAND_BYTES} bytes")
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise Refused("payload is not JSON") from None
    if not isinstance(doc, dict):
        raise Refused("payload must be a JSON object")
    raw_id, raw_who = doc.get("id"), doc.get("who")
    request_id = raw_id if isinstance(raw_id, str) and _TEXT.match(raw_id) else None
    who = raw_who if isinstance(raw_who, str) and _TEXT.match(raw_who) else None
    try:
        unknown = set(doc) - _ENVELOPE
        if unknown:
            raise Refused("unknown keys: " + ", ".join(sorted(unknown)[:5]))
        if doc.get("version") != PAYLOAD_VERSION:
            raise Refused(f"version must be {PAYLOAD_VERSION}")
        request_id, who, role = _text(doc, "id"), _text(doc, "who"), _text(doc, "role")
        if role not in ROLES:
            raise Refused("role may not command a table")
        args = doc.get("args", {})
        if not isinstance(args, dict):
            raise Refused("args must be a JSON object")
        extra = set(args) - set(spec)
        if extra:
            raise Refused(f"{name} takes no argument " + ", ".join(sorted(extra)[:5]))
        for arg_name, arg in spec.items():
            if arg_name in args:
                _check_arg(arg_name, arg, args[arg_name])
            elif arg.required:
                raise Refused(f"args.{arg_name} is missing")
    except Refused as e:
        raise Refused(str(e), request_id, who) from None
    return Command(name, request_id, who, role, dict(args))
