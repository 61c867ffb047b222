"""What the tests' real-mosquitto fixtures are built from: a free port, a CA and a server
certificate made with the openssl CLI, the TLS listener's config, and starting and stopping a
broker. Nothing here sleeps to synchronise: a broker is ready when its log says so."""

from __future__ import annotations

import getpass
import pathlib
import shutil
import signal
import subprocess
from collections.abc import Iterator
from typing import Protocol, TypeVar

import pytest

from controller.appliance.demo import wait_running


def mosquitto_binary() -> str:
    """The installed mosquitto; skips the test when there is none."""
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not pathlib.Path(binary).exists():
        pytest.skip("mosquitto is not installed")
    return binary


def openssl(*args: str, cwd: pathlib.Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: pathlib.Path, name: str, subject: str) -> None:
    """``<name>.key`` and the self-signed ``<name>.crt`` in ``d``."""
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-subj",
        subject,
        cwd=d,
    )


def make_server_cert(d: pathlib.Path) -> None:
    """``server.key`` and ``server.crt`` for 127.0.0.1/localhost, signed by ``ca`` in ``d``."""
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="utf-8")
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        cwd=d,
    )


def make_pki(factory: pytest.TempPathFactory, *other_cas: str) -> pathlib.Path:
    """A directory with a CA (``ca``) and the server certificate it signed for 127.0.0.1 and
    localhost, plus CAs that signed nothing (``other_cas``) for tests of the wrong trust."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = factory.mktemp("pki")
    for ca in ("ca", *other_cas):
        make_ca(d, ca, f"/CN=tablectl test {ca}")
    make_server_cert(d)
    return d


SHIPPED = pathlib.Path(__file__).resolve().parents[1] / "config" / "mosquitto"
DYNSEC_PLUGIN = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"


def dynsec_accounts(password_file: pathlib.Path) -> pathlib.Path:
    """The dynamic-security account file the shipped dynsec-accounts.sh writes from
    ``password_file`` (next to it), as the shipped mosquitto.conf loads it."""
    if not pathlib.Path(DYNSEC_PLUGIN).exists():
        pytest.skip("mosquitto's dynamic-security plugin is not installed")
    out = password_file.with_name("dynsec.json")
    subprocess.run(
        [str(SHIPPED / "dynsec-accounts.sh"), str(password_file), str(out)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return out


def tls_conf(
    *, port: int, pki: pathlib.Path, password_file: pathlib.Path, acl_file: pathlib.Path, extra: str
) -> str:
    """A TLS listener on 127.0.0.1 with no anonymous access, the accounts of ``password_file``
    through the dynamic-security plugin and an ACL, as config/mosquitto/mosquitto.conf has them;
    logs on stderr (which ``start`` waits on). ``extra``: more lines (persistence and the like),
    each ending in a newline."""
    return f"""per_listener_settings false
allow_anonymous false
plugin {DYNSEC_PLUGIN}
plugin_opt_config_file {dynsec_accounts(password_file)}
acl_file {acl_file}
listener {port} 127.0.0.1
cafile {pki / "ca.crt"}
certfile {pki / "server.crt"}
keyfile {pki / "server.key"}
{extra}log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
user {getpass.getuser()}
"""


def _replace(text: str, old: str, new: str) -> str:
    if old not in text:  # the shipped file changed: what runs it must follow, never drift from it
        raise AssertionError(f"config/mosquitto/mosquitto.conf no longer has {old!r}")
    return text.replace(old, new)


def shipped_conf(
    *, port: int, pki: pathlib.Path, dynsec_file: pathlib.Path, acl_file: pathlib.Path, data: pathlib.Path
) -> str:
    """config/mosquitto/mosquitto.conf as shipped, only its port (on 127.0.0.1), paths and log
    destination replaced: logs on stderr with its information lines (``start`` waits for one),
    run as this user."""
    text = (SHIPPED / "mosquitto.conf").read_text(encoding="utf-8")
    text = _replace(
        text,
        "plugin_opt_config_file /etc/mosquitto/tablectl-dynsec.json",
        f"plugin_opt_config_file {dynsec_file}",
    )
    text = _replace(text, "acl_file /etc/mosquitto/tablectl.acl", f"acl_file {acl_file}")
    text = _replace(text, "\nlistener 8883\n", f"\nlistener {port} 127.0.0.1\n")
    text = _replace(text, "/etc/mosquitto/certs/", f"{pki}/")
    text = _replace(text, "persistence_location /var/lib/mosquitto/", f"persistence_location {data}/")
    # "running" is an information line, which ``start`` waits for.
    return _replace(
        text, "log_dest syslog", f"log_dest stderr\nlog_type information\nuser {getpass.getuser()}"
    )


# Every broker start() launched, for kill_all(): a test that fails between a start and its stop
# must not leave a broker running after the session.
_STARTED: list[subprocess.Popen[bytes]] = []


def start(conf: pathlib.Path, *, ready_within_s: float) -> subprocess.Popen[bytes]:
    """mosquitto with ``conf``, once its log says it is running (skips when not installed)."""
    proc = subprocess.Popen(
        [mosquitto_binary(), "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _STARTED.append(proc)
    try:
        wait_running(proc, ready_within_s)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def stop(proc: subprocess.Popen[bytes] | None, *, within_s: float) -> None:
    """SIGTERM (mosquitto saves its persistence file and exits); SIGKILL if it has not in time."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kill_all() -> None:
    """For the session's teardown (tests/conftest.py): no broker a test started outlives it,
    whatever happened to the test."""
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class ManagedBroker(Protocol):
    """What each test module's broker class offers: a directory to live in, its config written by
    ``prepare``, and ``start``/``stop`` of the process."""

    dir: pathlib.Path

    def prepare(self) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...


B = TypeVar("B", bound=ManagedBroker)


def serving(broker: B) -> Iterator[B]:
    """For a fixture to ``yield from``: the broker made, started and, whatever the test did, stopped."""
    broker.dir.mkdir()
    broker.prepare()
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
