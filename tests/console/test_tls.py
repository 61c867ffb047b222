"""The console's own TLS (``[console] tls_cert``, ``tls_key``), with a real handshake against a
throwaway certificate made by the ``openssl`` command: https answers with HSTS and a Secure
cookie, plain http on the same port gets nothing, a client that does not trust the certificate
is refused, and a certificate that cannot be used stops ``tablectl run`` in one line (exit 2),
as does a users file that is not there."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from controller.cli import main as tablectl
from controller.console.server import Console
from controller.console.tls import server_context
from controller.errors import ConfigError
from controller.supervisor.rig import table_file, virtual_table
from tests.console.conftest import PASSWORDS, Clock, write_users

OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="needs the openssl command")


def make_cert(where: Path, name: str = "console") -> tuple[Path, Path]:
    cert, key = where / f"{name}.crt", where / f"{name}.key"
    subprocess.run(
        [OPENSSL or "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
async def tls_console(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    cert, key = make_cert(tmp_path)
    users = write_users(tmp_path / "users.toml")
    async with asyncio.timeout(30):
        async with virtual_table(table_file("double-back-jack"), tmp_path / "j.db", seed=5, boxes=2) as rig:
            console = Console(rig.supervisor, users, clock=Clock(), tls=server_context(cert, key))
            host, port = await console.start("127.0.0.1", 0)
            try:
                yield f"https://{host}:{port}", cert
            finally:
                await console.stop()


async def test_https_with_hsts_and_a_secure_cookie(tls_console: tuple[str, Path]) -> None:
    url, cert = tls_console
    trusted = ssl.create_default_context(cafile=str(cert))
    connector = aiohttp.TCPConnector(ssl=trusted)
    async with aiohttp.ClientSession(
        url, connector=connector, cookie_jar=aiohttp.CookieJar(unsafe=True)
    ) as c:
        async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]}) as r:
            assert r.status == 200
            cookie = r.headers["Set-Cookie"]
            assert "Secure" in cookie and "HttpOnly" in cookie
            assert r.headers["Strict-Transport-Security"] == "max-age=31536000"
        async with c.get("/api/display") as r:
            assert r.status == 200 and "Strict-Transport-Security" in r.headers
    host, port = url.removeprefix("https://").split(":")
    _, writer = await asyncio.open_connection(host, int(port), ssl=trusted)
    assert writer.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
    writer.close()


async def test_plain_http_and_an_untrusting_client_get_nothing(tls_console: tuple[str, Path]) -> None:
    url, _ = tls_console
    plain = url.replace("https://", "http://")
    async with aiohttp.ClientSession() as c:
        with pytest.raises(aiohttp.ClientError):
            async with c.get(plain + "/"):
                pass
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with c.get(url + "/"):  # the system's CAs do not know the throwaway certificate
                pass


def test_an_unusable_certificate_is_one_line(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path, "a")
    _, other_key = make_cert(tmp_path, "b")
    with pytest.raises(ConfigError, match="not a certificate and its key"):
        server_context(cert, other_key)
    with pytest.raises(ConfigError, match="no such file"):
        server_context(tmp_path / "missing.crt", key)


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ('[console]\nusers = "misspelled.toml"\n', "misspelled.toml: no such users file"),
        ('[console]\nusers = "users.toml"\ntls_cert = "console.crt"\n', "console.tls_key: needed with"),
        (
            '[console]\nusers = "users.toml"\ntls_cert = "console.crt"\ntls_key = "nope.key"\n',
            "nope.key: no such file",
        ),
    ],
)
def test_run_refuses_a_missing_users_file_or_certificate_in_one_line(
    section: str,
    error: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `run` points the logs at stdout, here pytest's capture, closed after the test: leave them be.
    monkeypatch.setattr("controller.logs.configure", lambda *args, **kwargs: None)
    make_cert(tmp_path)
    write_users(tmp_path / "users.toml")
    src = table_file("double-back-jack")
    config = tmp_path / "t.toml"
    text = src.read_text(encoding="utf-8").replace('game = "', f'game = "{src.parent}/')
    config.write_text(text.replace('profile = "', f'profile = "{src.parent}/') + section, encoding="utf-8")
    assert tablectl(["run", "--config", str(config), "--journal", str(tmp_path / "j.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and error in err[0], err


async def test_tablectl_run_serves_https(tmp_path: Path) -> None:
    """The console's own process, as `tablectl run` starts it, with [console] tls_cert/tls_key."""
    from tests.console.test_run import _ended, _start_run, _stop_run, console_table

    cert, _ = make_cert(tmp_path)
    sim, config = await console_table(tmp_path, more='tls_cert = "console.crt"\ntls_key = "console.key"\n')
    proc = None
    try:
        async with asyncio.timeout(30):
            proc, url = await _start_run(config, tmp_path / "j.db")
            url = url.replace("http://", "https://")
            connector = aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=str(cert)))
            jar = aiohttp.CookieJar(unsafe=True)
            async with aiohttp.ClientSession(url, connector=connector, cookie_jar=jar) as c:
                async with c.post("/api/login", json={"user": "dan", "password": PASSWORDS["dan"]}) as r:
                    assert r.status == 200 and "Secure" in r.headers["Set-Cookie"]
                    assert r.headers["Strict-Transport-Security"] == "max-age=31536000"
                async with c.get("/api/display") as r:
                    assert r.status == 200 and (await r.json())["table"] == "dbj-01"
            await _stop_run(proc)
    finally:
        await _ended(proc, sim)
