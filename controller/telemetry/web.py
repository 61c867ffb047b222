"""The fleet view as a small web page, for ``tablectl monitor --http HOST:PORT``.

Served by aiohttp's low-level server (the same library as the table console): ``GET /`` is one
self-contained page that polls ``GET /fleet.json`` every second and draws the rows
``FleetView.rows()`` decides, the same ones the terminal shows; ``GET /healthz`` says ok. One
request per connection (``Connection: close``): the page asks once a second, so keep-alive would
save nothing worth an idle connection held open. Three paths and no body need no router: one
handler answers from ``FleetPage.respond``.

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
Every refused request is one ``http_refused`` log line, whether aiohttp's parser refused it (a
malformed head: 400) or this module did; never a traceback.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from controller.addresses import answers_for, host_name
from controller.telemetry.fleet import COLUMNS, FleetView

log = structlog.get_logger("tablectl.monitor.web")

MAX_HEAD = 8 * 1024  # the request line, and each header line
MAX_HEADERS = 32  # a browser sends about a dozen; with MAX_HEAD, what one head can cost in memory
HEAD_TIMEOUT_S = 10.0  # a client that trickles its request (or never sends one) holds a slot no longer
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

function draw(doc) {
  summaryEl.textContent = doc.summary.text;
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

_TEXT = "text/plain; charset=utf-8"
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

    def to_web(self) -> web.Response:
        headers = {
            "Content-Type": self.content_type,
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": CSP,
            "Referrer-Policy": "no-referrer",
            # aiohttp says close itself for HTTP/1.1 only; HTTP/1.0 clients are told too.
            "Connection": "close",
        }
        if self.allow is not None:
            headers["Allow"] = self.allow
        # HEAD: aiohttp sends the headers GET would, Content-Length included, and no body.
        response = web.Response(status=self.status, body=self.body, headers=headers)
        response.force_close()
        return response


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
    host: str | None = None  # the Host header as sent, None when there was none


def read_request(request: web.BaseRequest) -> Request:
    """What ``respond`` needs of a request aiohttp parsed; Refused(400) for what its parser lets
    through and we do not: another HTTP version, a target that is not a path, no or two Hosts."""
    if request.version.major != 1:
        raise Refused(_plain(400, "bad request line"), f"HTTP version {request.version.major}")
    target = request.raw_path
    if not target.startswith("/") or not (target.isascii() and target.isprintable()):
        raise Refused(_plain(400, "bad request target"), "malformed request target")
    hosts = request.headers.getall("Host", [])
    # Two Hosts are refused in HTTP/1.0 too (RFC 9112 3.2): the Host check needs the one name.
    if len(hosts) > 1 or (request.version.minor >= 1 and not hosts):
        raise Refused(_plain(400, "one Host header required"), "Host header missing or repeated")
    return Request(request.method, request.path, hosts[0] if hosts else None)


_MISDIRECTED = "unknown Host; start the monitor with --http-allow-host NAME"


class _ParserRefusals(logging.Logger):
    """aiohttp reports a request its parser refused (400) through its server logger, with a
    traceback. Given as that logger, this turns each into the one ``http_refused`` line."""

    def __init__(self) -> None:
        super().__init__("tablectl.monitor.web.parser")

    def _refused(self, args: tuple[object, ...], exc: object) -> None:
        peer = str(args[0]) if args else "?"  # ("Error handling request from %s", request.remote)
        if isinstance(exc, HttpProcessingError):
            # The first line only: the rest quotes the request's bytes.
            first = (exc.message or type(exc).__name__).splitlines()[0][:200]
            reason = first.encode("ascii", "backslashreplace").decode("ascii")
            log.info("http_refused", peer=peer, status=400, reason=reason)
        else:  # not a refusal: the server itself failed (our handler catches its own errors)
            log.error("http_request_failed", peer=peer, error=type(exc).__name__)

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kw: Any) -> None:
        self._refused(args, exc_info)

    def debug(self, msg: object, *args: object, exc_info: Any = None, **kw: Any) -> None:
        # aiohttp logs at debug a first request that is not HTTP at all (TLS to a plain port).
        if exc_info is not None:
            self._refused(args, exc_info)


class _Server(web.Server):
    """aiohttp's low-level server, telling the page when a connection opens and closes."""

    def __init__(self, page: FleetPage, **kwargs: Any) -> None:
        super().__init__(page._handle, **kwargs)
        self._page = page

    def connection_made(self, handler: RequestHandler, transport: Any) -> None:
        super().connection_made(handler, transport)
        self._page._connection_changed(+1)

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        self._page._connection_changed(-1)


class FleetPage:
    """Answers requests from one FleetView. ``start()`` binds; ``close()`` stops.

    ``allow_hosts``: names besides IP literals and localhost that the page answers for in ``Host``.
    """

    def __init__(self, view: FleetView, allow_hosts: Iterable[str] = ()) -> None:
        self.view = view
        self.allow_hosts = frozenset(host_name(name) for name in allow_hosts)
        self._runner: web.ServerRunner | None = None
        self._address: tuple[str, int] | None = None
        self._clients = 0  # open connections
        self._json: tuple[tuple[int, str | None, float], bytes] | None = None  # (its source, /fleet.json)

    async def start(self, host: str, port: int) -> tuple[str, int]:
        server = _Server(
            self,
            access_log=None,
            logger=_ParserRefusals(),
            # From the connection's start too: a client that sends no complete head in this time
            # (or nothing at all) is closed, so a trickler holds a slot no longer.
            keepalive_timeout=HEAD_TIMEOUT_S,
            max_line_size=MAX_HEAD,
            max_field_size=MAX_HEAD,
            max_headers=MAX_HEADERS,
        )
        runner = web.ServerRunner(server, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        name = runner.addresses[0]
        self._address = (str(name[0]), int(name[1]))
        return self._address

    @property
    def address(self) -> tuple[str, int]:
        assert self._address is not None
        return self._address

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def _connection_changed(self, change: int) -> None:
        self._clients += change

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
        # The rate is sampled by the monitor's ticker, not by a request (many tabs would each move it).
        count = (self.view.messages, self.view.broker_problem, self.view.rate_per_s)
        if self._json is None or self._json[0] != count:
            self._json = (count, fleet_json(self.view))
        return self._json[1]

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        refused: str | None
        try:
            if self._clients > MAX_CLIENTS:
                response, refused = _plain(503, "busy"), "too many connections"
            else:
                response, refused = self.respond(read_request(request))
        except Refused as e:
            response, refused = e.response, e.reason
        except Exception:
            # Whatever a request does, the server goes on serving the next one.
            log.exception("http_request_failed", peer=request.remote)
            response, refused = _plain(500, "internal error"), None
        if refused is not None:
            log.info("http_refused", peer=request.remote, status=response.status, reason=refused)
        return response.to_web()


async def serve(view: FleetView, host: str, port: int, *, allow_hosts: Iterable[str] = ()) -> FleetPage:
    """Start the page for ``view`` on host:port (port 0: any free one, see ``FleetPage.address``)."""
    page = FleetPage(view, allow_hosts)
    await page.start(host, port)
    return page
