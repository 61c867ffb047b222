"""Where a NATS cluster is and how to log in to it: one definition for a table's JetStream events
publisher and the archive's workers (docs/scale-out.md, "Accounts, permissions and TLS").

Every client has a user of its own and an inbox prefix of its own (``_INBOX_<user>``): the
cluster's permissions let each user subscribe to its own inboxes only, so no one reads the
replies (PubAcks, fetched events) another client asked for. Credentials come from the
environment or a config file, never from a URL (it ends up in ``ps`` and shell history).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nats.aio.client import Client as NATS

from controller.errors import ConfigError, short_reason

ENV_USERNAME = "TABLECTL_NATS_USERNAME"
ENV_PASSWORD = "TABLECTL_NATS_PASSWORD"
_SCHEMES = ("nats", "tls")


def subject_of(topic: str) -> str:
    """nats-server's MQTT listener maps topic levels to subject tokens ('/' to '.') and a '.'
    inside a level to '//'; a NATS client publishing a table's topic uses the same subject."""
    return ".".join(level.replace(".", "//") for level in topic.split("/"))


def topic_of(subject: str) -> str:
    return "/".join(token.replace("//", ".") for token in subject.split("."))


def inbox_prefix(user: str | None) -> str:
    """``_INBOX_<user>`` with every character a subject token may not hold as '_': the prefix the
    cluster's permissions give this user alone (config/nats/accounts.conf)."""
    if not user:
        return "_INBOX"
    return "_INBOX_" + re.sub(r"[^A-Za-z0-9_-]", "_", user)


@dataclass(frozen=True)
class NatsSettings:
    servers: tuple[str, ...]
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a repr, a log line or a traceback
    ca_file: Path | None = None  # tls:// servers: the floor's CA; None: the system's trust store

    @property
    def tls(self) -> bool:
        return any(s.startswith("tls://") for s in self.servers)

    def tls_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        try:
            return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"nats: ca_file {self.ca_file}: cannot be used ({short_reason(e)})") from None

    async def connect(
        self,
        name: str,
        *,
        on_error: Callable[[Exception], Awaitable[None]],
        on_disconnected: Callable[[], Awaitable[None]] | None = None,
        on_reconnected: Callable[[], Awaitable[None]] | None = None,
        reconnect_s: float = 0.5,
        client: type[NATS] = NATS,
    ) -> NATS:
        """A client that moves to another node by itself, for ever; each error one line (nats-py
        prints tracebacks unless given ``error_cb``). ``client``: nats-py's client or a subclass
        of it (``nats.connect`` makes a ``NATS()`` and connects it, as this does)."""
        options: dict[str, Any] = {
            "servers": list(self.servers),
            "name": name,
            "user": self.username,
            "password": self.password,
            "tls": self.tls_context(),
            "inbox_prefix": inbox_prefix(self.username).encode(),
            "allow_reconnect": True,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": reconnect_s,  # seconds, a float (nats-py's hint says int)
            "connect_timeout": 2,
            "error_cb": on_error,
            "disconnected_cb": on_disconnected,
            "reconnected_cb": on_reconnected,
        }
        nc = client()
        await nc.connect(**options)
        return nc


def parse_servers(spec: str) -> tuple[str, ...]:
    """``nats://a:4222,nats://b:4222`` (or ``tls://``): every node of the cluster."""
    servers = tuple(s.strip() for s in spec.split(",") if s.strip())
    if not servers:
        raise ConfigError("nats: no servers (nats://host:port or tls://host:port, comma-separated)")
    for s in servers:
        try:
            parts = urlsplit(s)
            parts.port  # noqa: B018 (raises on a bad port)
        except ValueError:
            raise ConfigError(
                f"nats: {ascii(s)[1:-1][:80]} is not nats://host:port or tls://host:port"
            ) from None
        if parts.scheme not in _SCHEMES or not parts.hostname:
            raise ConfigError(f"nats: {ascii(s)[1:-1][:80]} is not nats://host:port or tls://host:port")
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                f"nats: a server URL may not carry credentials; set {ENV_USERNAME} and {ENV_PASSWORD}"
            )
    if len({s.split("://", 1)[0] for s in servers}) > 1:
        raise ConfigError("nats: every server nats:// or every server tls://, not a mix")
    return servers


def nats_settings(
    spec: str, environ: Mapping[str, str], *, username: str | None = None, ca_file: Path | None = None
) -> NatsSettings:
    """Settings from the servers, the environment (which wins) and the caller's defaults."""
    servers = parse_servers(spec)
    password = environ.get(ENV_PASSWORD)
    # The caller's default user only with a password: an open cluster (a lab's) has no users.
    user = environ.get(ENV_USERNAME) or (username if password is not None else None)
    if password is not None and user is None:
        raise ConfigError(f"nats: a password but no user ({ENV_USERNAME})")
    if ca_file is not None and not ca_file.is_file():
        raise ConfigError(f"nats: ca_file {ca_file}: no such file")
    settings = NatsSettings(servers, user, password, ca_file)
    settings.tls_context()  # refused here, not looped on at run time
    return settings
