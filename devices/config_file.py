"""The ``[devices.<name>]`` sections of a table config.

``load_devices(devices_table, base_dir)`` turns them into :class:`DeviceConfig` objects, loading
each device's profile (paths are relative to the table file's folder). Every problem raises
``controller.errors.ConfigError`` with one line: file, key, rule.
"""

from __future__ import annotations

import os
import pathlib
import ssl
from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, ConfigDict, Field, ValidationError

from controller.backoff import BackoffPolicy
from controller.cards import RANKS
from controller.errors import ConfigError, short_reason
from controller.ids import BACK_COLOUR, ENV_NAME, IDENTIFIER_RULE, is_identifier, matches
from controller.schema import Document, Rule, between, first_error, one_line
from controller.shipped import resolve_ref, shipped_names
from devices.config import (
    LINE_FRAMING,
    MODBUS_RTU_FRAMING,
    MODBUS_TLS_PORT,
    DeviceConfig,
    Endpoint,
    Framing,
    ModbusTls,
    MqttAccess,
    Parity,
    RetryPolicy,
    Side,
    TransportKind,
    tls_context,
)
from devices.errors import ProfileError
from devices.profiles import DeviceKind, Protocol, load_profile
from devices.variants import UnknownVariant, variant_of

_PROFILE_RULE: Final = "must be the path of a device profile (config/devices/*.toml)"
_TRANSPORT_RULE: Final = f"must be one of {', '.join(TransportKind)}"

_PROTOCOL_OF: Final = {
    TransportKind.MODBUS_TCP: Protocol.MODBUS,
    TransportKind.MODBUS_TLS: Protocol.MODBUS,
    TransportKind.MODBUS_RTU: Protocol.MODBUS,
    TransportKind.SERIAL_LINE: Protocol.FRAMES,
    TransportKind.MQTT: Protocol.FRAMES,
}

# Upper case only: a password pasted into password_env by mistake is then refused by its shape
# more often than it is named back in "not set" (the names people use are upper case anyway).
_ENV_RULE: Final = "must name an environment variable (A-Z, 0-9, _)"


def _distinct_pair(v: list[str]) -> list[str]:
    if len(v) != 2 or len(set(v)) != 2 or not all(matches(BACK_COLOUR, x) for x in v):
        raise ValueError("two different colours")
    return v


def _ranks(v: list[str]) -> list[str]:
    if not all(x in RANKS for x in v):
        raise ValueError("not a rank")
    return v


def _plain_topic(v: str) -> str:
    if not v or any(ch in v for ch in "+#"):
        raise ValueError("wildcard")
    return v


def _env_name(v: str) -> str:
    if not matches(ENV_NAME, v):
        raise ValueError("not a variable name")
    return v


Seconds = Annotated[float, Rule("must be a positive number", gt=0, le=1e6)]
Count = Annotated[int, between(1, 1000)]
NonEmpty = Annotated[str, Field(min_length=1), Rule("must be a non-empty string")]
EnvName = Annotated[str, AfterValidator(_env_name), Rule(_ENV_RULE)]


class _SimSection(Document):
    """``[devices.<name>.sim]``: the simulator's settings. Other keys stay free-form (each
    simulator reads its own); the numbers and the simulated device's account are checked here,
    so that a wrong type is one line naming the key, not a traceback in the simulator."""

    model_config = ConfigDict(extra="allow")

    decks: Annotated[int, Rule("must be a whole number of decks from 1 to 12", ge=1, le=12)] | None = None
    cycle_s: (
        Annotated[float, Rule("must be a number of seconds above 0, at most 3600", gt=0, le=3600)] | None
    ) = None
    heartbeat_s: (
        Annotated[float, Rule("must be a number of seconds above 0, at most 60", gt=0, le=60)] | None
    ) = None
    cover_fraction: (
        Annotated[float, Rule("must be a fraction of the shoe between 0.01 and 0.99", ge=0.01, le=0.99)]
        | None
    ) = None
    username: NonEmpty | None = None
    password_env: EnvName | None = None
    # modbus-tls: the simulated device's certificate and key, and the CA of the masters it admits.
    cert: NonEmpty | None = None
    key: NonEmpty | None = None
    ca_file: NonEmpty | None = None


