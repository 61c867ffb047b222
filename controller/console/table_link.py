"""How the console reaches its table: the public display (with the number of the change it is as
of) and the supervisor's commands. Two ways, one interface:

- ``LocalTable``: the supervisor in this process, its event loop on another thread (the tests and
  ``tablectl demo``). The console's thread asks the table's loop; the table's loop builds the
  display at most once per change, when asked.
- ``RemoteTable`` and ``TableBridge``: the console in a process of its own (``tablectl run``), so
  that no flood of clients can take the table's CPU or its interpreter lock. The bridge, on the
  table's loop, pushes the display after each change (changes in one turn of the loop coalesced,
  none queued while the console is not reading) and runs the commands the console sends; both
  as JSON lines over a socket pair.

The display is built from the public snapshot only (controller/console/display.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import structlog

from controller.console.display import display, turn
from controller.console.last_round import LastRound
from controller.supervisor.supervisor import Supervisor
from controller.table.asking import layout

MAX_LINE = 1 << 20  # a display or a command, as one JSON line
MAX_BUFFERED = 1 << 20  # the bridge skips a push while this much is unread by the console


def public_display(supervisor: Supervisor, last_round: LastRound) -> dict[str, Any]:
    """The dealer display from the supervisor's public state (on the table's loop): the layout as
    the players see it, the ask worded, and the last settled round kept in view while the dealer
    pays (``last_round`` caches it between calls)."""
    kinds = {n: k.value for n, k in supervisor.kinds.items()}
    table = supervisor.table if supervisor.jt is not None else None
    snapshot = supervisor.snapshot()
    ask = snapshot.get("asking")
    worded = turn(ask) if ask is not None else {"who": "", "what": "the table is starting"}
    board = None
    if table is not None:
        board = layout(table, supervisor.translator.bets, supervisor.config.options.boxes)
    body = display(snapshot, kinds, worded, table.dealer_name if table is not None else None, board)
    if supervisor.jt is not None:  # the dealer pays after the layout has emptied: the last round stays
        body["last_round"] = last_round.get(supervisor.jt.journal)
    return body


class TableLink(Protocol):
    version: int  # the table's changes so far, as far as the console knows

    def attach(self, wake: Callable[[], None]) -> None: ...
    def detach(self) -> None: ...
    async def public(self) -> tuple[int, dict[str, Any]]: ...
    async def command(self, name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]: ...


class LocalTable:
    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.version = 0  # written on the table's loop only
        self.last_round = LastRound()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: Callable[[], None] | None = None
        self._unlisten: Callable[[], None] | None = None

    def attach(self, wake: Callable[[], None]) -> None:
        """On the table's loop: ``wake`` (thread-safe) after every change."""
        self._loop, self._wake = asyncio.get_running_loop(), wake
        self._unlisten = self.supervisor.on_change(self._changed)

    def detach(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None

    def _changed(self) -> None:
        self.version += 1  # a counter and a wake-up: nothing that grows with the clients
        if self._wake is not None:
            self._wake()

    async def _public(self) -> tuple[int, dict[str, Any]]:
        return self.version, public_display(self.supervisor, self.last_round)

    async def public(self) -> tuple[int, dict[str, Any]]:
        assert self._loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._public(), self._loop))

    async def command(self, name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        assert self._loop is not None
        coro = self.supervisor.command(name, args, who, role)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))


class RemoteTable:
    """The table as the console's own process sees it, over ``reader``/``writer``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.version = 0
        self._latest: tuple[int, dict[str, Any]] | None = None
        self._first = asyncio.Event()
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0
        self._wake: Callable[[], None] | None = None
        self.gone = asyncio.Event()

    def attach(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def detach(self) -> None:
        self._wake = None

    async def run(self) -> None:
        """Read the table's pushes and replies until it goes away."""
        try:
            while line := await self.reader.readline():
                msg = json.loads(line)
                if "display" in msg:
                    self._latest = (int(msg["version"]), msg["display"])
                    self.version = self._latest[0]
                    self._first.set()
                    if self._wake is not None:
                        self._wake()
                elif "reply" in msg:
                    future = self._replies.pop(int(msg["reply"]), None)
                    if future is not None and not future.done():
                        future.set_result(msg["result"])
        finally:
            self.gone.set()
            for future in self._replies.values():
                if not future.done():
                    future.set_exception(ConnectionError("the table went away"))

    async def public(self) -> tuple[int, dict[str, Any]]:
        await self._first.wait()
        assert self._latest is not None
        return self._latest

    async def command(self, name: str, args: dict[str, Any], who: str, role: str) -> dict[str, Any]:
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[self._next] = future
        doc = {"command": name, "args": args, "who": who, "role": role, "id": self._next}
        self.writer.write(json.dumps(doc).encode() + b"\n")
        return await future


class TableBridge:
    """On the table's loop: the display to the console's process after each change, and the
    commands it sends run as the supervisor's own."""

    def __init__(
        self, supervisor: Supervisor, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.supervisor, self.reader, self.writer = supervisor, reader, writer
        self.version = 0
        self.last_round = LastRound()
        self._scheduled = False
        self._unlisten: Callable[[], None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("tablectl.console")

    def start(self) -> None:
        self._unlisten = self.supervisor.on_change(self._changed)
        self._task = asyncio.get_running_loop().create_task(self._commands())
        self._push()

    async def stop(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()

    def _changed(self) -> None:
        self.version += 1
        if not self._scheduled:  # the changes of one turn of the loop go as one push
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._push)

    def _push(self) -> None:
        self._scheduled = False
        if self.writer.is_closing() or self.writer.transport.get_write_buffer_size() > MAX_BUFFERED:
            return  # the console is not reading: the next change sends the latest again
        doc = {"version": self.version, "display": public_display(self.supervisor, self.last_round)}
        self.writer.write(json.dumps(doc, separators=(",", ":")).encode() + b"\n")

    async def _commands(self) -> None:
        """Until the console's process goes away (its keeper says so and starts another): at its
        end of the socket a process that died with data unread resets the connection."""
        with contextlib.suppress(ConnectionError):
            await self._serve_commands()

    async def _serve_commands(self) -> None:
        while line := await self.reader.readline():
            try:
                msg = json.loads(line)
                name, args = str(msg["command"]), dict(msg["args"])
                who, role, ident = str(msg["who"]), str(msg["role"]), int(msg["id"])
            except (ValueError, KeyError, TypeError):  # one bad line is refused, the rest served
                self.log.error("console_message_refused")
                continue
            try:
                result = await self.supervisor.command(name, args, who, role)
            except Exception as e:  # a bug: the console answers "internal error"
                self.log.error("console_command_failed", error=type(e).__name__)
                result = {"ok": False, "error": "internal error"}
            if not self.writer.is_closing():
                reply = {"reply": ident, "result": result}
                self.writer.write(json.dumps(reply, default=str).encode() + b"\n")


def journal_of(link: TableLink, state: Path | None) -> Path:
    if state is not None:
        return state
    if isinstance(link, LocalTable):
        return link.supervisor.journal_path
    raise ValueError("a console in its own process is told where its state is")
