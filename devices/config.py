"""The ``[devices.<name>]`` sections of a table config.

``load_devices(devices_table, base_dir)`` turns them into :class:`DeviceConfig` objects, loading
each device's profile (paths are relative to the table file's folder). Every problem raises
``controller.errors.ConfigError`` with one line: file, key, rule.
"""

from __future__ import annotations

import math
import os
import pathlib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Literal

from controller.backoff import BackoffPolicy
from controller.cards import RANKS
from controller.errors import ConfigError, short_reason
from controller.ids import BACK_COLOUR, ENV_NAME, IDENTIFIER_RULE, is_identifier, matches
from controller.shipped import resolve_ref, shipped_names
from devices.errors import ProfileError
from devices.profiles import DeviceKind, Profile, Protocol, load_profile


class TransportKind(StrEnum):
    MODBUS_TCP = "modbus-tcp"
    MODBUS_RTU = "modbus-rtu"
    SERIAL_LINE = "serial-line"
    MQTT = "mqtt"


_PROTOCOL_OF: Final = {
    TransportKind.MODBUS_TCP: Protocol.MODBUS,
    TransportKind.MODBUS_RTU: Protocol.MODBUS,
    TransportKind.SERIAL_LINE: Protocol.FRAMES,
    TransportKind.MQTT: Protocol.FRAMES,
}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often *our* code repeats a failed request (pymodbus itself is told not to)."""

    read_attempts: int = 2  # reads are idempotent
    write_attempts: int = 1  # a command is not repeated unless the profile says it is safe


@dataclass(frozen=True, slots=True)
class Endpoint:
    transport: TransportKind
    host: str = ""  # TCP / MQTT host
    port: int = 0  # TCP / MQTT port; 0 lets the simulator choose
    path: str = ""  # serial device path (RTU, line); empty lets the simulator make a pty
    baudrate: int = 19200
    gap_s: float = 0.0  # quiet time between requests on this bus
    topic: str = ""  # MQTT base topic of the device

    @property
    def bus_key(self) -> tuple[str, str, int]:
        """Devices with the same bus key share one connection, one lock and one gap."""
        return (self.transport.value, self.path or self.host, self.port)

    def describe(self) -> str:
        if self.transport in (TransportKind.MODBUS_RTU, TransportKind.SERIAL_LINE):
            return self.path
        if self.transport is TransportKind.MQTT:
            return f"{self.host}:{self.port} {self.topic}"
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class MqttAccess:
    """How an MQTT device link logs in to its broker: TLS and an account."""

    tls: bool = False
    ca_file: pathlib.Path | None = None  # None with tls: the system's trust store
    username: str | None = None
    password_env: str | None = None  # the variable the password came from, for messages
    password: str | None = field(default=None, repr=False)  # never in a repr, a log line or an error


def tls_context(tls: bool, ca_file: pathlib.Path | None) -> ssl.SSLContext | None:
    """The TLS context of a connection to the device broker (None without TLS): the broker's
    certificate is checked against ``ca_file`` (None: the system's trust store) and against the
    host name connected to. The config check, the appliance's MqttLink and the simulator's
    MqttSink all build it here, so a simulated device trusts exactly what the appliance trusts and
    a CA file the check accepted is one the link can use. Raises OSError or ssl.SSLError for an
    unusable CA file."""
    if not tls:
        return None
    return ssl.create_default_context(cafile=str(ca_file) if ca_file else None)


# Which end of an MQTT device's link a process is; see load_devices.
Side = Literal["appliance", "sim", "both"]


@dataclass(frozen=True)
class DeviceConfig:
    name: str
    kind: DeviceKind
    profile: Profile
    endpoint: Endpoint
    device_id: int = 1
    timeout_s: float = 0.5
    poll_interval_s: float = 0.1
    offline_after: int = 3  # consecutive failed polls before the device counts as offline
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    options: Mapping[str, Any] = field(default_factory=dict)  # kind-specific, checked below
    sim: Mapping[str, Any] = field(default_factory=dict)  # simulator settings, for sim/ only
    source: str = ""  # "file: devices.name" for messages
    mqtt: MqttAccess = field(default_factory=MqttAccess)  # MQTT transport only
    # The simulated device's own broker account ([devices.<name>.sim] username, password_env) with
    # the section's tls and ca_file; ``mqtt`` above is the appliance's account, which the ACL lets
    # read a device's frames but not write them.
    sim_mqtt: MqttAccess = field(default_factory=MqttAccess)

    def with_endpoint(self, **changes: Any) -> DeviceConfig:
        from dataclasses import replace

        return replace(self, endpoint=replace(self.endpoint, **changes))


_COMMON_KEYS: Final = {
    "kind", "profile", "transport", "host", "port", "path", "baudrate", "gap_ms", "topic",
    "device_id", "timeout_s", "poll_interval_s", "offline_after", "read_attempts",
    "write_attempts", "backoff_initial_s", "backoff_max_s", "backoff_jitter", "sim",
}  # fmt: skip
_MQTT_KEYS: Final = frozenset({"tls", "ca_file", "username", "password_env"})
# In [devices.<name>.sim]: the simulated device's own account.
_SIM_MQTT_KEYS: Final = frozenset({"username", "password_env"})
# Upper case only: a password pasted into password_env by mistake is then refused by its shape
# more often than it is named back in "not set" (the names people use are upper case anyway).
_OPTION_KEYS: Final[dict[DeviceKind, dict[str, str]]] = {
    DeviceKind.SHUFFLER: {"max_cycle_s": "number", "backs": "backs"},
    DeviceKind.SHOE: {},
    DeviceKind.READER: {"peek_up_ranks": "ranks"},
    DeviceKind.STUB_COUNTER: {"expected": "count", "heartbeat_timeout_s": "number"},
    DeviceKind.KEYPAD: {"boxes": "count", "spots": "count"},
}


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
    gaps: dict[tuple[str, str, int], float] = {}
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
        gap = gaps.setdefault(d.endpoint.bus_key, d.endpoint.gap_s)
        if gap != d.endpoint.gap_s and d.endpoint.transport is TransportKind.MODBUS_RTU:
            raise ConfigError(f"{src}: devices.{d.name}.gap_ms: devices on one bus must agree on the gap")
    return out


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
    kind_raw = t.get("kind")
    if kind_raw not in tuple(DeviceKind):
        raise w.fail("kind", f"must be one of {', '.join(DeviceKind)}")
    kind = DeviceKind(kind_raw)
    allowed = _COMMON_KEYS | _MQTT_KEYS | set(_OPTION_KEYS[kind])
    for key in t:
        if key not in allowed:
            raise w.fail(key, f"unknown key for a {kind} device")
    prof_raw = t.get("profile")
    if not isinstance(prof_raw, str) or not prof_raw:
        raise w.fail("profile", "must be the path of a device profile (config/devices/*.toml)")
    prof_path = resolve_ref(base_dir, prof_raw, "devices")
    if prof_path is None:
        shipped = ", ".join(shipped_names("devices"))
        why = f"no profile at {prof_raw} (relative to the table file) nor a shipped one ({shipped})"
        raise w.fail("profile", why)
    try:
        profile = load_profile(prof_path)
    except ProfileError as exc:
        raise w.fail("profile", str(exc)) from None
    if profile.kind is not kind:
        raise w.fail("profile", f"{prof_raw} is a {profile.kind} profile, not {kind}")
    tr_raw = t.get("transport")
    if tr_raw not in tuple(TransportKind):
        raise w.fail("transport", f"must be one of {', '.join(TransportKind)}")
    transport = TransportKind(tr_raw)
    if _PROTOCOL_OF[transport] is not profile.protocol:
        raise w.fail("transport", f"{transport} cannot carry a {profile.protocol} profile")

    def num(key: str, lo: float, hi: float, default: float) -> float:
        v = t.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise w.fail(key, f"must be a number {lo}-{hi}")
        if not lo <= v <= hi:
            raise w.fail(key, f"must be a number {lo}-{hi}")
        return float(v)

    def integer(key: str, lo: int, hi: int, default: int) -> int:
        v = t.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise w.fail(key, f"must be an integer {lo}-{hi}")
        return v

    def text(key: str, default: str = "") -> str:
        v = t.get(key, default)
        if not isinstance(v, str):
            raise w.fail(key, "must be a string")
        return v

    if transport in (TransportKind.MODBUS_TCP, TransportKind.MQTT):
        host = text("host", "127.0.0.1")
        if not host:
            raise w.fail("host", "must not be empty")
        endpoint = Endpoint(transport, host=host, port=integer("port", 0, 65535, 0))
    else:
        endpoint = Endpoint(
            transport,
            path=text("path"),
            baudrate=integer("baudrate", 1200, 921600, 19200),
        )
    if transport is TransportKind.MQTT:
        topic = text("topic", f"{topic_prefix}/{name}")
        if not topic or any(ch in topic for ch in "+#"):
            raise w.fail("topic", "must be a plain topic without wildcards")
        endpoint = Endpoint(transport, host=endpoint.host, port=endpoint.port, topic=topic)
        access = _mqtt_access(w, t, base_dir, environ if side != "sim" else None)
    else:
        _mqtt_only(w, _MQTT_KEYS, t)
        access = MqttAccess()
    gap_default = 5.0 if transport is TransportKind.MODBUS_RTU else 0.0
    endpoint = Endpoint(
        endpoint.transport, endpoint.host, endpoint.port, endpoint.path, endpoint.baudrate,
        num("gap_ms", 0, 1000, gap_default) / 1000, endpoint.topic,
    )  # fmt: skip

    sim = t.get("sim", {})
    if not isinstance(sim, dict):
        raise w.fail("sim", "must be a table")
    # Other sim keys stay free-form (each simulator reads its own); only the account is checked here.
    w_sim = _Where(src, f"{name}.sim")
    _no_literal_password(w_sim, sim)
    _check_sim_numbers(w_sim, sim)
    if transport is TransportKind.MQTT:
        # The simulated device reaches the same broker as the appliance: same TLS, its own account.
        sim_environ = environ if side != "appliance" else None
        sim_access = MqttAccess(access.tls, access.ca_file, *_mqtt_account(w_sim, sim, sim_environ))
    else:
        _mqtt_only(w_sim, _SIM_MQTT_KEYS, sim)
        sim_access = MqttAccess()
    return DeviceConfig(
        name=name,
        kind=kind,
        profile=profile,
        endpoint=endpoint,
        device_id=integer("device_id", 1, 247, 1),
        timeout_s=num("timeout_s", 0.01, 30, 0.5),
        poll_interval_s=num("poll_interval_s", 0.005, 60, 0.1),
        offline_after=integer("offline_after", 1, 100, 3),
        retry=RetryPolicy(integer("read_attempts", 1, 10, 2), integer("write_attempts", 1, 10, 1)),
        backoff=BackoffPolicy(
            num("backoff_initial_s", 0.001, 60, 0.2),
            num("backoff_max_s", 0.001, 3600, 10),
            num("backoff_jitter", 0, 1, 0.25),
        ),
        options=_options(w, kind, t),
        sim=sim,
        source=f"{src}: devices.{name}",
        mqtt=access,
        sim_mqtt=sim_access,
    )


def _mqtt_only(w: _Where, keys: frozenset[str], t: Mapping[str, Any]) -> None:
    extra = sorted(keys & set(t))
    if extra:
        raise w.fail(extra[0], 'only for transport = "mqtt"')


def _no_literal_password(w: _Where, t: Mapping[str, Any]) -> None:
    if "password" in t:
        # Table files are copied, diffed and attached to tickets; the value is never echoed.
        raise w.fail("password", "a password is never written in the table config; use password_env")


# The simulators' own numbers ([devices.<name>.sim]): (lowest, highest, whole numbers only, rule).
# Checked here so that a wrong type is one line naming the key, not a traceback in the simulator.
_SIM_NUMBERS: Final[dict[str, tuple[float, float, bool, str]]] = {
    "decks": (1, 12, True, "must be a whole number of decks from 1 to 12"),
    "cycle_s": (0.001, 3600, False, "must be a number of seconds above 0, at most 3600"),
    "heartbeat_s": (0.001, 60, False, "must be a number of seconds above 0, at most 60"),
    "cover_fraction": (0.01, 0.99, False, "must be a fraction of the shoe between 0.01 and 0.99"),
}


def _check_sim_numbers(w: _Where, sim: Mapping[str, Any]) -> None:
    for key, (low, high, whole, rule) in _SIM_NUMBERS.items():
        if key not in sim:
            continue
        v = sim[key]
        number = isinstance(v, int) or (isinstance(v, float) and not whole)
        if isinstance(v, bool) or not number or not low <= float(v) <= high:
            raise w.fail(key, rule)


def _mqtt_access(
    w: _Where, t: Mapping[str, Any], base_dir: pathlib.Path, environ: Mapping[str, str] | None
) -> MqttAccess:
    tls = t.get("tls", False)
    if not isinstance(tls, bool):
        raise w.fail("tls", "must be true or false")
    ca_file: pathlib.Path | None = None
    if "ca_file" in t:
        ca_raw = t["ca_file"]
        if not tls:
            raise w.fail("ca_file", "needs tls = true")
        if not isinstance(ca_raw, str) or not ca_raw:
            raise w.fail("ca_file", "must be the path of a CA certificate (PEM)")
        ca_file = (base_dir / ca_raw).resolve()
        if not ca_file.is_file():
            raise w.fail("ca_file", f"{ca_raw}: no such file")
        try:
            tls_context(True, ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise w.fail("ca_file", f"{ca_raw}: not a usable CA certificate ({short_reason(exc)})") from None
    return MqttAccess(tls, ca_file, *_mqtt_account(w, t, environ))


def _mqtt_account(
    w: _Where, t: Mapping[str, Any], environ: Mapping[str, str] | None
) -> tuple[str | None, str | None, str | None]:
    """``username``, ``password_env`` and the password read from that variable, checked; with
    ``environ`` None (the other end's account) the variable is not read and the password is None."""
    username = t.get("username")
    if username is not None and (not isinstance(username, str) or not username):
        raise w.fail("username", "must be a non-empty string")
    password_env = t.get("password_env")
    password: str | None = None
    if password_env is not None:
        if not matches(ENV_NAME, password_env):
            raise w.fail("password_env", "must name an environment variable (A-Z, 0-9, _)")
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


def _options(w: _Where, kind: DeviceKind, t: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, rule in _OPTION_KEYS[kind].items():
        if key not in t:
            continue
        v = t[key]
        if rule == "number":
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1e6:
                raise w.fail(key, "must be a positive number")
        elif rule == "count":
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1000:
                raise w.fail(key, "must be an integer 1-1000")
        elif rule == "backs":
            if (not isinstance(v, list) or len(v) != 2 or len(set(v)) != 2
                    or not all(matches(BACK_COLOUR, x) for x in v)):  # fmt: skip
                raise w.fail(
                    key, "must name the two batches' back colours (a-z, 0-9, '_', '-'), e.g. ['red', 'blue']"
                )
            v = tuple(v)
        elif rule == "ranks":
            if not isinstance(v, list) or not all(x in RANKS for x in v):
                raise w.fail(key, f"must be a list of ranks from {' '.join(RANKS)}")
            v = frozenset(v)
        out[key] = v
    return out