class _Section(Document):
    """The keys every ``[devices.<name>]`` section may have (the schema; the checks across keys,
    files and the environment are in ``_one``). Defaults are the docs' (docs/devices/README.md)."""

    kind: str  # checked first, to choose the section's model
    profile: Annotated[str, Field(min_length=1), Rule(_PROFILE_RULE)]
    transport: Annotated[str, AfterValidator(TransportKind), Rule(_TRANSPORT_RULE)]
    host: Annotated[str, Field(min_length=1), Rule("must be a host name or address")] = "127.0.0.1"
    port: Annotated[int, between(0, 65535)] = 0
    path: Annotated[str, Rule("must be a string")] = ""
    baudrate: Annotated[int, between(1200, 921600)] = 19200
    bytesize: Annotated[int, between(5, 8)] | None = None
    parity: Annotated[Parity, Rule("must be one of even, odd, none")] | None = None
    stopbits: Annotated[int, Rule("must be 1 or 2", ge=1, le=2)] | None = None
    gap_ms: Annotated[float, between(0, 1000, "a number")] | None = None
    topic: (
        Annotated[str, AfterValidator(_plain_topic), Rule("must be a plain topic without wildcards")] | None
    ) = None
    device_id: Annotated[int, between(1, 247)] = 1
    timeout_s: Annotated[float, between(0.01, 30, "a number")] = 0.5
    poll_interval_s: Annotated[float, between(0.005, 60, "a number")] = 0.1
    offline_after: Annotated[int, between(1, 100)] = 3
    connect_grace_s: Annotated[float, between(0, 3600, "a number")] = 30.0
    read_attempts: Annotated[int, between(1, 10)] = 2
    write_attempts: Annotated[int, between(1, 10)] = 1
    backoff_initial_s: Annotated[float, between(0.001, 60, "a number")] = 0.2
    backoff_max_s: Annotated[float, between(0.001, 3600, "a number")] = 10.0
    backoff_jitter: Annotated[float, between(0, 1, "a number")] = 0.25
    # MQTT only (refused on the other transports in _one).
    tls: Annotated[bool, Rule("must be true or false")] = False
    ca_file: (
        Annotated[str, Field(min_length=1), Rule("must be the path of a CA certificate (PEM)")] | None
    ) = None
    username: NonEmpty | None = None
    password_env: EnvName | None = None
    # modbus-tls only: the appliance's certificate and key (ca_file above: the devices' CA).
    cert: NonEmpty | None = None
    key: NonEmpty | None = None
    sim: _SimSection = Field(default_factory=lambda: _SimSection())


class _ShufflerSection(_Section):
    max_cycle_s: Seconds | None = None
    # false: the shuffler does not count the cards it shuffles (687a.9(f): the stub is then
    # counted at least once every 5 rounds); a counting shuffler's count is checked (673a.13).
    counts_cards: Annotated[bool, Rule("must be true or false")] | None = None
    backs: (
        Annotated[
            list[str],
            AfterValidator(_distinct_pair),
            Rule("must name the two batches' back colours (a-z, 0-9, '_', '-'), e.g. ['red', 'blue']"),
        ]
        | None
    ) = None


class _ShoeSection(_Section):
    pass


class _ReaderSection(_Section):
    peek_up_ranks: (
        Annotated[list[str], AfterValidator(_ranks), Rule(f"must be a list of ranks from {' '.join(RANKS)}")]
        | None
    ) = None


class _StubCounterSection(_Section):
    expected: Count | None = None
    heartbeat_timeout_s: Seconds | None = None


class _KeypadSection(_Section):
    boxes: Count | None = None
    spots: Count | None = None
    # Modbus TCP only: the key counter read alone this often between full polls (687a.9(b)).
    watch_interval_s: Seconds | None = None


_SECTIONS: Final[dict[DeviceKind, type[_Section]]] = {
    DeviceKind.SHUFFLER: _ShufflerSection,
    DeviceKind.SHOE: _ShoeSection,
    DeviceKind.READER: _ReaderSection,
    DeviceKind.STUB_COUNTER: _StubCounterSection,
    DeviceKind.KEYPAD: _KeypadSection,
}
_OPTION_KEYS: Final = {
    kind: tuple(sorted(set(model.model_fields) - set(_Section.model_fields)))
    for kind, model in _SECTIONS.items()
}
_MQTT_KEYS: Final = ("tls", "ca_file", "username", "password_env")
_SIM_MQTT_KEYS: Final = ("username", "password_env")
_TLS_KEYS: Final = ("cert", "key", "ca_file")


class _Where:
    def __init__(self, source: str, name: str) -> None:
        self.source = source
        self.prefix = f"devices.{name}"

    def fail(self, key: str, rule: str) -> ConfigError:
        return ConfigError(f"{self.source}: {self.prefix}.{key}: {rule}")


