"""Where the broker is and how to log in: URL, credentials and TLS; and a client per connection.

Credentials come from the table config or the environment, never from a URL: a URL ends up on
command lines, in ``ps`` and in shell history, so one carrying ``user:pass@`` is refused.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import aiomqtt
from pydantic import ValidationError

from controller.errors import ConfigError, short_reason
from controller.schema import one_line
from controller.table_file import TelemetrySection

ENV_USERNAME = "TABLECTL_MQTT_USERNAME"
ENV_PASSWORD = "TABLECTL_MQTT_PASSWORD"
DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
_URL_FORMS = "mqtt://host:port or mqtts://host:port"


@dataclass(frozen=True)
class BrokerSettings:
    host: str
    port: int
    tls: bool = False
    ca_file: Path | None = None  # None with tls: the system's trust store
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a repr, a log line or a traceback
    keepalive: int = 10  # seconds; a silent broker is noticed within 1.5x this

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"

    def tls_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        try:
            return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"telemetry: ca_file {self.ca_file}: cannot be used ({e})") from None

    def client(
        self,
        identifier: str,
        *,
        will: aiomqtt.Will | None = None,
        timeout: float = 10.0,
        max_inflight: int = 200,
        max_queued_incoming: int | None = None,
        queue_type: type[asyncio.Queue[aiomqtt.Message]] | None = None,
    ) -> aiomqtt.Client:
        """A fresh client: aiomqtt fixes the Last Will at construction, so one per connection attempt."""
        return aiomqtt.Client(
            self.host,
            self.port,
            identifier=identifier,
            username=self.username,
            password=self.password,
            will=will,
            clean_session=True,
            keepalive=self.keepalive,
            timeout=timeout,
            tls_context=self.tls_context(),
            max_inflight_messages=max_inflight,
            max_queued_incoming_messages=max_queued_incoming,
            queue_type=queue_type,
            # Small QoS 1 messages back to back: without this, Nagle holds each write until the
            # broker's delayed ACK and a backlog drains at a fraction of the link's speed.
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        )


def parse_broker_url(url: str) -> tuple[bool, str, int]:
    """``mqtt://host[:port]`` or ``mqtts://host[:port]`` -> (tls, host, port)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"telemetry: broker URL {url!r} is not {_URL_FORMS}") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ConfigError(f"telemetry: broker URL {url!r} is not {_URL_FORMS}")
    if parts.username is not None or parts.password is not None:
        # Do not echo the URL: it holds a password.
        raise ConfigError(
            f"telemetry: the broker URL may not carry credentials; set {ENV_USERNAME} and {ENV_PASSWORD} "
            "or [telemetry] username/password in the table config"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"telemetry: broker URL {url!r} has a path or query; only host and port are used")
    return parts.scheme == "mqtts", parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def broker_settings(
    url: str, section: TelemetrySection | Mapping[str, object], base_dir: Path, environ: Mapping[str, str]
) -> BrokerSettings:
    """Settings from a URL, the config's ``[telemetry]`` section and the environment (which wins)."""
    tls, host, port = parse_broker_url(url)
    sec = section if isinstance(section, TelemetrySection) else telemetry_section(section)
    username = environ.get(ENV_USERNAME) or sec.username
    password = environ.get(ENV_PASSWORD) or sec.password
    if password is not None and username is None:
        raise ConfigError(f"telemetry: a password but no username ({ENV_USERNAME} or [telemetry] username)")
    ca_file = (base_dir / sec.ca_file) if sec.ca_file is not None else None
    if ca_file is not None and not ca_file.is_file():
        raise ConfigError(f"telemetry.ca_file: {sec.ca_file}: no such file")
    if ca_file is not None:
        try:  # refused here, not looped on at run time (each connection attempt would fail)
            ssl.create_default_context(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(
                f"telemetry.ca_file: {sec.ca_file}: not a usable CA certificate ({short_reason(e)})"
            ) from None
    if sec.require_tls and not tls:
        raise ConfigError("telemetry.require_tls: set; use an mqtts:// broker URL")
    return BrokerSettings(host, port, tls, ca_file, username, password, sec.keepalive_s)


def telemetry_section(section: object) -> TelemetrySection:
    """``[telemetry]`` checked by the table file's schema; ConfigError ``telemetry.<key>: <rule>``
    (the caller adds the file)."""
    try:
        return TelemetrySection.model_validate(section)
    except ValidationError as e:
        raise ConfigError(one_line(e, "", "telemetry.", model=TelemetrySection)) from None
