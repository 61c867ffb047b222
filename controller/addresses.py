"""A listening address as an operator writes it: ``HOST:PORT`` with a literal IP address
(``[v6]:PORT`` for IPv6). One parser for every server the appliance opens (the console, /metrics)."""

from __future__ import annotations

import ipaddress

from controller.errors import ConfigError


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
