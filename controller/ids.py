"""The names the product takes from files, commands and the wire: one pattern for each kind of
name, always matched whole.

Every check here is ``fullmatch``. ``re.match`` with a ``$`` anchor accepts a trailing newline
(``"dbj-01\\n"``), and a table id with a newline in it would become a journal file name, an MQTT
topic level and a broker user name. Two copies of the identifier pattern had already come to
disagree on exactly that; so each kind of name is written once, here, and every parser (the
table file, the command allow-list, the topic tree, the journal, the archive, the console)
asks this module.
"""

from __future__ import annotations

import re
from typing import Final, TypeGuard

# A table id, a site, a device's name: each is a file name (/var/lib/tablectl/<id>.db), one MQTT
# topic level (tablectl/<site>/<table>, tabledev/...) and a broker user name, so safe characters
# only, and the same alphabet the broker ACL's user names use (docs/mqtt.md).
IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
IDENTIFIER_RULE: Final = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"

# A journal record's kind: chosen by code, not data. A plain alphabet needs no JSON escaping, so
# the hash input is the same whichever JSON library an auditor uses.
EVENT_KIND: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.:\-]{0,63}")

# A person's name in a command or the journal (who did it), a request id: printable, short, one line.
TEXT: Final = re.compile(r"[^\x00-\x1f\x7f]{1,64}")

# A console account's sign-in name.
USER_NAME: Final = re.compile(r"[a-z][a-z0-9_.\-]{0,31}")

# A batch's back colour, as the table file names it and the dealer's commands repeat it.
BACK_COLOUR: Final = re.compile(r"[a-z][a-z0-9_\-]{0,31}")

# The environment variable a password is read from.
ENV_NAME: Final = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")

# One label of a DNS name (RFC 1123): letters, digits and '-'. A browser sends only those in Host
# (an IDN as its xn-- form), so a name with anything else could never match and is a mistake.
_HOST_LABEL: Final = re.compile(r"[A-Za-z0-9-]{1,63}")


def matches(pattern: re.Pattern[str], value: object) -> TypeGuard[str]:
    """Whether ``value`` is a string that ``pattern`` matches whole (no trailing newline)."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def is_identifier(value: object) -> TypeGuard[str]:
    return matches(IDENTIFIER, value)


def is_host_name(value: object) -> TypeGuard[str]:
    """A DNS name such as ops-proxy.example (a trailing dot allowed), at most 253 characters."""
    if not isinstance(value, str) or not 0 < len(value) <= 253:
        return False
    return all(_HOST_LABEL.fullmatch(label) for label in value.removesuffix(".").split("."))
