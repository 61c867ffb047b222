"""The settings of the table's two HTTP servers, read from the table file.

The console: where it listens, whose users file it reads and its TLS certificate: ``[console]``
in the table file, overridden by ``tablectl run --console HOST:PORT --users FILE``. Loopback unless
told otherwise. ``/metrics``: where it listens (``[metrics] listen`` or ``--metrics``).

Below the supervisor, the console and telemetry alike: ``load_table_config`` checks both sections
with the one reading the servers start from (docs/design.md, "Layers, one way")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from controller.addresses import parse_host_port
from controller.errors import ConfigError
from controller.schema import one_line
from controller.table_file import ConsoleSection

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8470  # the console's
METRICS_PORT = 9470  # /metrics' when an address gives none


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    host: str
    port: int
    users: Path
    allow_hosts: tuple[str, ...] = ()
    tls_cert: Path | None = None  # with tls_key: the console speaks https itself
    tls_key: Path | None = None


def parse_listen(text: str, where: str) -> tuple[str, int]:
    """``HOST:PORT`` for the console; ConfigError naming ``where``."""
    return parse_host_port(text, where, DEFAULT_PORT)


def parse_metrics_listen(text: str, where: str) -> tuple[str, int]:
    """``HOST:PORT`` for /metrics; ConfigError naming ``where``."""
    return parse_host_port(text, where, METRICS_PORT)


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
    raw = doc.get("console")
    if raw is None and listen is None and users is None:
        return None
    try:
        section = ConsoleSection.model_validate({} if raw is None else raw)
    except ValidationError as e:
        raise ConfigError(one_line(e, source, "console.", model=ConsoleSection)) from None
    if listen is not None:
        host, port = parse_listen(listen, "--console")
    else:
        host, port = parse_listen(
            section.listen or f"{DEFAULT_HOST}:{DEFAULT_PORT}", f"{source}: console.listen"
        )
    if users is None:
        raw_users = section.users
        if raw_users is None and not need_users:
            raw_users = "-"
        if raw_users is None:
            raise ConfigError(f"{source}: console.users: the console needs a users file (or --users FILE)")
        users = base / raw_users
    if (section.tls_cert is None) != (section.tls_key is None):
        given = "tls_cert" if section.tls_cert is not None else "tls_key"
        missing = "tls_key" if given == "tls_cert" else "tls_cert"
        raise ConfigError(f"{source}: console.{missing}: needed with console.{given}")
    cert = base / section.tls_cert if section.tls_cert is not None else None
    key = base / section.tls_key if section.tls_key is not None else None
    return ConsoleSettings(host, port, users, tuple(section.allow_hosts), cert, key)
