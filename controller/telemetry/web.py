"""The fleet view as a small web page, for ``tablectl monitor --http HOST:PORT``.

HTTP/1.1 on asyncio streams, standard library only: ``GET /`` is one self-contained page that
polls ``GET /fleet.json`` every second and draws the rows ``FleetView.rows()`` decides, the same
ones the terminal shows; ``GET /healthz`` says ok. One request per connection (``Connection:
close``): the page asks once a second, so keep-alive would save nothing worth its state.

There is no login. The page shows only what the broker already published to every monitor
account, and the server is read-only, but bind it to localhost or behind the ops network's proxy.

Binding to localhost alone does not keep out DNS rebinding: a site whose DNS name starts answering
with this address can read the page from any browser that reaches it (on this machine, or on the
ops network), and same-origin does not stop it, as the name is still the site's own. That browser
does send the site's name as ``Host``, so a ``Host`` that is not an IP literal, ``localhost`` or a
name given with ``--http-allow-host`` gets 421 and nothing else. HTTP/1.0 without a ``Host`` is
still served: no browser sends that, and old scripts and probes might.

Everything a table sends is untrusted text (topic levels and payloads are whatever a publisher
sent): the page has no server-side interpolation at all, its script writes with ``textContent``
only, and ``/fleet.json`` escapes ``<``, ``>`` and ``&`` so it stays inert wherever it is pasted.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import hashlib
import ipaddress
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import structlog

from controller.telemetry.fleet import COLUMNS, FleetView

log = structlog.get_logger("tablectl.monitor.web")

MAX_HEAD = 8 * 1024  # request line and headers together
HEAD_TIMEOUT_S = 10.0  # a client that trickles its request (or never sends one) holds a slot no longer
WRITE_TIMEOUT_S = 10.0
LINGER_S = 2.0
LINGER_MAX = 64 * 1024
MAX_CLIENTS = 64  # a few browsers and a health check; more than this at once is not a browser

_STYLE = """
body { font: 14px/1.35 ui-monospace, Menlo, Consolas, monospace; margin: 1em; color: #111; background: #fff; }
#summary { font-weight: bold; margin-bottom: .5em; }
#stale { color: #fff; background: #b00; font-weight: bold; padding: 0 .4em; }
#stale:empty { display: none; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .15em .6em; border-bottom: 1px solid #ddd; white-space: nowrap; }
th { border-bottom: 2px solid #444; }
td.alarms { white-space: normal; }
tr.halt { background: #fde4e4; }
tr.halt td.alarms { background: #c00; color: #fff; font-weight: bold; }
tr.alarm td.alarms { background: #ffe680; font-weight: bold; }
.st-unknown { color: #888; }
.st-ok { color: #080; }
.st-warn { color: #a60; font-weight: bold; }
.st-bad { color: #fff; background: #c00; font-weight: bold; }
td.gap { color: #c00; font-weight: bold; }
td.nogap { color: #888; }
"""

# Only textContent and element creation: a table name is whatever a publisher sent.
_SCRIPT = """
"use strict";
const COLUMNS = __COLUMNS__;
const rowsEl = document.getElementById("rows");
const summaryEl = document.getElementById("summary");
const staleEl = document.getElementById("stale");
let previous = null;

function draw(doc) {
  const s = doc.summary;
  const now = performance.now();
  let rate = "";
  if (previous !== null && now > previous.t) {
    const perS = Math.max(0, (s.messages - previous.messages) / ((now - previous.t) / 1000));
    rate = " (" + Math.round(perS).toLocaleString("en-US") + "/s)";
  }
  previous = {messages: s.messages, t: now};
  summaryEl.textContent = s.text + rate;
  const fragment = document.createDocumentFragment();
  for (const row of doc.rows) {
    const tr = document.createElement("tr");
    if (row.alarm_level !== "none") tr.className = row.alarm_level;
    for (const key of COLUMNS) {
      const td = document.createElement("td");
      td.textContent = String(row[key]);
      if (key === "status") td.className = "st-" + row.status_level;
      if (key === "alarms") td.className = "alarms";
      if (key === "gaps_text") td.className = row.gaps ? "gap" : "nogap";
      tr.appendChild(td);
    }
    fragment.appendChild(tr);
  }
  rowsEl.replaceChildren(fragment);
}

async function poll() {
  try {
    const response = await fetch("fleet.json", {cache: "no-store"});
    if (!response.ok) throw new Error("HTTP " + response.status);
    draw(await response.json());
    staleEl.textContent = "";
  } catch (e) {
    // Keep the last rows but say they are old: a view that silently froze would look healthy.
    staleEl.textContent = "no answer from the monitor since " + new Date().toLocaleTimeString();
    previous = null;
  } finally {
    setTimeout(poll, 1000);
  }
}
poll();
""".replace("__COLUMNS__", json.dumps([key for _, key in COLUMNS]))


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


# Hashes rather than 'unsafe-inline': only this exact script and style may run, so even a name
# that got past textContent could not bring its own.
CSP = (
    f"default-src 'self'; script-src {_csp_hash(_SCRIPT)}; style-src {_csp_hash(_STYLE)}; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

PAGE = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tablectl fleet</title>
<style>{_STYLE}</style>
</head>
<body>
<div><span id="summary">waiting for the monitor...</span> <span id="stale"></span></div>
<table>
<thead><tr>{"".join(f"<th>{header}</th>" for header, _ in COLUMNS)}</tr></thead>
<tbody id="rows"></tbody>
</table>
<script>{_SCRIPT}</script>
</body>
</html>
""".encode()

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    421: "Misdirected Request",
    503: "Service Unavailable",
}
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_VERSION = re.compile(rb"HTTP/1\.[0-9]\Z")
_TEXT = "text/plain; charset=utf-8"
_PORT = re.compile(r"[0-9]*\Z")  # RFC 9110 4.2.1: port = *DIGIT, so "name:" is a name too
_HOST_SHOWN = 64  # of a refused Host in the log line; the header can be as long as the head


def fleet_json(view: FleetView) -> bytes:
    doc = {
        "version": 1,
        "summary": view.summary().as_json(),
        "rows": [row.as_json() for row in view.rows()],
    }
    text = json.dumps(doc, ensure_ascii=True, separators=(",", ":"))
    # JSON allows these escapes; with them the document cannot close a <script> or open a tag
    # if anyone ever inlines it into HTML.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = _TEXT
    allow: str | None = None

    def encode(self, *, head: bool) -> bytes:
        headers = [
            f"HTTP/1.1 {self.status} {_REASONS[self.status]}",
            f"Date: {email.utils.formatdate(usegmt=True)}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            "Cache-Control: no-store",
            "X-Content-Type-Options: nosniff",
            f"Content-Security-Policy: {CSP}",
            "Referrer-Policy: no-referrer",
            "Connection: close",
        ]
        if self.allow is not None:
            headers.append(f"Allow: {self.allow}")
        # HEAD: the headers GET would send, Content-Length included, and no body (RFC 9110 9.3.2).
        return "\r\n".join(headers).encode() + b"\r\n\r\n" + (b"" if head else self.body)


def _plain(status: int, text: str, *, allow: str | None = None) -> Response:
    return Response(status, (text + "\n").encode(), allow=allow)


class Refused(Exception):
    """A malformed request, answered with ``response``; ``reason`` is for the one log line."""

    def __init__(self, response: Response, reason: str) -> None:
        super().__init__(reason)
        self.response = response
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    host: str | None = None  # the Host header as sent (latin-1), None when there was none


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
        if not bracket or (port and not (port.startswith(":") and _PORT.match(port[1:]))):
            return False
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return False
        return True
    name, _, port = host.partition(":")
    if not _PORT.match(port):
        return False
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        name = host_name(name)
        return name == "localhost" or name in names
    return True


def parse_head(head: bytes) -> Request:
    """The request line and headers (up to and including the blank line); Refused(400) if malformed."""
    lines = head[: -len(b"\r\n\r\n")].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _TOKEN.match(parts[0]) or not _VERSION.match(parts[2]) or not parts[1]:
        raise Refused(_plain(400, "bad request line"), "malformed request line")
    method, target, version = parts
    hosts: list[bytes] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        # No obsolete line folding and no space before the colon (RFC 9112 5.1, 5.2): both are how
        # requests get smuggled past proxies that read them differently.
        if not colon or not _TOKEN.match(name):
            raise Refused(_plain(400, "bad header"), "malformed header")
        if name.lower() == b"host":
            hosts.append(value.strip(b" \t"))
    # Two Hosts are refused in HTTP/1.0 too (RFC 9112 3.2): the Host check needs the one name.
    if len(hosts) > 1 or (version == b"HTTP/1.1" and not hosts):
        raise Refused(_plain(400, "one Host header required"), "Host header missing or repeated")
    try:
        text = target.decode("ascii")
        if not text.isprintable():
            raise ValueError(text)
        split = urlsplit(text)
    except ValueError:
        raise Refused(_plain(400, "bad request target"), "malformed request target") from None
    if not split.path.startswith("/") and text != "*":
        raise Refused(_plain(400, "bad request target"), "malformed request target")
    return Request(method.decode("ascii"), split.path, hosts[0].decode("latin-1") if hosts else None)


_MISDIRECTED = "unknown Host; start the monitor with --http-allow-host NAME"


class FleetPage:
    """Answers requests from one FleetView. ``start()`` binds; ``close()`` stops.

    ``allow_hosts``: names besides IP literals and localhost that the page answers for in ``Host``.
    """

    def __init__(self, view: FleetView, allow_hosts: Iterable[str] = ()) -> None:
        self.view = view
        self.allow_hosts = frozenset(host_name(name) for name in allow_hosts)
        self.server: asyncio.Server | None = None
        self._clients = 0
        self._handlers: set[asyncio.Task[Any]] = set()
        self._json: tuple[tuple[int, str | None], bytes] | None = None  # (its source, /fleet.json)

    async def start(self, host: str, port: int) -> asyncio.Server:
        # limit: readuntil gives up once the head outgrows MAX_HEAD instead of buffering without end.
        self.server = await asyncio.start_server(self._client, host, port, limit=MAX_HEAD)
        return self.server

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None and self.server.sockets
        name = self.server.sockets[0].getsockname()
        return str(name[0]), int(name[1])

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            # From Python 3.12 wait_closed() also waits for open connections, and an idle client
            # would hold the monitor's exit for HEAD_TIMEOUT_S.
            for handler in list(self._handlers):
                handler.cancel()
            await self.server.wait_closed()

    def respond(self, request: Request) -> tuple[Response, str | None]:
        """The response, and why the request was refused (None when it was not)."""
        # First, and for every path: a rebound page must not learn even which paths exist.
        if request.host is not None and not answers_for(request.host, self.allow_hosts):
            shown = ascii(request.host[:_HOST_SHOWN])  # escapes what a terminal would act on
            cut = "..." if len(request.host) > _HOST_SHOWN else ""
            return _plain(421, _MISDIRECTED), f"unknown Host {shown}{cut}"
        if request.method not in ("GET", "HEAD"):
            return _plain(405, "only GET and HEAD", allow="GET, HEAD"), f"method {request.method}"
        if request.path == "/":
            return Response(200, PAGE, "text/html; charset=utf-8"), None
        if request.path == "/fleet.json":
            return Response(200, self._fleet_json(), "application/json"), None
        if request.path == "/healthz":
            if self.view.stopped is not None:  # the page would go on showing a frozen fleet
                return _plain(503, f"fold loop stopped ({self.view.stopped})"), None
            if self.view.broker_problem is not None:  # an empty page would pass for a quiet floor
                return _plain(503, self.view.broker_problem), None
            return _plain(200, "ok"), None
        return _plain(404, "not found"), "not found"

    def _fleet_json(self) -> bytes:
        # Built on the loop that folds the broker's messages (about 12 ms for 500 tables), so not
        # once per request: the view changes only in ingest, which counts every message first, so
        # while the count stands the document does (a quiet fleet, several tabs, HEAD then GET).
        # The broker going out of reach or coming back changes the summary line but no count.
        count = (self.view.messages, self.view.broker_problem)
        if self._json is None or self._json[0] != count:
            self._json = (count, fleet_json(self.view))
        return self._json[1]

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer(writer.get_extra_info("peername"))
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
        self._clients += 1
        try:
            response, head, refused = await self._answer(reader)
            if refused is not None:
                status = response.status if response is not None else None
                log.info("http_refused", peer=peer, status=status, reason=refused)
            if response is not None:
                async with asyncio.timeout(WRITE_TIMEOUT_S):
                    writer.write(response.encode(head=head))
                    await writer.drain()
                await _linger(reader, writer)
        except (ConnectionError, TimeoutError):
            pass  # the client went away or stalled while we wrote: nobody left to answer
        except Exception:
            # Whatever a request does, the server goes on serving the next one.
            log.exception("http_request_failed", peer=peer)
        finally:
            self._clients -= 1
            if handler is not None:
                self._handlers.discard(handler)
            writer.close()
            with contextlib.suppress(ConnectionError, TimeoutError):
                async with asyncio.timeout(WRITE_TIMEOUT_S):
                    await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[Response | None, bool, str | None]:
        """(response or None when nobody is listening, whether it answers a HEAD, why it was refused)."""
        if self._clients > MAX_CLIENTS:
            return _plain(503, "busy"), False, "too many connections"
        try:
            async with asyncio.timeout(HEAD_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return _plain(400, "request head over 8 KiB"), False, "request head over 8 KiB"
        except asyncio.IncompleteReadError as e:
            # A bare connect-and-close (a port check) is not worth a log line; half a request is.
            return None, False, "closed mid-request" if e.partial.strip() else None
        except TimeoutError:
            return None, False, f"no complete request head in {HEAD_TIMEOUT_S:g} s"
        try:
            request = parse_head(head)
        except Refused as refused:
            return refused.response, head.startswith(b"HEAD "), refused.reason
        response, refused_reason = self.respond(request)
        return response, request.method == "HEAD", refused_reason


def _peer(name: object) -> str:
    if isinstance(name, tuple) and len(name) >= 2:
        return f"{name[0]}:{name[1]}"
    return str(name)


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half-close, then read what the client still sends until it closes (briefly, and capped).

    Closing a socket with unread input makes the kernel send a reset, and a reset can destroy
    the response before the client has read it: the 400 to an oversized head would never arrive.
    """
    if not writer.can_write_eof():
        return
    writer.write_eof()
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(LINGER_S):
            for _ in range(LINGER_MAX // 4096):
                if not await reader.read(4096):
                    break


async def serve(view: FleetView, host: str, port: int, *, allow_hosts: Iterable[str] = ()) -> FleetPage:
    """Start the page for ``view`` on host:port (port 0: any free one, see ``FleetPage.address``)."""
    page = FleetPage(view, allow_hosts)
    await page.start(host, port)
    return page