def load_devices(
    devices_table: dict[str, Any],
    base_dir: pathlib.Path,
    *,
    source: str | None = None,
    environ: Mapping[str, str] | None = None,
    topic_prefix: str = "tablectl/devices",
    side: Side = "appliance",
) -> list[DeviceConfig]:
    """Every ``[devices.<name>]`` section as a DeviceConfig, in file order.

    ``side`` says which end of an MQTT device's link this process is, and so which password it
    reads: the appliance's (the device section's ``password_env``), the simulated device's (its sim
    section's) or, for a rig that runs both in one process, both. The other account is still
    checked, but its variable need not be set: `tablectl run` never needs the device's password.

    An MQTT device without ``topic`` gets ``<topic_prefix>/<name>``; a table file's loader passes
    ``tabledev/<site>/<table>``, the tree the shipped broker ACL gives devices.

    An MQTT device's ``password_env`` is read from ``environ`` (default ``os.environ``) here, so a
    missing password stops the start with the config's other errors, not at the first connect; so
    is the simulated device's own (``[devices.<name>.sim]`` ``username`` and ``password_env``).
    """
    src = source or str(base_dir)
    env = os.environ if environ is None else environ
    if not isinstance(devices_table, dict):
        raise ConfigError(f"{src}: devices: must be a table of [devices.<name>] sections")
    out = [_one(name, t, base_dir, src, env, topic_prefix, side) for name, t in devices_table.items()]
    seen: dict[tuple[tuple[str, str, int], int], str] = {}
    lines: dict[tuple[str, str, int], DeviceConfig] = {}
    for d in out:
        key = (d.endpoint.bus_key, d.device_id)
        if d.endpoint.transport is not TransportKind.MQTT and (d.endpoint.port or d.endpoint.path):
            if key in seen:
                rtu = d.endpoint.transport is TransportKind.MODBUS_RTU
                raise ConfigError(
                    f"{src}: devices.{d.name}.device_id: {d.device_id} is already used by "
                    f"devices.{seen[key]} on the same bus" + (" (one id per RTU line)" if rtu else "")
                )
            seen[key] = d.name
        if d.endpoint.transport is not TransportKind.MODBUS_RTU:
            continue
        # One RTU line has one speed, one framing and one gap: the first device's are the line's.
        first = lines.setdefault(d.endpoint.bus_key, d)
        if first.endpoint.gap_s != d.endpoint.gap_s:
            raise ConfigError(f"{src}: devices.{d.name}.gap_ms: devices on one bus must agree on the gap")
        for setting in ("baudrate", "bytesize", "parity", "stopbits"):
            if _line_setting(d.endpoint, setting) != _line_setting(first.endpoint, setting):
                raise ConfigError(
                    f"{src}: devices.{d.name}.{setting}: devices on one line must agree on its speed"
                    f" and framing (devices.{first.name}'s line)"
                )
    return out


def _line_setting(ep: Endpoint, key: str) -> object:
    return ep.baudrate if key == "baudrate" else getattr(ep.serial_framing, key)


