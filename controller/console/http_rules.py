"""What every handler of the console shares: the one-line JSON error, a JSON body read under
bounds (at most ``MAX_BODY`` bytes, within ``BODY_S``), and the check that a request comes from
the console's own origin."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from controller.bounded import InputRefused, load_json

MAX_BODY = 8 * 1024
BODY_S = 10.0  # a request body (at most 8 KiB) arrives within this, or 408


def error(status: int, message: str) -> web.Response:
    return web.json_response({"ok": False, "error": message}, status=status)


def same_origin(request: web.Request) -> None:
    """403 unless the browser says the request comes from this origin (or says nothing)."""
    origin = request.headers.get("Origin")
    # The host only: behind a TLS proxy the browser's origin is https:// and ours is http://.
    if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
        raise web.HTTPForbidden(reason="cross-site request refused")
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        raise web.HTTPForbidden(reason="cross-site request refused")


async def read_json(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object (``{}`` when empty); 415, 413, 408 or 400 otherwise."""
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(reason="the body must be application/json")
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=request.content_length)
    try:
        async with asyncio.timeout(BODY_S):  # a body trickled a byte at a time holds nothing long
            body = await request.read()  # bounded by client_max_size
    except TimeoutError:
        raise web.HTTPRequestTimeout(reason=f"the body did not arrive within {BODY_S:.0f} s") from None
    if not body:
        return {}
    try:
        doc = load_json(body, max_bytes=MAX_BODY)
    except InputRefused as e:
        raise web.HTTPBadRequest(reason=f"the body: {e}") from None
    if not isinstance(doc, dict):
        raise web.HTTPBadRequest(reason="the body must be a JSON object")
    return doc
