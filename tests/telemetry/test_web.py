"""The fleet view's web page over real sockets: the same rows as the terminal, refusals that leave
the server serving, nothing a publisher sends ever becoming markup, no answer to a Host it does not
know (DNS rebinding), and `tablectl monitor --http` end to end against the real broker."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import pathlib
import re
import signal
import socket
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import structlog
from rich.console import Console

from controller.errors import TablectlError
from controller.journal import Journal
from controller.telemetry import monitor, web
from controller.telemetry.fleet import FleetView
from controller.telemetry.monitor import render
from controller.telemetry.web import MAX_HEAD, FleetPage, serve
from tests.telemetry.conftest import GUARD_S, PASSWORD, ROOT, Broker
from tests.telemetry.helpers import append_records, telemetry_for

HALTING = {
    "version": 1,
    "count": 1,
    "alarms": [
        {
            "id": 3,
            "section": "665a.13(i)",
            "message": "reader failed",
            "floor_action": "replace the reader",
            "halts_dealing": True,
        }
    ],
}
ADVISORY = {
    "version": 1,
    "count": 1,
    "alarms": [
        {
            "id": 1,
            "section": "665a.3(c)",
            "message": "decks expire",
            "floor_action": "open new decks",
            "halts_dealing": False,
        }
    ],
}
# Topic levels reach the view unchecked (parse_topic splits, it does not validate: check_level binds
# only our own publishers), so a name can carry markup for HTML and for rich alike. No '/': that
# would end the level.
HOSTILE = "<script>alert(1)<!--[blink]:smile:&amp;"
# A game is payload text, so it may hold a '/' too, and with it rich's closing-tag form.
HOSTILE_GAME = "</script><img src=x onerror=alert(2)>[/y]"


def _fleet() -> FleetView:
    """One table of every kind the view orders: halting, advisory, gaps, lost, offline, quiet, hostile."""
    view = FleetView()

    def put(table: str, leaf: str, doc: dict[str, Any]) -> None:
        view.ingest(f"tablectl/floor/{table}/{leaf}", json.dumps(doc).encode())

    put("quiet", "status", {"version": 1, "online": True, "game": "down-under"})
    snapshot = {"round": 41, "batch_in_shoe": "red", "cards_in_shoe": 212, "cover_card_reached": True}
    devices = {"shoe": "online", "reader": "online"}
    put("quiet", "state", {"version": 1, "game": "down-under", "devices": devices, "snapshot": snapshot})
    put("lost", "status", {"version": 1, "online": False, "clean": False})
    put("stopped", "status", {"version": 1, "online": False, "clean": True})
    for seq in (5, 6, 9, 12):
        put("gappy", "events", {"version": 1, "seq": seq, "kind": "round_started"})
    put("zz-halted", "alarms", HALTING)
    put("advisory", "alarms", ADVISORY)
    put("advisory", "devices/shuffler", {"version": 1, "device": "shuffler", "health": "jammed"})
    put(HOSTILE, "status", {"version": 1, "online": True, "game": HOSTILE_GAME})
    return view


@pytest.fixture
async def page() -> AsyncIterator[tuple[FleetView, int]]:
    view = _fleet()
    server = await serve(view, "127.0.0.1", 0)
    try:
        yield view, server.address[1]
    finally:
        await server.close()


class Reply:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        self.status = int(lines[0].split(" ")[1])
        self.headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}

    def json(self) -> dict[str, Any]:
        doc = json.loads(self.body)
        assert isinstance(doc, dict)
        return doc


async def exchange(port: int, raw: bytes) -> Reply:
    """Send ``raw`` on a new connection and read until the server closes it."""
    async with asyncio.timeout(GUARD_S):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(raw)
            await writer.drain()
            return Reply(await reader.read())
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def get(port: int, path: str, method: str = "GET", host: str | None = None) -> Reply:
    host = f"127.0.0.1:{port}" if host is None else host
    return await exchange(port, f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())


def _sha256(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


async def test_rows_come_alarms_first_in_fleet_view_order(page: tuple[FleetView, int]) -> None:
    view, port = page
    reply = await get(port, "/fleet.json")
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["cache-control"] == "no-store"
    assert reply.headers["x-content-type-options"] == "nosniff"
    assert int(reply.headers["content-length"]) == len(reply.body)
    doc = reply.json()
    assert doc["version"] == 1
    # One site: the table's name alone identifies it (the site is in "site" still).
    assert [r["name"] for r in doc["rows"]] == [t.table for t in view.ordered()]
    assert doc["rows"] == [r.as_json() for r in view.rows()]
    names = [r["table"] for r in doc["rows"]]
    assert names[:3] == ["zz-halted", "advisory", "gappy"] and names[3:5] == ["lost", "stopped"]
    by_name = {r["table"]: r for r in doc["rows"]}
    assert by_name["zz-halted"]["alarm_level"] == "halt" and by_name["advisory"]["alarm_level"] == "alarm"
    # What happened, not only the section and the action (issue 37).
    assert by_name["zz-halted"]["alarms"] == "665a.13(i): reader failed -> replace the reader"
    assert by_name["gappy"]["gaps_text"] == "2 (4 missing)" and by_name["gappy"]["seq"] == 12
    assert (by_name["lost"]["status"], by_name["lost"]["status_level"]) == ("LOST", "bad")
    assert (by_name["stopped"]["status"], by_name["stopped"]["status_level"]) == ("offline", "warn")
    assert by_name["quiet"]["shoe"] == "red 212 left cover" and by_name["quiet"]["round"] == "41"
    assert by_name["advisory"]["devices"] == "shuffler=jammed"
    summary = doc["summary"]
    assert summary == view.summary().as_json()
    counts = (summary["tables"], summary["online"], summary["with_alarms"], summary["stream_gaps"])
    assert counts == (7, 2, 2, 2)
    assert summary["text"].startswith("7 tables, 2 online, 2 with alarms, 2 stream gaps; ")


async def test_the_json_follows_every_message(page: tuple[FleetView, int]) -> None:
    """The document is kept between requests while no message came; the next message shows."""
    view, port = page
    before = (await get(port, "/fleet.json")).body
    assert (await get(port, "/fleet.json")).body == before
    view.ingest("tablectl/floor/late/status", json.dumps({"version": 1, "online": True}).encode())
    after = (await get(port, "/fleet.json")).json()
    assert "late" in [row["name"] for row in after["rows"]]


async def test_a_standard_client_reads_the_json(page: tuple[FleetView, int]) -> None:
    _, port = page

    def fetch() -> tuple[int, bytes]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/fleet.json", timeout=GUARD_S) as r:
            return r.status, r.read()

    status, body = await asyncio.to_thread(fetch)
    assert status == 200 and json.loads(body)["version"] == 1


async def test_the_terminal_shows_the_rows_the_page_shows(page: tuple[FleetView, int]) -> None:
    view, port = page
    rows = (await get(port, "/fleet.json")).json()["rows"]
    console = Console(record=True, width=400)
    console.print(render(view, rows=len(rows)))  # a markup-looking name must not raise
    lines = console.export_text().splitlines()
    drawn = [line for line in lines if line.startswith("│")]
    assert len(drawn) == len(rows)
    for line, row in zip(drawn, rows, strict=True):
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        expected = [row[k] for k in ("name", "status", "game", "round", "shoe", "alarms", "devices")]
        assert cells == [*expected, str(row["seq"]), row["gaps_text"]]


async def test_a_hostile_table_name_never_becomes_markup(page: tuple[FleetView, int]) -> None:
    view, port = page
    assert ("floor", HOSTILE) in view.tables  # the view takes any topic level, so this can happen
    reply = await get(port, "/fleet.json")
    for raw in (b"<", b">", b"&"):
        assert raw not in reply.body  # escaped, so the JSON stays inert even if pasted into HTML
    assert any(r["table"] == HOSTILE for r in reply.json()["rows"])  # and still says what was sent

    html = (await get(port, "/")).body.decode()
    # The page is constant: no row text is ever in it, and its script only writes with textContent.
    assert "alert(" not in html
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
        assert sink not in html
    assert html.count("<script>") == 1 and "textContent" in html


async def test_the_page_is_self_contained_under_a_strict_policy(page: tuple[FleetView, int]) -> None:
    _, port = page
    reply = await get(port, "/")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/html; charset=utf-8"
    assert reply.headers["cache-control"] == "no-store"
    assert reply.headers["x-content-type-options"] == "nosniff"
    html = reply.body.decode()
    assert not re.search(r"(src|href)\s*=|https?://|@import", html)  # no external asset, no CDN
    csp = {d.split()[0]: d.split()[1:] for d in reply.headers["content-security-policy"].split("; ")}
    assert csp["default-src"] == ["'self'"]
    script = html.split("<script>")[1].split("</script>")[0]
    style = html.split("<style>")[1].split("</style>")[0]
    assert csp["script-src"] == [_sha256(script)] and csp["style-src"] == [_sha256(style)]
    assert "'unsafe-inline'" not in reply.headers["content-security-policy"]
    assert "fleet.json" in script and "setTimeout(poll, 1000)" in script


async def test_healthz(page: tuple[FleetView, int]) -> None:
    _, port = page
    reply = await get(port, "/healthz")
    assert (reply.status, reply.body) == (200, b"ok\n")
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"


async def test_healthz_is_not_ok_once_the_fold_loop_has_stopped(page: tuple[FleetView, int]) -> None:
    view, port = page
    view.stopped = "RecursionError"  # what consume() records when its loop ends
    reply = await get(port, "/healthz")
    assert (reply.status, reply.body) == (503, b"fold loop stopped (RecursionError)\n")


@pytest.mark.parametrize("path", ["/", "/fleet.json", "/healthz", "/nowhere"])
async def test_head_has_the_headers_of_get_and_no_body(page: tuple[FleetView, int], path: str) -> None:
    _, port = page
    got, head = await get(port, path), await get(port, path, "HEAD")
    assert head.status == got.status and head.body == b""
    assert head.headers["content-length"] == got.headers["content-length"] == str(len(got.body))
    assert head.headers["content-type"] == got.headers["content-type"]


REFUSED = [
    pytest.param(b"GET /nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, id="unknown-path"),
    pytest.param(b"GET /fleet.json/../x HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, id="dot-dot"),
    pytest.param(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc", 405, id="post"),
    pytest.param(b"DELETE /fleet.json HTTP/1.1\r\nHost: localhost\r\n\r\n", 405, id="delete"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", 421, id="unknown-host"),
    pytest.param(b"GARBAGE\r\n\r\n", 400, id="no-request-line"),
    pytest.param(b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400, id="version"),
    pytest.param(b"GET / HTTP/1.1\r\nHost x\r\n\r\n", 400, id="header-without-colon"),
    pytest.param(b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, id="space-before-colon"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, id="obsolete-folding"),
    pytest.param(b"GET / HTTP/1.1\r\n\r\n", 400, id="no-host"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n", 400, id="two-hosts"),
    pytest.param(b"GET / HTTP/1.0\r\nHost: localhost\r\nHost: evil.example\r\n\r\n", 400, id="two-hosts-1.0"),
    pytest.param(b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", 400, id="non-ascii-target"),
    pytest.param(b"GET x HTTP/1.1\r\nHost: x\r\n\r\n", 400, id="relative-target"),
    pytest.param(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, id="tls-hello"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (MAX_HEAD + 1) + b"\r\n\r\n", 400, id="8k"),
]


@pytest.mark.parametrize(("raw", "status"), REFUSED)
async def test_a_refused_request_leaves_the_server_serving(
    page: tuple[FleetView, int], raw: bytes, status: int
) -> None:
    _, port = page
    with structlog.testing.capture_logs() as logs:
        reply = await exchange(port, raw)
        assert reply.status == status
        # exchange() read to the end, so the server closed the connection. aiohttp's parser answers
        # what it refuses itself as HTTP/1.0, where closing is the default and goes unsaid.
        assert reply.headers.get("connection") == "close" or reply.status_line.startswith("HTTP/1.0 400 ")
        if status == 405:
            assert reply.headers["allow"] == "GET, HEAD"
        assert [e["event"] for e in logs] == ["http_refused"]  # one line, no traceback
    assert (await get(port, "/healthz")).status == 200  # a new connection is served as before


MISDIRECTED = b"unknown Host; start the monitor with --http-allow-host NAME\n"


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST"])
@pytest.mark.parametrize("path", ["/", "/fleet.json", "/healthz", "/nowhere"])
async def test_a_host_the_page_does_not_answer_for_gets_421_on_every_path(
    page: tuple[FleetView, int], path: str, method: str
) -> None:
    _, port = page
    with structlog.testing.capture_logs() as logs:
        reply = await get(port, path, method, host=f"rebound.evil.example:{port}")
        # Before the method and the path: a rebound page learns nothing, not even which paths exist.
        assert reply.status == 421
        assert reply.body == (b"" if method == "HEAD" else MISDIRECTED)
        assert int(reply.headers["content-length"]) == len(MISDIRECTED)
        assert [(e["event"], e["status"]) for e in logs] == [("http_refused", 421)]
        assert "rebound.evil.example" in logs[0]["reason"]
    assert (await get(port, "/healthz")).status == 200  # and it goes on serving


# Each form a browser sends when it was navigated to this address itself, and a look-alike name
# that only a DNS server (the attacker's) could make point here.
LITERALS = [
    pytest.param("localhost:{port}", "localhost.evil.example:{port}", id="localhost"),
    pytest.param("LOCALHOST", "evil-localhost", id="LOCALHOST"),
    pytest.param("LocalHost.:{port}", "localhost.evil.example.:{port}", id="localhost-dot"),
    pytest.param("127.0.0.1:{port}", "127.0.0.1.evil.example:{port}", id="ipv4"),
    pytest.param("10.1.2.3", "10.1.2.3.nip.io", id="ipv4-no-port"),
    pytest.param("[::1]:{port}", "[::1].evil.example:{port}", id="ipv6"),
    pytest.param("[::1]", "::1", id="ipv6-no-port"),
    pytest.param("127.0.0.1:", "127.0.0.1:80:80", id="empty-port"),
]


@pytest.mark.parametrize(("good", "look_alike"), LITERALS)
async def test_ip_literals_and_localhost_need_no_option(
    page: tuple[FleetView, int], good: str, look_alike: str
) -> None:
    _, port = page
    assert (await get(port, "/fleet.json", host=good.format(port=port))).status == 200
    assert (await get(port, "/fleet.json", host=look_alike.format(port=port))).status == 421


async def test_an_allowed_name_is_answered_only_when_given(page: tuple[FleetView, int]) -> None:
    _, default_port = page
    hosts = ["ops-proxy.example", "OPS-Proxy.Example", "ops-proxy.example.", "Ops-Proxy.Example.:{port}"]
    for host in hosts:
        assert (await get(default_port, "/", host=host.format(port=default_port))).status == 421
    allowing = await serve(FleetView(), "127.0.0.1", 0, allow_hosts=["Ops-Proxy.EXAMPLE", "fleet.example."])
    port = allowing.address[1]
    try:
        for host in [*hosts, "fleet.example", "FLEET.example.:{port}"]:
            assert (await get(port, "/", host=host.format(port=port))).status == 200, host
        for host in ("evil.example", "proxy.example", "ops-proxy.example.evil.example", "example"):
            assert (await get(port, "/", host=host)).status == 421, host
    finally:
        await allowing.close()


async def test_http_1_0_without_host_is_still_served(page: tuple[FleetView, int]) -> None:
    _, port = page
    assert (await exchange(port, b"GET /healthz HTTP/1.0\r\n\r\n")).status == 200  # scripts, probes
    # But when it does name a host, that is checked: nothing sets the version but the client.
    assert (await exchange(port, b"GET /healthz HTTP/1.0\r\nHost: evil.example\r\n\r\n")).status == 421


async def test_a_hostile_host_cannot_write_into_the_log(page: tuple[FleetView, int]) -> None:
    _, port = page
    # ESC clears a terminal, BEL rings it, a bare LF would start a forged log line: aiohttp's parser
    # refuses control characters in a header, and says so in one line of its own words.
    control = b"evil\x1b[2J\x07\x00\x7f\nlevel=error event=forged"
    # 0x85 (NEL to some terminals) is obs-text, which HTTP lets through: the Host check sees it.
    long = b"evil\x85 level=error event=forged " + b"A" * 4000
    for hostile, status in ((control, 400), (long, 421)):
        with structlog.testing.capture_logs() as logs:
            reply = await exchange(port, b"GET / HTTP/1.1\r\nHost: " + hostile + b"\r\n\r\n")
            assert reply.status == status
            assert [e["event"] for e in logs] == ["http_refused"]
        reason = logs[0]["reason"]
        assert reason.isascii() and reason.isprintable()  # escaped, so no control character survives
        assert "forged" not in reason or reason.startswith("unknown Host 'evil\\udc85 level=error")
        assert len(reason) < 200
        assert (await get(port, "/healthz")).status == 200
    assert reason.endswith("...")  # the long one, cut


async def test_a_client_that_leaves_mid_request_is_dropped_quietly(page: tuple[FleetView, int]) -> None:
    _, port = page
    for raw in (b"", b"GET / HTTP/1.1\r\nHost: x\r\n"):
        async with asyncio.timeout(GUARD_S):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(raw)
            writer.write_eof()
            assert await reader.read() == b""  # nobody to answer: closed without a response
            writer.close()
        assert (await get(port, "/healthz")).status == 200


async def test_a_client_that_never_completes_its_head_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web, "HEAD_TIMEOUT_S", 0.2)  # the limit itself; GUARD_S only bounds the test
    page = await serve(FleetView(), "127.0.0.1", 0)
    try:
        for raw in (b"", b"GET / HTTP/1.1\r\nHost: localhost\r\n"):  # silent, and a trickler
            async with asyncio.timeout(GUARD_S):
                reader, writer = await asyncio.open_connection("127.0.0.1", page.address[1])
                writer.write(raw)
                assert await reader.read() == b""  # closed by the server, without an answer
                writer.close()
        assert (await get(page.address[1], "/healthz")).status == 200
    finally:
        await page.close()


class WatchedPage(FleetPage):
    """The server, telling the test when a connection has been taken and when it has been let go."""

    def __init__(self, view: FleetView) -> None:
        super().__init__(view)
        self.taken, self.gone = asyncio.Event(), asyncio.Event()

    def _connection_changed(self, change: int) -> None:
        super()._connection_changed(change)
        (self.taken if change > 0 else self.gone).set()


async def test_past_the_connection_cap_the_answer_is_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web, "MAX_CLIENTS", 1)
    page = WatchedPage(FleetView())
    await page.start("127.0.0.1", 0)
    port = page.address[1]
    try:
        async with asyncio.timeout(GUARD_S):
            _, idle = await asyncio.open_connection("127.0.0.1", port)
            await page.taken.wait()
        page.gone.clear()
        assert (await get(port, "/healthz")).status == 503
        async with asyncio.timeout(GUARD_S):
            await page.gone.wait()  # the refused one
            page.gone.clear()
            idle.close()
            await page.gone.wait()  # the idle one: the slot is free again
        assert (await get(port, "/healthz")).status == 200
    finally:
        await page.close()


def test_http_address_parsing() -> None:
    assert monitor.parse_http("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert monitor.parse_http("[::1]:0") == ("::1", 0)
    for bad in (":8080", "8080", "localhost:", "localhost:http", "127.0.0.1:65536"):
        with pytest.raises(TablectlError):
            monitor.parse_http(bad)


def test_allowed_host_names_are_checked() -> None:
    for good in ("ops-proxy.example", "Ops-Proxy.Example.", "monitor-01", "xn--bcher-kva.example"):
        assert monitor.parse_allow_host(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ".",
        "ops proxy",
        "proxy:8080",
        "http://proxy/",
        "[::1]",
        "a..b",
        ".a",
        "bücher.example",
        "under_score.example",
        "x" * 64 + ".example",
        "evil\nmonitor: forged",
    ],
)
def test_a_bad_allowed_host_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    argv = ["--broker", "mqtt://127.0.0.1:1", "--http", "127.0.0.1:0", "--http-allow-host", "ok.example"]
    assert monitor.main([*argv, "--http-allow-host", bad, "--no-terminal"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"monitor: --http-allow-host {bad!r}: expected a host name")
    assert err.count("\n") == 1


def test_http_allow_host_without_http_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert monitor.main(["--broker", "mqtt://127.0.0.1:1", "--http-allow-host", "ops-proxy.example"]) == 2
    err = capsys.readouterr().err
    assert "--http-allow-host needs --http" in err and err.count("\n") == 1


def test_no_terminal_without_http_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert monitor.main(["--broker", "mqtt://127.0.0.1:1", "--no-terminal"]) == 2
    assert "--no-terminal needs --http" in capsys.readouterr().err


def test_an_address_in_use_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["--broker", "mqtt://127.0.0.1:1", "--http", f"127.0.0.1:{port}", "--no-terminal"]
        assert monitor.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"monitor: --http 127.0.0.1:{port}: ") and err.count("\n") == 1


async def _poll(port: int, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """/fleet.json until ``until`` holds; the pause only paces the polling, the guard bounds it."""
    async with asyncio.timeout(GUARD_S):
        while True:
            doc = (await get(port, "/fleet.json")).json()
            if until(doc):
                return doc
            await asyncio.sleep(0.05)


def _row(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((r for r in doc["rows"] if r["name"] == name), None)


async def test_tablectl_monitor_serves_the_page(broker: Broker, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "j.db"
    writer = Journal.open(path)
    append_records(writer, 10)
    telemetry = telemetry_for(broker, path)
    env = {
        **os.environ,
        "TABLECTL_MQTT_USERNAME": "monitor-ops",
        "TABLECTL_MQTT_PASSWORD": PASSWORD["monitor-ops"],
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "monitor",
        "--broker",
        f"mqtts://127.0.0.1:{broker.port}",
        "--ca-file",
        str(broker.pki / "ca.crt"),
        "--http",
        "127.0.0.1:0",
        "--no-terminal",
        "--http-allow-host",
        "fleet.ops.example",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    # No --duration: the monitor serves until the Ctrl-C below. A duration is a race with this test
    # (on a loaded machine the monitor's start-up and the polls below took longer than it, and the
    # monitor had left by the time it was asked or told to stop); the finally bounds the process.
    assert proc.stderr is not None
    try:
        await telemetry.start()
        async with asyncio.timeout(GUARD_S):
            # Port 0: the monitor says which port it got, so no free-port guess can race another test.
            announced = await proc.stderr.readline()
        match = re.search(rb"http://127\.0\.0\.1:(\d+)/", announced)
        assert match, announced
        port = int(match.group(1))
        # The retained birth shows the table: the monitor is subscribed, so what follows reaches it.
        await _poll(port, lambda doc: (r := _row(doc, "t1")) is not None and r["status"] == "online")
        last = append_records(writer, 7, start_at=1_900_000_000.0)
        telemetry.journal_appended()
        doc = await _poll(port, lambda doc: (r := _row(doc, "t1")) is not None and r["seq"] == last)
        row = _row(doc, "t1")
        assert row is not None and row["status"] == "online" and row["game"] == "double-attack"
        assert row["gaps"] == 0 and doc["summary"]["online"] >= 1
        page = await get(port, "/")
        assert page.status == 200 and b"fleet.json" in page.body
        # The names given on the command line reach the page, and only those.
        assert (await get(port, "/", host=f"Fleet.Ops.Example.:{port}")).status == 200
        assert (await get(port, "/", host=f"other.ops.example:{port}")).status == 421
    finally:
        await telemetry.stop()
        writer.close()
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        try:
            async with asyncio.timeout(GUARD_S):
                _, err = await proc.communicate()
        except TimeoutError:
            proc.kill()  # a monitor that ignores Ctrl-C must not outlive the test
            await proc.wait()
            raise
    assert proc.returncode == 130, err.decode()  # Ctrl-C: the monitor's own exit status for it