def _one(
    name: str,
    t: Any,
    base_dir: pathlib.Path,
    src: str,
    environ: Mapping[str, str],
    topic_prefix: str,
    side: Side,
) -> DeviceConfig:
    w = _Where(src, name)
    if not is_identifier(name):  # a log field, an MQTT topic level of the device's health
        raise ConfigError(f"{src}: devices.{ascii(name)[1:-1][:64]}: the name must be {IDENTIFIER_RULE}")
    if not isinstance(t, dict):
        raise ConfigError(f"{src}: devices.{name}: must be a table")
    _no_literal_password(w, t)
    sim_raw = t.get("sim", {})
    if isinstance(sim_raw, dict):
        _no_literal_password(_Where(src, f"{name}.sim"), sim_raw)
    kind_raw = t.get("kind")
    if kind_raw not in tuple(DeviceKind):
        raise w.fail("kind", f"must be one of {', '.join(DeviceKind)}")
    kind = DeviceKind(kind_raw)
    try:
        sec = _SECTIONS[kind].model_validate(t)
    except ValidationError as exc:
        line = one_line(exc, src, f"devices.{name}.")
        if first_error(exc)["type"] == "extra_forbidden":
            line += f" for a {kind} device"
        raise ConfigError(line) from None
    prof_path = resolve_ref(base_dir, sec.profile, "devices")
    if prof_path is None:
        shipped = ", ".join(shipped_names("devices"))
        why = f"no profile at {sec.profile} (relative to the table file) nor a shipped one ({shipped})"
        raise w.fail("profile", why)
    try:
        profile = load_profile(prof_path)
    except ProfileError as exc:
        raise w.fail("profile", str(exc)) from None
    if profile.kind is not kind:
        raise w.fail("profile", f"{sec.profile} is a {profile.kind} profile, not {kind}")
    try:
        variant_of(profile)
    except UnknownVariant as exc:
        raise w.fail("profile", f"{prof_path}: {exc}") from None
    transport = TransportKind(sec.transport)
    if _PROTOCOL_OF[transport] is not profile.protocol:
        raise w.fail("transport", f"{transport} cannot carry a {profile.protocol} profile")

    serial_keys = ("path", "baudrate", "bytesize", "parity", "stopbits")
    network_keys = ("host", "port")
    serial = transport in (TransportKind.MODBUS_RTU, TransportKind.SERIAL_LINE)
    if serial:
        _only(w, t, network_keys, "only for a network transport (modbus-tcp, modbus-tls, mqtt)")
    else:
        _only(w, t, serial_keys[2:], "only for a serial line (modbus-rtu, serial-line)")
        if transport is TransportKind.MODBUS_TLS and "port" not in t:
            sec = sec.model_copy(update={"port": MODBUS_TLS_PORT})
    gap_default = 5.0 if transport is TransportKind.MODBUS_RTU else 0.0
    gap_s = (gap_default if sec.gap_ms is None else sec.gap_ms) / 1000
    if serial:
        endpoint = Endpoint(
            transport, path=sec.path, baudrate=sec.baudrate, gap_s=gap_s, framing=_framing(w, sec, transport)
        )
    else:
        endpoint = Endpoint(transport, host=sec.host, port=sec.port, gap_s=gap_s)
    if transport is TransportKind.MQTT:
        topic = sec.topic if sec.topic is not None else f"{topic_prefix}/{name}"
        endpoint = replace(endpoint, topic=topic)
        access = _mqtt_access(w, sec, base_dir, environ if side != "sim" else None)
        # The simulated device reaches the same broker as the appliance: same TLS, its own account.
        w_sim = _Where(src, f"{name}.sim")
        sim_environ = environ if side != "appliance" else None
        sim_access = MqttAccess(access.tls, access.ca_file, *_mqtt_account(w_sim, sec.sim, sim_environ))
    else:
        tls_keys = _TLS_KEYS if transport is TransportKind.MODBUS_TLS else ()
        mqtt_only = tuple(k for k in (*_MQTT_KEYS, "topic") if k not in tls_keys)
        _only(w, t, mqtt_only, 'only for transport = "mqtt"')
        _only(_Where(src, f"{name}.sim"), sim_raw, _SIM_MQTT_KEYS, 'only for transport = "mqtt"')
        access = sim_access = MqttAccess()
    sim_tls: ModbusTls | None = None
    if transport is TransportKind.MODBUS_TLS:
        endpoint = replace(endpoint, tls=_modbus_tls(w, sec, base_dir, "client"))
        if side != "appliance":
            sim_tls = _modbus_tls(_Where(src, f"{name}.sim"), sec.sim, base_dir, "server")
    else:
        _only(w, t, ("cert", "key"), 'only for transport = "modbus-tls"')
        if isinstance(sim_raw, dict):
            _only(_Where(src, f"{name}.sim"), sim_raw, _TLS_KEYS, 'only for transport = "modbus-tls"')
    return DeviceConfig(
        name=name,
        kind=kind,
        profile=profile,
        endpoint=endpoint,
        device_id=sec.device_id,
        timeout_s=sec.timeout_s,
        poll_interval_s=sec.poll_interval_s,
        offline_after=sec.offline_after,
        connect_grace_s=sec.connect_grace_s,
        retry=RetryPolicy(sec.read_attempts, sec.write_attempts),
        backoff=BackoffPolicy(sec.backoff_initial_s, sec.backoff_max_s, sec.backoff_jitter),
        options=_options(sec, kind),
        sim=sim_raw,
        source=f"{src}: devices.{name}",
        mqtt=access,
        sim_mqtt=sim_access,
        sim_tls=sim_tls,
    )


