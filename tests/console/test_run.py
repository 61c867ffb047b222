"""``tablectl run --console`` as an operator starts it: the console answers on its port, an
action from it reaches the journal with who did it, and SIGTERM stops the process promptly even
with a live stream open; a page open on it says so when it stops and takes up the table again
when it is back. A bad ``[console]`` section is one line naming file and key."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Browser, expect

from controller.cli import main as tablectl
from controller.supervisor.config import load_table_config
from controller.supervisor.rig import ROOT, concrete_config, table_file
from sim.table import SimTable
from tests.console.conftest import PASSWORDS, write_users
from tests.ports import free_port

GUARD_S = 90.0  # failure guard only: a start under load takes 10 s+
# Each expect on a page is given this: Playwright's expect has its own 5 s default, which the
# context's default timeout does not change.
PAGE_WAIT_MS = GUARD_S * 1000 / 2
# How long an open page may take to find a restarted table (console.js): its next try comes
# within the longest retry delay (10 s) and is given 3 s; one try more as the margin for a try
# the new console's process (niced below the table, just started) is too starved to answer.
PAGE_FINDS_THE_TABLE_S = 2 * (10.0 + 3.0)


async def _line(proc: asyncio.subprocess.Process, event: str, *more: str) -> dict[str, Any]:
    """Reads the log until ``event`` and every one of ``more`` have come, in any order (the
    console's process says it listens when it does, before or after the table is ready); the
    first event's line."""
    assert proc.stdout is not None
    wanted, first = {event, *more}, None
    while wanted:
        raw = await proc.stdout.readline()
        assert raw, "tablectl run ended"
        line = json.loads(raw)
        if line["event"] in wanted:
            wanted.discard(line["event"])
            first = dict(line) if line["event"] == event else first
    assert first is not None
    return first


async def console_table(tmp_path: Path, listen: str = "127.0.0.1:0", more: str = "") -> tuple[SimTable, Path]:
    """Double Back Jack's simulated devices started, and a table file for them in ``tmp_path`` with a
    ``[console]`` listening at ``listen`` (plus ``more`` lines) and its users file beside it."""
    cfg = load_table_config(table_file("double-back-jack"))
    sim = SimTable(cfg.devices, cfg.options.spec, seed=3, decks=cfg.options.decks)
    await sim.start()
    config = concrete_config("double-back-jack", sim, tmp_path / "table.toml")
    with config.open("a") as f:
        f.write(f'[console]\nlisten = "{listen}"\nusers = "users.toml"\n{more}')
    write_users(tmp_path / "users.toml")
    return sim, config


async def _floor_brings_a_new_dealer(url: str, session: aiohttp.ClientSession | None = None) -> None:
    """The floor signs in at the console and records a new dealer; the table takes it."""
    async with contextlib.AsyncExitStack() as stack:
        c = session or await stack.enter_async_context(
            aiohttp.ClientSession(url, cookie_jar=aiohttp.CookieJar(unsafe=True))
        )
        async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]}) as r:
            csrf = (await r.json())["csrf"]
        async with c.post(
            "/api/actions/new_dealer", json={"name": "dana"}, headers={"X-CSRF-Token": csrf}
        ) as r:
            result = await r.json()
            assert result["ok"] is True, result


