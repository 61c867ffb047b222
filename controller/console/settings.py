"""Where the table console listens and whose users file it reads: ``[console]`` in the table file,
overridden by ``tablectl run --console HOST:PORT --users FILE``. Loopback unless told otherwise."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from controller.ids import is_host_name

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8470


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    host: str
    port: int
    users: Path
    allow_hosts: tuple[str, ...] = ()


def parse_listen(text: str, where: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) with a literal address; ConfigError naming ``where``."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        raise ConfigError(
            f"{where}: must be HOST:PORT with an IP address, e.g. 127.0.0.1:{DEFAULT_PORT}"
        ) from None
    if not sep or not 0 <= number <= 65535:
        raise ConfigError(f"{where}: the port must be 0-65535")
    return host, number


def console_settings(
    doc: dict[str, Any],
    base: Path,
    source: str,
    listen: str | None = None,
    users: Path | None = None,
    *,
    need_users: bool = True,
) -> ConsoleSettings | None:
    """The console's settings from the table file's ``[console]`` and the command line, or None
    when neither asks for a console. ``need_users=False`` checks the section alone (the users
    file may still come from ``--users``)."""
    section = doc.get("console")
    if section is None and listen is None and users is None:
        return None
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: console: must be a [console] section")
    extra = sorted(set(section) - {"listen", "users", "allow_hosts"})
    if extra:
        raise ConfigError(f"{source}: console.{extra[0]}: unknown key (expected listen, users, allow_hosts)")
    allow = section.get("allow_hosts", [])
    if not isinstance(allow, list) or not all(is_host_name(h) for h in allow):
        example = '["table-12.pit.example"]'
        raise ConfigError(f"{source}: console.allow_hosts: must be a list of host names, e.g. {example}")
    if listen is not None:
        host, port = parse_listen(listen, "--console")
    else:
        raw = section.get("listen", f"{DEFAULT_HOST}:{DEFAULT_PORT}")
        if not isinstance(raw, str):
            raise ConfigError(f"{source}: console.listen: must be a string HOST:PORT")
        host, port = parse_listen(raw, f"{source}: console.listen")
    if users is None:
        raw_users = section.get("users")
        if raw_users is None and not need_users:
            raw_users = "-"
        if raw_users is None:
            raise ConfigError(f"{source}: console.users: the console needs a users file (or --users FILE)")
        if not isinstance(raw_users, str) or not raw_users:
            raise ConfigError(f"{source}: console.users: must be a path")
        users = base / raw_users
    return ConsoleSettings(host, port, users, tuple(allow))