def _framing(w: _Where, sec: _Section, transport: TransportKind) -> Framing:
    """The line's framing: each key given, or the default of its transport (Modbus: 8E1, and two
    stop bits when there is no parity; a plain serial line: 8N1)."""
    default = MODBUS_RTU_FRAMING if transport is TransportKind.MODBUS_RTU else LINE_FRAMING
    parity = sec.parity or default.parity
    two_stop = transport is TransportKind.MODBUS_RTU and parity == "none"
    framing = Framing(
        bytesize=sec.bytesize or default.bytesize,
        parity=parity,
        stopbits=sec.stopbits or (2 if two_stop else default.stopbits),
    )
    if transport is TransportKind.MODBUS_RTU:
        if framing.bytesize != 8:
            raise w.fail("bytesize", "Modbus RTU sends 8 data bits (Modbus over Serial Line 2.5.1)")
        if two_stop and framing.stopbits != 2:
            why = "Modbus RTU without parity needs 2 stop bits (Modbus over Serial Line 2.5.1)"
            raise w.fail("stopbits", why)
    return framing


def _modbus_tls(
    w: _Where, sec: _Section | _SimSection, base_dir: pathlib.Path, side: Literal["client", "server"]
) -> ModbusTls:
    """The files of one end of a modbus-tls link, each there and usable together (the context is
    built once here, so a bad file stops the start in one line naming the key)."""
    paths: dict[str, pathlib.Path] = {}
    for key in _TLS_KEYS:
        value = getattr(sec, key)
        if value is None:
            end = "the simulated device's certificate, key and CA" if side == "server" else "the appliance's"
            raise w.fail(key, f'transport = "modbus-tls" needs cert, key and ca_file ({end}, PEM)')
        path = (base_dir / value).resolve()
        if not path.is_file():
            raise w.fail(key, f"{value}: no such file")
        paths[key] = path
    tls = ModbusTls(paths["cert"], paths["key"], paths["ca_file"])
    try:
        tls.context(side)
    except (OSError, ssl.SSLError) as exc:
        raise w.fail(
            "cert", f"the certificate, key and CA cannot be used together ({short_reason(exc)})"
        ) from None
    return tls


def _only(w: _Where, t: Mapping[str, Any], keys: tuple[str, ...], rule: str) -> None:
    extra = sorted(set(keys) & set(t))
    if extra:
        raise w.fail(extra[0], rule)


def _no_literal_password(w: _Where, t: Mapping[str, Any]) -> None:
    if "password" in t:
        # Table files are copied, diffed and attached to tickets; the value is never echoed.
        raise w.fail("password", "a password is never written in the table config; use password_env")


def _mqtt_access(
    w: _Where, sec: _Section, base_dir: pathlib.Path, environ: Mapping[str, str] | None
) -> MqttAccess:
    ca_file: pathlib.Path | None = None
    if sec.ca_file is not None:
        if not sec.tls:
            raise w.fail("ca_file", "needs tls = true")
        ca_file = (base_dir / sec.ca_file).resolve()
        if not ca_file.is_file():
            raise w.fail("ca_file", f"{sec.ca_file}: no such file")
        try:
            tls_context(True, ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise w.fail(
                "ca_file", f"{sec.ca_file}: not a usable CA certificate ({short_reason(exc)})"
            ) from None
    return MqttAccess(sec.tls, ca_file, *_mqtt_account(w, sec, environ))


def _mqtt_account(
    w: _Where, sec: _Section | _SimSection, environ: Mapping[str, str] | None
) -> tuple[str | None, str | None, str | None]:
    """``username``, ``password_env`` and the password read from that variable (the schema has
    checked their shapes); with ``environ`` None (the other end's account) the variable is not
    read and the password is None."""
    username, password_env = sec.username, sec.password_env
    if password_env is None:
        return username, None, None
    if username is None:
        raise w.fail("password_env", "needs a username")
    if environ is None:
        return username, password_env, None
    password = environ.get(password_env)
    if password is None:
        raise w.fail("password_env", f"environment variable {password_env} is not set")
    if not password:
        raise w.fail("password_env", f"environment variable {password_env} is empty")
    return username, password_env, password


def _options(sec: _Section, kind: DeviceKind) -> dict[str, Any]:
    """The kind's own keys that were given, in the shapes the drivers take."""
    out: dict[str, Any] = {}
    for key in _OPTION_KEYS[kind]:
        v = getattr(sec, key)
        if v is None:
            continue
        if key == "backs":
            v = tuple(v)
        elif key == "peek_up_ranks":
            v = frozenset(v)
        out[key] = v
    return out
