"""A listening address as an operator writes it: ``HOST:PORT`` with a literal IP address
(``[v6]:PORT`` for IPv6). One parser for every server the appliance opens (the console, /metrics),
and the one check of which ``Host`` a server answers for (the console, the monitor's page)."""

from __future__ import annotations

import ipaddress
import re

from controller.errors import ConfigError

_PORT = re.compile(r"[0-9]*")  # RFC 9110 4.2.1: port = *DIGIT, so "name:" is a name too


def parse_host_port(text: str, where: str, example_port: int) -> tuple[str, int]:
    """``(host, port)``; ConfigError naming ``where`` (its example uses ``example_port``)."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        raise ConfigError(
            f"{where}: must be HOST:PORT with an IP address, e.g. 127.0.0.1:{example_port}"
        ) from None
    if not sep or not 0 <= number <= 65535:
        raise ConfigError(f"{where}: the port must be 0-65535")
    return host, number


def host_name(name: str) -> str:
    """The form names are compared in: DNS is case-insensitive and ``name.`` is ``name``."""
    name = name.lower()
    return name[:-1] if name.endswith(".") else name


def answers_for(host: str, names: frozenset[str]) -> bool:
    """Whether a Host value (with or without its port) is one the page may answer.

    IP literals always: DNS rebinding needs a *name* the attacker's DNS points at us, and a browser
    that sends an IP literal was navigated to that address itself, so same-origin already keeps
    other sites' scripts out. ``localhost`` always: it is resolved on this machine, not by anyone's
    DNS. ``names`` are the ones the operator vouched for, already in ``host_name`` form.
    """
    if host.startswith("["):
        literal, bracket, port = host[1:].partition("]")
        if not bracket or (port and not (port.startswith(":") and _PORT.fullmatch(port[1:]))):
            return False
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return False
        return True
    name, _, port = host.partition(":")
    if not _PORT.fullmatch(port):
        return False
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        name = host_name(name)
        return name == "localhost" or name in names
    return True
