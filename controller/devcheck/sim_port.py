"""A simulator's control port (``tablectl sim --control``, docs/simulators.md) as the device check
uses it: to put a simulated device into a state a real one is put into by hand (a jammed shuffle,
a device fault, a failed reader), so that every row of a page's command table is checked in one
run. A real device has no such port: those rows are then not checked, and the report says they
need a person at the device.

The check speaks the port's published HTTP/JSON, as any test in another process does; it imports
nothing of the simulator."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from controller.devcheck.report import Unreachable

TIMEOUT_S = 5.0  # the port answers at once; a port that does not is no simulator of this table
BY_HAND = "a real device is put into this state by hand; a simulator through --sim-control"


def parse_control_url(text: str) -> str:
    """``http://HOST:PORT[/]`` (what ``tablectl sim --control`` prints) -> the base URL."""
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ValueError(f"--sim-control {text!r}: must be http://HOST:PORT/ (as tablectl sim prints it)")
    return f"http://{parts.netloc}/"


class SimPort:
    def __init__(self, url: str, device: str) -> None:
        self.url, self.device = url, device
        self.caused: set[str] = set()  # faults put on the device by the check, mended when it ends

    async def fault(self, fault: str, **args: Any) -> None:
        """One fault of the control port; Unreachable with the port's one line if it is refused."""
        import aiohttp  # here: a tenth of the check's start-up, needed only with --sim-control

        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as http,
                http.post(f"{self.url}fault", json={"fault": fault, **args}) as resp,
            ):
                body = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise Unreachable(
                f"the simulator's control port at {self.url} did not take {fault!r}: {exc}"
            ) from None
        if not isinstance(body, dict) or body.get("ok") is not True:
            why = body.get("error") if isinstance(body, dict) else body
            raise Unreachable(f"the simulator's control port refused {fault!r}: {why}")
        if fault != "clear":
            self.caused.add(fault)

    async def mend(self) -> None:
        """Every fault the check caused on its device, mended (the port's ``clear``)."""
        if self.caused:
            self.caused.clear()
            await self.fault("clear", device=self.device)