async def test_tablectl_run_serves_the_console(tmp_path: Path) -> None:
    sim, config = await console_table(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "run",
        "--config",
        str(config),
        "--journal",
        str(tmp_path / "j.db"),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(GUARD_S):
            listening = await _line(proc, "console_listening", "ready")  # commands wait for ready
            url = f"http://127.0.0.1:{listening['port']}"
            async with aiohttp.ClientSession(url, cookie_jar=aiohttp.CookieJar(unsafe=True)) as c:
                await _floor_brings_a_new_dealer(url, c)
                async with c.get("/api/events") as stream:
                    assert (await stream.content.readline()).startswith(b"event: display")
                    proc.send_signal(signal.SIGTERM)
                    await stream.content.read()  # the server ends the stream as it shuts down
            assert await proc.wait() == 0
            assert proc.stdout is not None
            lines = [json.loads(x) for x in (await proc.stdout.read()).splitlines() if x.strip()]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await sim.stop()
    assert any(x["event"] == "stopped" for x in lines)
    assert not any("floor-secret" in json.dumps(x) for x in lines)


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ('[console]\nlisten = "0.0.0.0"\n', "console.listen: must be HOST:PORT"),
        ('[console]\nlisten = "localhost:80"\n', "console.listen: must be HOST:PORT with an IP address"),
        ("[console]\nport = 80\n", "console.port: unknown key (expected listen, users, tls_cert, tls_key"),
        ('[console]\nallow_hosts = ["http://x:1"]\n', "console.allow_hosts: must be a list of host names"),
    ],
)
def test_a_bad_console_section_is_one_line(
    section: str, error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = table_file("double-back-jack")
    config = tmp_path / "t.toml"
    text = src.read_text(encoding="utf-8").replace('game = "', f'game = "{src.parent}/')
    config.write_text(text.replace('profile = "', f'profile = "{src.parent}/') + section, encoding="utf-8")
    assert tablectl(["config", "check", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"{config}: {error}" or err.strip().startswith(f"{config}: {error}"), err


async def _run(
    config: Path, journal: Path, procs: list[asyncio.subprocess.Process], drains: list[asyncio.Task[bytes]]
) -> None:
    """``tablectl run`` started and ready; its log read on meanwhile (a full pipe would stop it)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", "run", "--config", str(config), "--journal", str(journal),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    procs.append(proc)
    await _line(proc, "ready", "console_listening")
    assert proc.stdout is not None
    drains.append(asyncio.create_task(proc.stdout.read()))


async def test_a_page_open_through_a_restart_of_tablectl_run(tmp_path: Path, browser: Browser) -> None:
    """Issue 25 as seen: `run` restarts under an open dealer display. The page says the table is
    gone while it is, then (the restarted process does not know the old session) says plainly
    to sign in again, and after that shows the table as it is now, live."""
    port = free_port()
    sim, config = await console_table(tmp_path, f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}"
    procs: list[asyncio.subprocess.Process] = []
    drains: list[asyncio.Task[bytes]] = []
    try:
        async with asyncio.timeout(GUARD_S * 2 + PAGE_FINDS_THE_TABLE_S):
            await _run(config, tmp_path / "j.db", procs, drains)
            context = await browser.new_context(viewport={"width": 1024, "height": 768})
            context.set_default_timeout(GUARD_S * 1000 / 2)
            page = await context.new_page()
            await page.goto(url + "/")
            await page.fill("#login input[name=user]", "dan")
            await page.fill("#login input[name=password]", PASSWORDS["dan"])
            await page.click("#login button")
            await expect(page.locator("#link")).to_have_text("live", timeout=PAGE_WAIT_MS)

            procs[-1].send_signal(signal.SIGTERM)
            assert await procs[-1].wait() == 0
            await expect(page.locator("#conn")).to_contain_text(
                "Connection to the table lost", timeout=PAGE_WAIT_MS
            )
            await expect(page.locator("#link")).to_have_text("offline", timeout=PAGE_WAIT_MS)

            await _run(config, tmp_path / "j.db", procs, drains)
            # A restart slower than the page's first retries (12 s measured on a loaded 2-core
            # machine) finds the page on its 8 or 10 s delay: Playwright's 5 s was too short.
            await expect(page.locator("#conn")).to_be_hidden(timeout=PAGE_FINDS_THE_TABLE_S * 1000)
            if await page.locator("#login").is_visible():  # sessions did not survive the restart
                await expect(page.locator("#login-why")).to_contain_text(
                    "Signed out, sign in again", timeout=PAGE_WAIT_MS
                )
                await page.fill("#login input[name=user]", "dan")
                await page.fill("#login input[name=password]", PASSWORDS["dan"])
                await page.click("#login button")
            await expect(page.locator("#link")).to_have_text("live", timeout=PAGE_WAIT_MS)
            # The table changes after the restart: the page follows it.
            async with aiohttp.ClientSession(url, cookie_jar=aiohttp.CookieJar(unsafe=True)) as c:
                async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]}) as r:
                    csrf = (await r.json())["csrf"]
                async with c.post(
                    "/api/actions/new_dealer", json={"name": "dana"}, headers={"X-CSRF-Token": csrf}
                ) as r:
                    result = await r.json()
            assert result["ok"] is True, result
            await expect(page.locator("#title")).to_contain_text(
                "dealer on record: dana", timeout=PAGE_WAIT_MS
            )
            procs[-1].send_signal(signal.SIGTERM)
            assert await procs[-1].wait() == 0
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        for drain in drains:
            await drain
        await sim.stop()


async def _start_run(config: Path, journal: Path) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", "run", "--config", str(config), "--journal", str(journal),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        listening = await _line(proc, "console_listening")
    except BaseException:  # the guard ran out (or the log said otherwise): it must not outlive the test
        proc.kill()
        await proc.wait()
        raise
    return proc, f"http://127.0.0.1:{listening['port']}"


async def _ended(proc: asyncio.subprocess.Process | None, sim: SimTable) -> None:
    """After a test, whatever happened: ``tablectl run`` killed if it still runs, the devices stopped."""
    if proc is not None and proc.returncode is None:
        proc.kill()
        await proc.wait()
    await sim.stop()


async def _stop_run(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGTERM)
    await proc.communicate()  # its log read to the end, so a full pipe cannot hold it
    assert proc.returncode == 0


async def test_a_restart_of_run_keeps_sessions_and_lockouts(tmp_path: Path) -> None:
    """The console in its own process, as `tablectl run` starts it: a session and a lockout made
    before SIGTERM hold after the next start, from the files beside the journal."""
    sim, config = await console_table(tmp_path)
    jar = aiohttp.CookieJar(unsafe=True)
    procs: list[asyncio.subprocess.Process] = []
    try:
        # One guard for each life of `run`, as for the single life above: two starts of `run`
        # and of its console's process (niced below the table) and seven scrypt checks took 12 s
        # of a single 30 s guard on a loaded 2-core machine, and more when it was busier still.
        async with asyncio.timeout(GUARD_S):
            proc, url = await _start_run(config, tmp_path / "j.db")
            procs.append(proc)
            async with aiohttp.ClientSession(url, cookie_jar=jar) as c:
                async with c.post("/api/login", json={"user": "dan", "password": PASSWORDS["dan"]}) as r:
                    assert r.status == 200
                for i in range(5):
                    async with c.post("/api/login", json={"user": "flo", "password": f"wrong-{i}"}) as r:
                        assert r.status == 401
            await _stop_run(proc)
        async with asyncio.timeout(GUARD_S):
            proc, url = await _start_run(config, tmp_path / "j.db")
            procs.append(proc)
            async with aiohttp.ClientSession(url, cookie_jar=jar) as c:
                async with c.get("/api/display") as r:
                    assert r.status == 200 and (await r.json())["signed_in"]["user"] == "dan"
                async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]}) as r:
                    assert r.status == 429  # still locked: the attempts were on disk
            await _stop_run(proc)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
        await sim.stop()


async def test_a_console_process_that_dies_is_started_again(tmp_path: Path) -> None:
    """Every task is supervised: a console's process killed under the table is said in one line
    and served again on the same address, with the table still dealing."""
    sim, config = await console_table(tmp_path)
    proc: asyncio.subprocess.Process | None = None
    try:
        async with asyncio.timeout(GUARD_S):
            proc, url = await _start_run(config, tmp_path / "j.db")
            child = (await _line(proc, "console_started"))["pid"]  # the table has taken it up
            os.kill(child, signal.SIGKILL)
            died = await _line(proc, "console_process_died")
            assert died["returncode"] == -signal.SIGKILL and died["level"] == "error"
            again = await _line(proc, "console_started", "console_listening")
            assert again["pid"] != child and again["restarts"] == 1
            await _floor_brings_a_new_dealer(url)  # the same address, though the system picked the port
            await _stop_run(proc)
    finally:
        await _ended(proc, sim)
