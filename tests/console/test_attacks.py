"""The console under attack, over real sockets: a burst of sign-ins at one name from many addresses
(bounded password checks, nobody locked out), guessing from 20 addresses while the floor signs
in, per-address locks and sessions that outlive a restart, sessions ended by a password change,
connections and streams past their caps, slow and idle clients closed, and the table still
settling rounds while all that goes on. Client sockets are bound to addresses of 127.0.0.0/8 to
play many sources."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from structlog.testing import capture_logs

from controller import logs
from controller.connection_caps import ConnectionCaps
from controller.console import http_rules, login, server
from controller.console.people import COOKIE
from controller.console.server import Console
from controller.console.sign_ins import SignInAttempts, keys
from controller.console.state import state_paths
from controller.console.streams import MAX_STREAMS_PER_SESSION
from controller.console.users import User, hash_password, load_users, save_users
from tests.console.conftest import PASSWORDS, ConsoleRig, sign_in

BURST = 300


@pytest.fixture(autouse=True)
def _logs() -> None:
    logs.configure(cache=False)  # capture_logs misses cached loggers


def client_from(rig: ConsoleRig, source: str, jar: aiohttp.CookieJar | None = None) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=0, local_addr=(source, 0))
    return aiohttp.ClientSession(
        rig.url, connector=connector, cookie_jar=jar or aiohttp.CookieJar(unsafe=True)
    )


class _Conn:
    """A connection as ConnectionCaps sees one: it can be closed to make room."""

    def __init__(self, caps: ConnectionCaps, source: str) -> None:
        self.caps, self.source, self.dropped = caps, source, False

    def drop(self) -> None:
        self.dropped = True
        self.caps.leave(self, self.source)  # type: ignore[arg-type]


def test_at_the_total_cap_the_oldest_connection_nobody_vouched_for_makes_room() -> None:
    refused: list[tuple[str, str]] = []
    caps = ConnectionCaps(10, 3, lambda s, why: refused.append((s, why)), per_account=1)
    a, b, c, d, e, f, g, h = (_Conn(caps, f"10.0.0.{i}") for i in range(8))

    def admit(conn: _Conn) -> bytes | None:
        return caps.admit(conn, conn.source)  # type: ignore[arg-type]

    assert admit(a) is None and admit(b) is None and admit(c) is None
    caps.vouch(a, "flo")  # type: ignore[arg-type]
    caps.busy(b, True)  # type: ignore[arg-type]  # in a request: an idle one goes first
    assert admit(d) is None and c.dropped
    assert admit(e) is None and d.dropped and not b.dropped
    caps.vouch(e, "dan")  # type: ignore[arg-type]
    assert admit(f) is None and b.dropped  # no idle one left: the oldest busy one
    caps.vouch(f, "flo")  # type: ignore[arg-type]  # past flo's one: stays anyone's
    assert admit(g) is None and f.dropped and not a.dropped and not e.dropped
    caps.vouch(g, "dee")  # type: ignore[arg-type]
    refusal = admit(h)  # every open connection vouched for
    assert refusal is not None and b"the console has too many connections" in refusal
    assert refused == [("10.0.0.7", "the console has too many connections")] and caps.count() == 3


def source(i: int) -> str:
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


async def _restarted(rig: ConsoleRig) -> ConsoleRig:
    """The same table's console stopped and started again on the same port (a restart of `run`
    as far as the console is concerned: nothing in memory survives, the files beside the
    journal do)."""
    await rig.console.stop()
    port = int(rig.url.rsplit(":", 1)[1])
    rig.console = Console(rig.rig.supervisor, rig.users, clock=rig.clock)
    await rig.console.start("127.0.0.1", port)
    return rig


class Checks(list[str]):
    """Every scrypt check the console made, by the hash checked, and the most run at once."""

    most_at_once = 0


@pytest.fixture
async def counted(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Checks]:
    real, checks, lock, running = login.verify_password, Checks(), threading.Lock(), [0]

    def verify(password: str, encoded: str) -> bool:
        with lock:
            checks.append(encoded)
            running[0] += 1
            checks.most_at_once = max(checks.most_at_once, running[0])
        try:
            return real(password, encoded)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(login, "verify_password", verify)
    yield checks


async def _try(rig: ConsoleRig, address: str, password: str, user: str = "flo") -> tuple[int, str | None]:
    """One sign-in from ``address``: the status and ``Retry-After``."""
    async with (
        client_from(rig, address) as c,
        c.post("/api/login", json={"user": user, "password": password}) as r,
    ):
        return r.status, r.headers.get("Retry-After")


async def test_a_burst_of_sign_ins_is_bounded_and_locks_nobody_out(
    console_rig: ConsoleRig, counted: Checks
) -> None:
    """300 guesses at once for one name, from 300 addresses, the right password last. Before: 5
    reached the hash, then the name was refused at every new address for 5 minutes, the right
    password included. Now the name's checks run one at a time (the CPU a burst costs is bounded
    at any moment), those past the queue are told to come back (503), and only an address that
    guessed wrong 5 times itself is refused."""
    clients = [client_from(console_rig, source(i)) for i in range(BURST)]
    guesses = [f"guess-{i:04d}-wrong" for i in range(BURST - 1)] + [PASSWORDS["flo"]]

    async def attempt(c: aiohttp.ClientSession, password: str) -> tuple[int, str | None]:
        async with c.post("/api/login", json={"user": "flo", "password": password}) as r:
            return r.status, r.headers.get("Retry-After")

    try:
        answers = await asyncio.gather(*(attempt(c, p) for c, p in zip(clients, guesses, strict=True)))
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    statuses = [status for status, _ in answers]
    assert set(statuses[:-1]) <= {401, 503} and statuses[-1] in (200, 503)
    assert statuses.count(401) + statuses.count(200) == len(counted) >= 1
    assert counted.most_at_once <= login.HASHING_PER_NAME
    assert all(int(after or 0) == login.BUSY_RETRY_S for status, after in answers if status == 503)
    # The right password from addresses that guessed nothing wrong: signed in.
    for address in ("127.0.9.9", source(BURST - 1)):
        async with client_from(console_rig, address) as c:
            await sign_in(c, "flo")
    # A guesser has its own 5, then is refused, the right password too, until the window passes.
    for _ in range(5):
        assert (await _try(console_rig, "127.0.8.8", "guess-again-wrong"))[0] == 401
    status, after = await _try(console_rig, "127.0.8.8", PASSWORDS["flo"])
    assert status == 429 and int(after or 0) > 0
    # The lock is on disk (0600) and outlives a restart of the console.
    attempts_file = state_paths(console_rig.rig.supervisor.journal_path)[2]
    assert attempts_file.stat().st_mode & 0o777 == 0o600
    rig = await _restarted(console_rig)
    assert (await _try(rig, "127.0.8.8", PASSWORDS["flo"]))[0] == 429
    assert (await _try(rig, "127.0.9.10", PASSWORDS["flo"]))[0] == 200
    rig.clock.now += 301  # the window has passed
    assert (await _try(rig, "127.0.8.8", PASSWORDS["flo"]))[0] == 200
    assert counted.most_at_once <= login.HASHING_PER_NAME


async def test_one_address_gets_five_attempts_whatever_the_names(
    console_rig: ConsoleRig, counted: Checks
) -> None:
    async with client_from(console_rig, "127.0.5.5") as c:
        for name in ["ann", "bob", "cy", "dee", "flo"]:
            async with c.post("/api/login", json={"user": name, "password": "wrong-wrong-wrong"}) as r:
                assert r.status == 401
        async with c.post("/api/login", json={"user": "dan", "password": PASSWORDS["dan"]}) as r:
            assert r.status == 429  # the address is locked out, the right password too
    async with client_from(console_rig, "127.0.5.6") as c:
        await sign_in(c, "dan")  # another address, and flo's one failure locks nobody
        await sign_in(c, "flo")
    assert len(counted) == 7


async def test_sessions_outlive_a_restart_and_end_with_a_password_change(console_rig: ConsoleRig) -> None:
    async with console_rig.client() as c:
        csrf = await sign_in(c, "dan")
        token = next(m.value for m in c.cookie_jar if m.key == COOKIE)
        sessions_file = state_paths(console_rig.rig.supervisor.journal_path)[1]
        text = sessions_file.read_text()
        assert token not in text and csrf not in text and '"dan"' in text  # only the token's hash
        assert sessions_file.stat().st_mode & 0o777 == 0o600
        rig = await _restarted(console_rig)
        async with c.get("/api/display") as r:
            assert r.status == 200 and (await r.json())["signed_in"]["user"] == "dan"
        async with c.post(
            "/api/actions/new_dealer", json={"name": "dana"}, headers={"X-CSRF-Token": csrf}
        ) as r:
            assert (await r.json())["ok"] is True  # the CSRF token still holds
        # `tablectl users add dan --replace` with another password: the session ends.
        users = load_users(rig.users)
        users["dan"] = User("dan", "dealer", hash_password("another-dealer-secret"))
        save_users(rig.users, users)
        async with c.get("/api/display") as r:
            assert r.status == 401
        await _restarted(rig)  # the console saves its files as it stops
        assert '"dan"' not in sessions_file.read_text()  # and stays ended after a restart
        async with c.get("/api/display") as r:
            assert r.status == 401


async def test_a_tampered_sessions_file_signs_everyone_out(console_rig: ConsoleRig) -> None:
    async with console_rig.client() as c:
        await sign_in(c, "dan")
        await console_rig.console.stop()
        sessions_file = state_paths(console_rig.rig.supervisor.journal_path)[1]
        doc = json.loads(sessions_file.read_text())
        for s in doc["body"].values():
            s["role"] = "floor"  # a dealer made floor by an edit
        sessions_file.write_text(json.dumps(doc))
        with capture_logs() as logged:
            port = int(console_rig.url.rsplit(":", 1)[1])
            console_rig.console = Console(
                console_rig.rig.supervisor, console_rig.users, clock=console_rig.clock
            )
            await console_rig.console.start("127.0.0.1", port)
        assert any(e["event"] == "console_state_refused" and "signature" in e["error"] for e in logged)
        async with c.get("/api/display") as r:
            assert r.status == 401


async def test_streams_are_capped_per_session(console_rig: ConsoleRig) -> None:
    """Per person and per role: the tests of one account keeping the floor out, below."""
    async with console_rig.client() as dan, console_rig.client() as flo:
        await sign_in(dan, "dan")
        await sign_in(flo, "flo")
        opened = [await dan.get("/api/events") for _ in range(MAX_STREAMS_PER_SESSION)]
        assert all(r.status == 200 for r in opened)
        async with dan.get("/api/events") as r:
            assert r.status == 429 and "live streams" in (await r.json())["error"]
        async with flo.get("/api/display") as r:
            assert r.status == 200  # the rest of the console still answers
        for r in opened:
            r.close()


async def _raw(host: str, port: int, src: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(host, port, local_addr=(src, 0))


async def test_connections_are_capped_per_source_and_in_all(console_rig: ConsoleRig) -> None:
    host, port = console_rig.url.removeprefix("http://").split(":")
    caps = console_rig.console.caps
    caps.per_source, caps.total = 3, 5
    held = [await _raw(host, int(port), "127.0.7.1") for _ in range(3)]
    with capture_logs() as logged:
        for _ in range(5):
            reader, writer = await _raw(host, int(port), "127.0.7.1")
            answer = await reader.read()  # the refusal, then the end of the connection
            assert answer.startswith(b"HTTP/1.1 503") and b"too many connections from your address" in answer
            writer.close()
    # Five refusals, one log line: a flood of refused connections is not a flood of log lines.
    assert [e["remote"] for e in logged if e["event"] == "console_connection_refused"] == ["127.0.7.1"]
    held += [await _raw(host, int(port), "127.0.7.2") for _ in range(2)]
    # At the total cap nobody signed in is refused for idle connections: the oldest goes.
    held.append(await _raw(host, int(port), "127.0.7.3"))
    assert await held[0][0].read() == b"" and caps.count() == 5 and caps.evicted == 1
    caps.per_source, caps.total = 64, 2048
    async with client_from(console_rig, "127.0.7.4") as c:
        await sign_in(c, "dan")
    for _, w in held:
        w.close()


@pytest.fixture
def quick_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "IDLE_S", 1.0)  # longer than BODY_S: the slow body meets its own
    monkeypatch.setattr(http_rules, "BODY_S", 0.3)


async def test_slow_and_idle_clients_are_closed(tmp_path: Path, quick_timeouts: None) -> None:
    from controller.supervisor.rig import table_file, virtual_table
    from tests.console.conftest import Clock, write_users

    users = write_users(tmp_path / "users.toml")
    async with asyncio.timeout(30):
        async with virtual_table(table_file("double-back-jack"), tmp_path / "j.db", seed=5, boxes=2) as rig:
            console = Console(rig.supervisor, users, clock=Clock())
            host, port = await console.start("127.0.0.1", 0)
            try:
                # Slowloris: the request line and headers a byte at a time, never finished.
                r1, w1 = await _raw(host, port, "127.0.8.1")
                with contextlib.suppress(ConnectionError):  # closed while still trickling: as well
                    for b in b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ":
                        w1.write(bytes([b]))
                        await w1.drain()
                # Idle: connected, says nothing.
                r2, w2 = await _raw(host, port, "127.0.8.2")
                # A body that never arrives.
                r3, w3 = await _raw(host, port, "127.0.8.3")
                w3.write(
                    b"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b'Content-Length: 100\r\n\r\n{"user"'
                )
                assert await r1.read() == b""  # closed by the console, with nothing said
                assert await r2.read() == b""
                answer = await r3.read()
                assert answer.startswith(b"HTTP/1.1 408") and b"the body did not arrive" in answer
                for w in (w1, w2, w3):
                    w.close()
            finally:
                await console.stop()


async def test_the_table_keeps_dealing_under_a_flood(console_rig: ConsoleRig) -> None:
    """Hundreds of stream requests and slow connections at once, while the virtual dealer plays:
    the streams past the caps are refused, the slow connections are held by the console's own
    thread, and the table settles its rounds (the pace figure is bench/console_flood.py's)."""
    rig = console_rig.rig
    host, port = console_rig.url.removeprefix("http://").split(":")
    slow = [await _raw(host, int(port), source(i % 40)) for i in range(400)]
    for _, w in slow:
        w.write(b"GET /api/display HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    async with console_rig.client() as c:
        await sign_in(c, "flo")
        streams = await asyncio.gather(*(c.get("/api/events") for _ in range(200)), return_exceptions=True)
        statuses = [s.status for s in streams if isinstance(s, aiohttp.ClientResponse)]
        # Four streams for the session; the rest refused: 429 past the session's cap, or the
        # connection itself refused past the cap of connections from one address.
        assert statuses.count(200) == MAX_STREAMS_PER_SESSION and statuses.count(429) > 100
        assert set(statuses) <= {200, 429, 503}
        await rig.dealer.open_table()
        before = rig.supervisor.table.round_no
        await rig.dealer.play(3)
        assert rig.supervisor.table.round_no >= before + 3
        async with c.get("/api/display") as r:
            assert r.status == 200
        for s in streams:
            if isinstance(s, aiohttp.ClientResponse):
                s.close()
    for _, w in slow:
        w.close()


async def test_the_bridge_serves_the_console_process_and_refuses_a_bad_line(console_rig: ConsoleRig) -> None:
    """The table's side of the socket pair to the console's process: a display pushed at once
    and after a change, a malformed line refused without ending the bridge, a command run as the
    supervisor's own with who took it."""
    import socket

    from controller.console.table_link import MAX_LINE, TableBridge

    ours, theirs = socket.socketpair()
    r1, w1 = await asyncio.open_connection(sock=ours, limit=MAX_LINE)
    r2, w2 = await asyncio.open_connection(sock=theirs, limit=MAX_LINE)
    bridge = TableBridge(console_rig.rig.supervisor, r1, w1)
    bridge.start()
    try:
        first = json.loads(await r2.readline())
        assert first["display"]["table"] == "dbj-01" and "signed_in" not in first["display"]
        w2.write(b"not json\n" + json.dumps({"command": "new_dealer"}).encode() + b"\n")
        cmd = {"command": "new_dealer", "args": {"name": "dana"}, "who": "flo", "role": "floor", "id": 7}
        w2.write(json.dumps(cmd).encode() + b"\n")
        got: dict[str, object] = {}
        while "reply" not in got:
            got = json.loads(await r2.readline())
            if "display" in got and got["display"]["dealer"] == "dana":  # type: ignore[index]
                assert got["version"] > first["version"]  # type: ignore[operator]
        assert got["reply"] == 7 and got["result"]["ok"] is True  # type: ignore[index]
    finally:
        await bridge.stop()
        w2.close()


# ---------------------------------------------------------------- one account keeps the floor out
# (each of these failed before the console kept a share per role and a cap per account)


async def _first_event(response: aiohttp.ClientResponse) -> dict[str, object]:
    """The first ``event: display`` of a stream, parsed."""
    event = ""
    async for line in response.content:
        text = line.decode().strip()
        if text.startswith("event: "):
            event = text.removeprefix("event: ")
        elif text.startswith("data: ") and event == "display":
            return dict(json.loads(text.removeprefix("data: ")))
    raise AssertionError("the stream ended before a display")


async def test_one_dealer_signed_in_16_times_leaves_the_floor_its_streams(console_rig: ConsoleRig) -> None:
    """Before: 16 sign-ins of one dealer, 4 streams each, held all 64 and the floor got 503."""
    dealers = [console_rig.client() for _ in range(16)]
    opened: list[aiohttp.ClientResponse] = []
    try:
        refused: list[int] = []
        for c in dealers:
            await sign_in(c, "dan")
            for _ in range(MAX_STREAMS_PER_SESSION):
                r = await c.get("/api/events")
                if r.status == 200:
                    opened.append(r)
                else:
                    refused.append(r.status)
                    assert "for one person" in (await r.json())["error"]
                    r.close()
        assert len(opened) == 8  # one person's cap (MAX_STREAMS_PER_ACCOUNT); before, all 64
        assert refused == [429] * (16 * MAX_STREAMS_PER_SESSION - 8)
        async with console_rig.client() as flo:
            await sign_in(flo, "flo")
            async with flo.get("/api/events") as r:
                assert r.status == 200
                shown = await _first_event(r)
                assert shown["signed_in"] == {"user": "flo", "role": "floor"} and "alarms" in shown
    finally:
        for r in opened:
            r.close()
        await asyncio.gather(*(c.close() for c in dealers))


async def test_the_dealers_share_of_streams_is_theirs_alone(console_rig: ConsoleRig) -> None:
    """Every dealer together fills the dealers' share (half of MAX_STREAMS), never the floor's."""
    console_rig.console.streams.shares.total = 6  # 3 for each role
    async with console_rig.client() as dan, console_rig.client() as flo:
        await sign_in(dan, "dan")
        await sign_in(flo, "flo")
        mine = [await dan.get("/api/events") for _ in range(3)]
        assert [r.status for r in mine] == [200] * 3
        async with dan.get("/api/events") as r:
            assert r.status == 429 and "dealer role's share (3)" in (await r.json())["error"]
        theirs = [await flo.get("/api/events") for _ in range(3)]
        assert [r.status for r in theirs] == [200] * 3
        for r in mine + theirs:
            r.close()


def test_260_sign_ins_of_one_dealer_end_only_that_dealers_oldest_sessions() -> None:
    """Before: one cap of 256 for everyone, so the 257th sign-in of a dealer ended the floor's."""
    from controller.console import sessions as module
    from controller.console.sessions import Sessions

    sessions = Sessions(b"k" * 32, lambda: 1000.0)
    flo = User("flo", "floor", hash_password("x", salt=b"\0" * 16))
    dan = User("dan", "dealer", hash_password("y", salt=b"\0" * 16))
    dee = User("dee", "dealer", hash_password("z", salt=b"\0" * 16))
    flo_token, _ = sessions.new(flo)
    dee_token, _ = sessions.new(dee)
    dan_tokens = [sessions.new(dan)[0] for _ in range(260)]
    assert sessions.get(flo_token) is not None and sessions.get(dee_token) is not None
    per_account = module.MAX_SESSIONS_PER_ACCOUNT
    assert [s.user for s in sessions].count("dan") == per_account
    assert all(sessions.get(t) is not None for t in dan_tokens[-per_account:])
    assert sessions.get(dan_tokens[0]) is None  # his own oldest ended


async def test_many_dealer_sign_ins_keep_the_floor_signed_in(
    console_rig: ConsoleRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP, with the caps made small (a share of 4 for each role): 12 sign-ins of one dealer."""
    monkeypatch.setattr("controller.console.sessions.MAX_SESSIONS", 8)
    monkeypatch.setattr("controller.console.sessions.MAX_SESSIONS_PER_ACCOUNT", 3)
    async with console_rig.client() as flo:
        await sign_in(flo, "flo")
        for _ in range(12):
            async with console_rig.client() as dan:
                await sign_in(dan, "dan")
        assert [s.user for s in console_rig.console.people.sessions].count("dan") == 3
        async with flo.get("/api/display") as r:
            assert r.status == 200 and (await r.json())["signed_in"]["user"] == "flo"


async def test_idle_connections_from_40_addresses_do_not_keep_people_out(console_rig: ConsoleRig) -> None:
    """Before: at the total cap every new connection was refused, so idle connections from 40
    addresses, reconnecting as they were closed, kept everyone out. Now a new connection closes
    the oldest that no signed-in person vouched for; the signed-in keep theirs."""
    host, port = console_rig.url.removeprefix("http://").split(":")
    caps = console_rig.console.caps
    caps.total = 20
    idle = [await _raw(host, int(port), source(i)) for i in range(40)]
    async with console_rig.client() as flo:
        await sign_in(flo, "flo")  # a new connection: it closes the oldest idle one
        # (accepted after the 40, so they are all counted by now)
        assert caps.count() == 20 and caps.evicted == 21
        stream = await flo.get("/api/events")
        assert stream.status == 200
        await _first_event(stream)
        # The flood goes on: 40 more, from the same addresses.
        idle += [await _raw(host, int(port), source(i)) for i in range(40)]
        async with client_from(console_rig, "127.0.9.1") as anyone, anyone.get("/") as r:
            assert r.status == 200  # nobody is refused for them, not even someone not signed in
        assert caps.count() <= 20 and caps.evicted >= 61
        async with flo.get("/api/display") as r:
            assert r.status == 200
        # The stream's connection was kept: it still answers (the next change or heartbeat).
        line = await stream.content.readline()
        assert line != b""
        stream.close()
    # The idle connections closed to make room saw their connection end, not a 503.
    assert await idle[0][0].read() == b""
    for _, w in idle:
        w.close()


async def test_guesses_at_a_name_from_20_addresses_never_lock_the_floor_out(
    console_rig: ConsoleRig, counted: Checks
) -> None:
    """Before: five wrong guesses from anywhere locked the name for 5 minutes at every address
    the person had not signed in from, again and again, so the floor at a new terminal was
    refused. Now each guessing address is refused after its own 5, and an address that has not
    guessed is never refused, across a restart too."""
    answers = []
    for i in range(20):
        for _ in range(5):
            answers.append(await _try(console_rig, f"127.0.6.{10 + i}", "wrong-guess-wrong"))
        answers.append(await _try(console_rig, f"127.0.6.{10 + i}", PASSWORDS["flo"]))
    async with client_from(console_rig, "127.0.7.1") as c:
        await sign_in(c, "flo")  # a terminal she never used
    assert [status for status, _ in answers] == ([401] * 5 + [429]) * 20
    assert all(int(after or 0) > 0 for status, after in answers if status == 429)
    rig = await _restarted(console_rig)  # the guessers' counts are kept, and lock only them
    assert (await _try(rig, "127.0.6.10", PASSWORDS["flo"]))[0] == 429
    async with client_from(rig, "127.0.7.2") as c:
        await sign_in(c, "flo")
    # At her own address a guesser is held by that address's count like anyone: five, then 429.
    async with client_from(rig, "127.0.7.1") as c:
        for _ in range(5):
            async with c.post("/api/login", json={"user": "flo", "password": "wrong-guess-wrong"}) as r:
                assert r.status == 401
        async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]}) as r:
            assert r.status == 429
    assert len(counted) == 100 + 2 + 5


def test_a_sign_ins_file_from_before_locks_no_name() -> None:
    """A file written when names were counted: its per-name counts are not read back (they would
    lock the person out for the rest of the window), its per-address counts are."""
    attempts = SignInAttempts(lambda: 1000.0)
    attempts.restore({"attempts": {"user:flo": [999.0] * 5, "addr:127.0.6.9": [999.0] * 5}, "trusted": {}})
    assert attempts.retry_after(*keys("flo", "127.0.7.1")) == 0
    assert attempts.retry_after(*keys("flo", "127.0.6.9")) == 299.0
    assert list(attempts.dump()["attempts"]) == ["addr:127.0.6.9"]


async def test_past_the_queue_a_sign_in_is_told_to_wait_and_then_signs_in(
    console_rig: ConsoleRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check of flo's password held (as scrypt's are slow under a flood) and no room to wait
    for her name: the next sign-in is told 503 with Retry-After, and nothing is counted against
    its address. With room to wait, the right password from a new address waits its turn and
    signs in: the name's queue never locks anyone out."""
    real, entered, release = login.verify_password, threading.Semaphore(0), threading.Event()

    def verify(password: str, encoded: str) -> bool:
        if password == HELD:
            entered.release()
            release.wait(GUARD)
        return real(password, encoded)

    monkeypatch.setattr(login, "verify_password", verify)
    checks = console_rig.console.login.checks
    monkeypatch.setattr(checks, "waiting_per_name", 0)
    guesser = client_from(console_rig, "127.0.6.20")
    try:
        held = asyncio.ensure_future(guesser.post("/api/login", json={"user": "flo", "password": HELD}))
        assert await asyncio.to_thread(entered.acquire, True, GUARD)
        status, after = await _try(console_rig, "127.0.6.21", PASSWORD_WRONG)
        assert status == 503 and after == str(login.BUSY_RETRY_S)
        # Other names keep their own checks meanwhile.
        assert (await _try(console_rig, "127.0.6.22", PASSWORDS["dan"], user="dan"))[0] == 200
        monkeypatch.setattr(checks, "waiting_per_name", 1)
        waiting = asyncio.ensure_future(_try(console_rig, "127.0.6.21", PASSWORDS["flo"]))
        release.set()
        assert (await held).status == 401 and (await waiting)[0] == 200
        # Neither its 503 nor its sign-in is counted against 127.0.6.21: it still has its 5.
        for _ in range(5):
            assert (await _try(console_rig, "127.0.6.21", PASSWORD_WRONG))[0] == 401
    finally:
        release.set()
        await guesser.close()
    assert not checks.lanes and checks.admitted == 0  # every turn given back


async def test_a_queue_of_password_checks_does_not_keep_a_person_from_their_own_address(
    console_rig: ConsoleRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guesses at other names from other addresses fill both password checks (held here until
    released); flo at her own terminal has a check of her own and signs in meanwhile. Before,
    she waited behind them (here: till the guard fails the test)."""
    real, entered, release = login.verify_password, threading.Semaphore(0), threading.Event()

    def verify(password: str, encoded: str) -> bool:
        if password == HELD:
            entered.release()
            release.wait(GUARD)  # a slow check, as scrypt's are under a flood of them
        return real(password, encoded)

    async with client_from(console_rig, "127.0.6.1") as c:
        await sign_in(c, "flo")  # her terminal
    monkeypatch.setattr(login, "verify_password", verify)
    guessers = [client_from(console_rig, f"127.0.6.{20 + i}") for i in range(login.HASHING)]
    try:
        held = [
            asyncio.ensure_future(g.post("/api/login", json={"user": f"nobody-{i}", "password": HELD}))
            for i, g in enumerate(guessers)
        ]
        for _ in held:  # both checks taken by the guesses (one name each: one check per name)
            assert await asyncio.to_thread(entered.acquire, True, GUARD)
        async with asyncio.timeout(GUARD), client_from(console_rig, "127.0.6.1") as c:
            await sign_in(c, "flo")
        assert not any(h.done() for h in held)  # still being checked
        release.set()
        assert [(await h).status for h in held] == [401] * login.HASHING
    finally:
        release.set()
        await asyncio.gather(*(g.close() for g in guessers))


GUARD = 30.0  # failure guards only
HELD = "held-guess-wrong"
PASSWORD_WRONG = "wrong-guess-wrong"
