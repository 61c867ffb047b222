"""Floor commands that arrive on ``.../cmd/<name>``: the envelope of each, and its action checked
against the one allow-list (controller/actions.py, which the console uses too).

The broker's ACL decides who may publish a command at all (only floor accounts); this module
decides whether a message is a well-formed command we know. Anything else is refused here, with a
result that keeps the request's ``id``, before the supervisor is ever called, so a malformed
message changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError

from controller.actions import ACTIONS, ARCHIVE, FLOOR, Action, BadAction, check_args, lookup
from controller.bounded import InputRefused, load_json
from controller.ids import TEXT, matches
from controller.schema import Document, Rule, one_line
from controller.telemetry.payloads import PAYLOAD_VERSION, SCHEMA_VERSION

# Who may command a table over MQTT; the broker's ACL enforces it first. Dealer actions are the
# console's: a dealer signs in at the table, not through a floor account. The archive's account
# may only ask for records again (``republish``; the ACL lets it publish nothing else).
ROLES = frozenset({FLOOR, ARCHIVE})
COMMANDS: dict[str, Action] = {n: a for n, a in ACTIONS.items() if a.roles & ROLES}
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


def _printable(value: str) -> str:
    if not matches(TEXT, value):  # whole: no trailing newline
        raise ValueError("not printable")
    return value


Text = Annotated[str, AfterValidator(_printable), Rule("must be a string of 1-64 printable characters")]


class Envelope(Document):
    """A command message's own keys (its ``args`` are the action's: ``check_args``)."""

    version: Annotated[int, Rule(f"must be {PAYLOAD_VERSION}", ge=PAYLOAD_VERSION, le=PAYLOAD_VERSION)]
    # Optional on a command: the schema version the console follows (docs/mqtt.md, "Schemas").
    schema_version: (
        Annotated[int, Rule(f"must be {SCHEMA_VERSION}", ge=SCHEMA_VERSION, le=SCHEMA_VERSION)] | None
    ) = None
    id: Text
    who: Text
    role: Text
    args: Any = Field(default_factory=dict)


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
        try:
            envelope = Envelope.model_validate(doc)
        except ValidationError as e:
            unknown = sorted(str(x["loc"][0]) for x in e.errors() if x["type"] == "extra_forbidden")
            if unknown:
                raise Refused("unknown keys: " + ", ".join(k[:32] for k in unknown[:5])) from None
            raise Refused(one_line(e, "", model=Envelope)) from None
        request_id, who, role = envelope.id, envelope.who, envelope.role
        if role not in ROLES or role not in action.roles:
            allowed = ", ".join(sorted(ROLES & action.roles)) or "none"
            raise Refused(f"role may not command {name} over MQTT (allowed: {allowed})")
        try:
            args = check_args(action, envelope.args)
        except BadAction as e:
            raise Refused(str(e)) from None
    except Refused as e:
        raise Refused(str(e), request_id, who) from None
    return Command(name, request_id, who, role, args)
