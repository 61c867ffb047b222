"""The table console in a process of its own, as ``tablectl run`` starts it.

A console sharing the table's process shares its interpreter lock: a flood of clients kept the
console's thread busy and every return of the table's loop from a socket or an fsync then waited
for the lock (issue 23: a quarter of the pace left). In its own process the console costs the
table only what crosses the socket pair: one display per turn of the table's loop that changed
something, and the commands people send. The parent starts it (``ConsoleProcess``), the child
(``python -m controller.console.process SPEC``) serves; when either goes away the other sees the
socket close. The child logs to the stream the table logs to (stdout, or stderr where stdout is a
command's result), so its lines go where the table's go.

A console's process that dies while the table runs (a crash, the kernel's OOM killer, a stray
kill) is said in one line with its exit status and started again on the same address after the
one backoff; the table deals on meanwhile, and sign-ins survive (they are kept beside the journal).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import structlog

from controller import logs
from controller.backoff import Backoff, BackoffPolicy
from controller.console.table_link import MAX_LINE, RemoteTable, TableBridge
from controller.errors import ConfigError, TablectlError
from controller.server_settings import ConsoleSettings
from controller.supervisor.supervisor import Supervisor

START_S = 30.0  # the child is listening within this, or `run` stops with its reason
STOP_S = 10.0  # the child has saved its state and exited within this, or it is killed
NICE = 10  # the console's process runs this much nicer than the table's
RESTART = BackoffPolicy(initial_s=0.5, max_s=30.0)  # a console that dies at once is not a busy loop
HEALTHY_S = 60.0  # a process that served this long before dying starts the backoff afresh


class ConsoleProcess:
    def __init__(self, supervisor: Supervisor, settings: ConsoleSettings, log_level: int) -> None:
        self.supervisor, self.settings, self.log_level = supervisor, settings, log_level
        self.proc: asyncio.subprocess.Process | None = None
        self.bridge: TableBridge | None = None
        self.restarts = 0
        self._keeper: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("tablectl.console")

    async def start(self) -> tuple[str, int]:
        """The console's process started and listening (ConfigError with its reason if it cannot),
        then kept: started again whenever it dies, until ``stop``."""
        host, port = await self._spawn()
        # A restart listens where this one does, also where the system picked the port.
        self.settings = dataclasses.replace(self.settings, port=port)
        self._keeper = asyncio.get_running_loop().create_task(self._keep(), name="console-keeper")
        return host, port

    async def _keep(self) -> None:
        backoff = Backoff(RESTART)
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            status = None if self.proc is None else await self.proc.wait()
            if loop.time() - began > HEALTHY_S:
                backoff.succeeded()
            delay = backoff.failed()
            if status is not None:
                self.log.error("console_process_died", returncode=status, restart_in_s=round(delay, 2))
            self.proc = None
            try:
                if self.bridge is not None:
                    await self.bridge.stop()
                    self.bridge = None
                await asyncio.sleep(delay)
                self.restarts += 1
                await self._spawn()
            except Exception as e:  # the keeper outlives any failure: said, tried again after the next delay
                self.log.error("console_restart_failed", error=f"{type(e).__name__}: {e}")

    async def _spawn(self) -> tuple[str, int]:
        s = self.settings
        ours, theirs = socket.socketpair()
        spec = {
            "host": s.host,
            "port": s.port,
            "users": str(s.users),
            "allow_hosts": list(s.allow_hosts),
            "tls_cert": str(s.tls_cert) if s.tls_cert else None,
            "tls_key": str(s.tls_key) if s.tls_key else None,
            "state": str(self.supervisor.journal_path),
            "fd": theirs.fileno(),
            "log_level": self.log_level,
            "log_to_stderr": logs.logs_to_stderr(),  # the table's own lines' stream, for the child's
        }
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "controller.console.process",
                json.dumps(spec),
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        reader, writer = await asyncio.open_connection(sock=ours, limit=MAX_LINE)
        try:
            first = await asyncio.wait_for(reader.readline(), START_S)
        except TimeoutError:
            first = b""
        msg: dict[str, Any] = (
            json.loads(first) if first else {"error": "the console's process did not start (see its log)"}
        )
        if "listening" not in msg:
            writer.close()
            await self._end()
            raise ConfigError(str(msg.get("error", "the console's process did not start")))
        self.bridge = TableBridge(self.supervisor, reader, writer)
        self.bridge.start()
        host, port = msg["listening"]
        self.log.info("console_started", pid=self.proc.pid, restarts=self.restarts)
        return str(host), int(port)

    async def stop(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
            self._keeper = None
        if self.bridge is not None:
            await self.bridge.stop()  # the child sees the socket close: it saves and exits
            self.bridge = None
        await self._end()

    async def _end(self) -> None:
        if self.proc is None:
            return
        try:
            await asyncio.wait_for(self.proc.wait(), STOP_S)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None


async def _child(spec: dict[str, Any]) -> int:
    from controller.console.server import Console
    from controller.console.tls import server_context

    sock = socket.socket(fileno=int(spec["fd"]))
    reader, writer = await asyncio.open_connection(sock=sock, limit=MAX_LINE)

    def say(doc: dict[str, Any]) -> None:
        writer.write(json.dumps(doc).encode() + b"\n")

    table = RemoteTable(reader, writer)
    reading = asyncio.create_task(table.run())
    try:
        tls = None
        if spec["tls_cert"] and spec["tls_key"]:
            tls = server_context(Path(spec["tls_cert"]), Path(spec["tls_key"]))
        console = Console(
            table,
            Path(spec["users"]),
            allow_hosts=tuple(spec["allow_hosts"]),
            tls=tls,
            state=Path(spec["state"]),
        )
        await console.serve(str(spec["host"]), int(spec["port"]))
    except (TablectlError, OSError) as e:
        say({"error": f"console: {e}"})
        await writer.drain()
        return 2
    say({"listening": list(console.bound)})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)  # the table stops it; a signal to the group too
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([reading, stopping], return_when=asyncio.FIRST_COMPLETED)
    await console.close()
    for task in (reading, stopping):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    writer.close()
    return 0


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    logs.configure(int(spec["log_level"]), sys.stderr if spec.get("log_to_stderr") else sys.stdout)
    # Below the table in the scheduler's eyes: when the CPU is short, the table gets it first.
    with contextlib.suppress(OSError):
        os.nice(NICE)
    return asyncio.run(_child(spec))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
