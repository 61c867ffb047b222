"""Floor commands that arrive on ``.../cmd/<name>``: the envelope of each, and its action checked
against the one allow-list (controller/supervisor/actions.py, which the console uses too).

The broker's ACL decides who may publish a command at all (only floor accounts); this module
decides whether a message is a well-formed command we know. Anything else is refused here, with a
result that keeps the request's ``id``, before the supervisor is ever called, so a malformed
message changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.bounded import InputRefused, load_json
from controller.ids import TEXT, matches
from controller.supervisor.actions import ACTIONS, FLOOR, Action, BadAction, check_args, lookup
from controller.telemetry.payloads import PAYLOAD_VERSION

# Who may command a table over MQTT; the broker's ACL enforces it first. Dealer actions are the
# console's: a dealer signs in at the table, not through a floor account.
ROLES = frozenset({FLOOR})
COMMANDS: dict[str, Action] = {n: a for n, a in ACTIONS.items() if a.roles & ROLES}
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
    if not isinstance(value, str) or not matches(TEXT, value):
        raise Refused(f"{key} must be a string of 1-64 printable characters")
    return value


def parse_command(name: str, payload: bytes) -> Command:
    """The command in ``payload``, or Refused naming what is wrong (never quoting the payload)."""
    try:
        doc = load_json(payload, max_bytes=MAX_COMMAND_BYTES)
    except InputRefused as e:
        raise Refused(f"payload {e}") from None
    if not isinstance(doc, dict):
        raise Refused("payload must be a JSON object")
    raw_id, raw_who = doc.get("id"), doc.get("who")
    request_id = raw_id if matches(TEXT, raw_id) else None
    who = raw_who if matches(TEXT, raw_who) else None
    try:
        try:
            action = lookup(name)
        except BadAction as e:
            raise Refused(str(e)) from None
        unknown = set(doc) - _ENVELOPE
        if unknown:
            raise Refused("unknown keys: " + ", ".join(sorted(unknown)[:5]))
        if doc.get("version") != PAYLOAD_VERSION:
            raise Refused(f"version must be {PAYLOAD_VERSION}")
        request_id, who, role = _text(doc, "id"), _text(doc, "who"), _text(doc, "role")
        if role not in ROLES or role not in action.roles:
            raise Refused(f"role may not command {name} over MQTT (floor actions only)")
        try:
            args = check_args(action, doc.get("args", {}))
        except BadAction as e:
            raise Refused(str(e)) from None
    except Refused as e:
        raise Refused(str(e), request_id, who) from None
    return Command(name, request_id, who, role, args)
