"""A table console on a real socket in front of a whole table in one process (simulators, the
supervisor over the wire, a virtual dealer), with a users file of one floorperson and one dealer.
The clock of sessions and the sign-in rate limit is a number the test moves."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from playwright.async_api import Browser, async_playwright

from controller.console.server import Console
from controller.console.users import User, hash_password, save_users
from controller.supervisor.rig import Rig, table_file, virtual_table

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PASSWORDS = {"flo": "floor-secret-1", "dan": "dealer-secret-1"}
GUARD_S = 60.0


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ConsoleRig:
    rig: Rig
    console: Console
    url: str
    clock: Clock
    users: Path

    def client(self) -> aiohttp.ClientSession:
        # The cookie jar ignores cookies from an IP host unless it is told not to.
        return aiohttp.ClientSession(self.url, cookie_jar=aiohttp.CookieJar(unsafe=True))


def write_users(path: Path) -> Path:
    save_users(
        path,
        {
            "flo": User("flo", "floor", hash_password(PASSWORDS["flo"])),
            "dan": User("dan", "dealer", hash_password(PASSWORDS["dan"])),
        },
    )
    return path


@contextlib.asynccontextmanager
async def console_for(tmp_path: Path, game: str = "double-back-jack") -> AsyncIterator[ConsoleRig]:
    """A console in front of a virtual ``game`` table of two boxes."""
    users = write_users(tmp_path / "users.toml")
    clock = Clock()
    async with asyncio.timeout(GUARD_S):
        async with virtual_table(table_file(game), tmp_path / "j.db", seed=5, boxes=2) as rig:
            console = Console(rig.supervisor, users, clock=clock)
            host, port = await console.start("127.0.0.1", 0)
            cr = ConsoleRig(rig, console, f"http://{host}:{port}", clock, users)
            try:
                yield cr
            finally:
                await cr.console.stop()


@pytest.fixture
async def console_rig(tmp_path: Path) -> AsyncIterator[ConsoleRig]:
    async with console_for(tmp_path) as cr:
        yield cr


async def sign_in(client: aiohttp.ClientSession, user: str) -> str:
    """Signed in as ``user``; the session's CSRF token."""
    async with client.post("/api/login", json={"user": user, "password": PASSWORDS[user]}) as r:
        assert r.status == 200, await r.text()
        return str((await r.json())["csrf"])


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        # Debian's build; nothing is downloaded (no `playwright install`).
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield b
        finally:
            await b.close()
