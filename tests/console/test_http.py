"""The console's HTTP contract, line by line, over a real socket: sign-in and its cookie, the
rate limit on failed sign-ins, 401 and 403, cross-site requests, oversized bodies, unknown
actions, the journal naming the signed-in person, and no traceback ever."""

from __future__ import annotations

import json
import re

import aiohttp
import pytest
from structlog.testing import capture_logs

from controller import logs
from controller.journal import Journal
from controller.supervisor.supervisor import Supervisor
from controller.table.asking import dealer_cards
from tests.console.conftest import PASSWORDS, ConsoleRig, sign_in


@pytest.fixture(autouse=True)
def _logs() -> None:
    logs.configure(cache=False)  # capture_logs misses cached loggers


async def test_sign_in_sets_a_strict_http_only_expiring_cookie(console_rig: ConsoleRig) -> None:
    async with console_rig.client() as c:
        async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]}) as r:
            assert r.status == 200
            body = await r.json()
            cookie = r.headers["Set-Cookie"]
        assert body["ok"] and body["user"] == "flo" and body["role"] == "floor" and body["csrf"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=43200" in cookie
        assert PASSWORDS["flo"] not in cookie
        async with c.get("/api/display") as r:
            d = await r.json()
        assert r.status == 200 and d["table"] and d["signed_in"] == {"user": "flo", "role": "floor"}
        assert d["people"] == [{"user": "flo", "role": "floor"}]
        async with c.post("/api/logout", json={}, headers={"X-CSRF-Token": body["csrf"]}) as r:
            assert r.status == 200
        async with c.get("/api/display") as r:
            assert r.status == 401 and (await r.json()) == {"ok": False, "error": "not signed in"}


async def test_a_session_expires(console_rig: ConsoleRig) -> None:
    async with console_rig.client() as c:
        await sign_in(c, "dan")
        console_rig.clock.now += 12 * 3600
        async with c.get("/api/display") as r:
            assert r.status == 401


async def test_failed_sign_ins_are_refused_then_rate_limited(console_rig: ConsoleRig) -> None:
    with capture_logs() as logged:
        async with console_rig.client() as c:
            for password in ["wrong-1", "wrong-2", "wrong-3", "wrong-4", "wrong-5"]:
                async with c.post("/api/login", json={"user": "flo", "password": password}) as r:
                    assert r.status == 401 and (await r.json())["error"] == "wrong name or password"
            async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]}) as r:
                assert r.status == 429 and int(r.headers["Retry-After"]) > 0
                assert "too many failed sign-ins" in (await r.json())["error"]
            console_rig.clock.now += 301  # the window has passed
            await sign_in(c, "flo")
    assert not any("wrong-" in json.dumps(e, default=str) for e in logged)  # no password in a log


async def test_an_unknown_name_is_refused_like_a_wrong_password(console_rig: ConsoleRig) -> None:
    with capture_logs() as logged:
        async with console_rig.client() as c:
            # The first: a password typed into the name field. It must not reach the log.
            bodies = [{"user": "mypassword1", "password": ""}, {"user": "flo"}, {"user": 3, "password": []}]
            for body in bodies:
                async with c.post("/api/login", json=body) as r:
                    assert r.status == 401 and (await r.json())["error"] == "wrong name or password"
    assert [e["user"] for e in logged if e["event"] == "login_failed"] == [None, "flo", None]
    assert "mypassword1" not in json.dumps(logged, default=str)


async def test_actions_need_a_session_and_the_role(console_rig: ConsoleRig) -> None:
    async with console_rig.client() as c:
        async with c.post("/api/actions/reshuffle_ordered", json={}) as r:
            assert r.status == 401
        csrf = await sign_in(c, "dan")
        h = {"X-CSRF-Token": csrf}
        async with c.post("/api/actions/reshuffle_ordered", json={}, headers=h) as r:
            assert r.status == 403 and (await r.json()) == {
                "ok": False, "error": "reshuffle_ordered: the dealer role may not do this"}  # fmt: skip
        async with c.post("/api/actions/launch_missiles", json={}, headers=h) as r:
            body = await r.json()
            assert r.status == 404 and body["ok"] is False and body["error"].startswith("unknown command")
        async with c.post("/api/actions/first_player_seated", json={"seat": "one"}, headers=h) as r:
            assert r.status == 200 and (await r.json()) == {
                "ok": False, "error": "first_player_seated: argument 'seat' must be an integer"}  # fmt: skip


async def test_the_journal_records_the_signed_in_person(console_rig: ConsoleRig) -> None:
    sup = console_rig.rig.supervisor
    async with console_rig.client() as c:
        csrf = await sign_in(c, "flo")
        # The client cannot name someone else: `who` is not an argument of any action.
        async with c.post("/api/actions/reshuffle_ordered", json={"who": "mallory"},
                          headers={"X-CSRF-Token": csrf}) as r:  # fmt: skip
            assert (await r.json())["error"] == "reshuffle_ordered: unknown argument 'who'"
        async with c.post(
            "/api/actions/inspection_verified",
            json={"back": "red", "dealer": "dan"},
            headers={"X-CSRF-Token": csrf},
        ) as r:
            result = await r.json()
    assert result["ok"] is True and "decks_opened" in result["events"], result
    assert sup.jt is not None
    with Journal.open(sup.journal_path, create=False, readonly=True) as j:
        opened = [r.payload for r in j.records() if r.kind == "decks_opened"]
    assert opened[-1]["floorperson"] == "flo" and opened[-1]["dealer"] == "dan"
    # Every action says who took it, in the same transaction as the events it led to; an action
    # whose input carries no person (a new dealer's name is not who announced it) too.
    async with console_rig.client() as c:
        csrf = await sign_in(c, "dan")
        async with c.post(
            "/api/actions/new_dealer", json={"name": "eve"}, headers={"X-CSRF-Token": csrf}
        ) as r:
            assert (await r.json())["ok"] is True
    with Journal.open(sup.journal_path, create=False, readonly=True) as j:
        kinds = [(r.kind, r.payload) for r in j.records()]
    taken = [p for k, p in kinds if k == "action_taken"]
    assert taken == [{"action": "inspection_verified", "who": "flo", "role": "floor"},
                     {"action": "new_dealer", "who": "dan", "role": "dealer"}]  # fmt: skip
    assert kinds[-2:] == [("action_taken", taken[-1]), ("new_dealer", {"name": "eve"})]


async def test_cross_site_requests_are_refused(console_rig: ConsoleRig) -> None:
    async with console_rig.client() as c:
        async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]},
                          headers={"Origin": "http://evil.example"}) as r:  # fmt: skip
            assert r.status == 403 and (await r.json())["error"] == "cross-site request refused"
        async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]},
                          headers={"Origin": "http://127.0.0.1.evil.example"}) as r:  # fmt: skip
            assert r.status == 403
        # Behind a TLS proxy: the browser's origin is https, the console's own scheme http.
        host = console_rig.url.removeprefix("http://")
        proxied = {"Origin": f"https://{host}", "X-Forwarded-Proto": "https"}
        async with c.post(
            "/api/login", json={"user": "flo", "password": PASSWORDS["flo"]}, headers=proxied
        ) as r:
            assert r.status == 200 and "Secure" in r.headers["Set-Cookie"]
        c.cookie_jar.clear()
        # A form on another site can post text/plain without a preflight: not JSON, refused.
        async with c.post("/api/login", data="user=flo", headers={"Content-Type": "text/plain"}) as r:
            assert r.status == 415
        csrf = await sign_in(c, "flo")
        for headers in [
            {},
            {"X-CSRF-Token": "guess"},
            {"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"},
        ]:
            async with c.post("/api/actions/reshuffle_ordered", json={}, headers=headers) as r:
                assert r.status == 403, headers
        async with c.get("/") as r:
            assert r.headers["X-Frame-Options"] == "DENY" and "default-src 'self'" in r.headers[
                "Content-Security-Policy"]  # fmt: skip


async def test_only_its_address_and_allowed_names_are_answered(console_rig: ConsoleRig) -> None:
    """DNS rebinding: a site whose name resolves to the console gets 421 and nothing else."""
    async with console_rig.client() as c:
        for host in ["evil.example", "evil.example:8470", "127.0.0.1.evil.example"]:
            async with c.post("/api/login", json={"user": "flo", "password": PASSWORDS["flo"]},
                              headers={"Host": host}) as r:  # fmt: skip
                assert r.status == 421 and (await r.json())["ok"] is False and "Set-Cookie" not in r.headers
        for host in ["localhost:8470", "127.0.0.1"]:
            async with c.get("/", headers={"Host": host}) as r:
                assert r.status == 200
    console_rig.console.allow_hosts = frozenset({"table-12.pit.example"})
    async with console_rig.client() as c, c.get("/", headers={"Host": "Table-12.Pit.Example."}) as r:
        assert r.status == 200


async def test_oversized_and_malformed_bodies_are_refused_in_one_line(console_rig: ConsoleRig) -> None:
    async with console_rig.client() as c:
        big = json.dumps({"user": "flo", "password": "x" * 20_000})
        async with c.post("/api/login", data=big, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 413 and (await r.json())["ok"] is False
        csrf = await sign_in(c, "flo")
        h = {"X-CSRF-Token": csrf, "Content-Type": "application/json"}
        for body, status in [(b"{not json", 400), (b"[1, 2]", 400), (b"x" * 9000, 413)]:
            async with c.post("/api/actions/new_dealer", data=body, headers=h) as r:
                text = await r.text()
                assert r.status == status and "\n" not in text.strip() and "Traceback" not in text


async def test_a_bug_is_answered_without_a_traceback(console_rig: ConsoleRig) -> None:
    sup = console_rig.rig.supervisor

    async def broken(*args: object) -> dict[str, object]:
        raise RuntimeError("secret internals")

    sup.command = broken  # type: ignore[method-assign]
    async with console_rig.client() as c:
        csrf = await sign_in(c, "flo")
        with capture_logs() as logged:
            async with c.post("/api/actions/reshuffle_ordered", json={}, headers={"X-CSRF-Token": csrf}) as r:
                text = await r.text()
    assert r.status == 500 and json.loads(text) == {"ok": False, "error": "internal error"}
    assert "secret" not in text and "Traceback" not in text
    assert any(e.get("event") == "console_failed" and e.get("error") == "RuntimeError" for e in logged)


async def test_a_removed_person_is_signed_out(console_rig: ConsoleRig) -> None:
    from controller.console.users import load_users, save_users

    async with console_rig.client() as c:
        await sign_in(c, "dan")
        users = load_users(console_rig.users)
        del users["dan"]
        save_users(console_rig.users, users)
        async with c.get("/api/display") as r:
            assert r.status == 401


async def test_events_stream_the_display_and_end_at_shutdown(console_rig: ConsoleRig) -> None:
    async with console_rig.client() as c:
        csrf = await sign_in(c, "flo")
        async with c.get("/api/events", timeout=aiohttp.ClientTimeout(total=30)) as r:
            assert r.headers["Content-Type"] == "text/event-stream"
            first = await _event(r)
            assert first["round"] == 0 and first["dealer"] is None
            async with c.post(
                "/api/actions/new_dealer", json={"name": "dana"}, headers={"X-CSRF-Token": csrf}
            ):
                pass
            while (await _event(r))["dealer"] != "dana":
                pass
            await console_rig.console.stop()  # the on_shutdown hook ends the open stream
            assert await r.content.read() == b""


async def _event(r: aiohttp.ClientResponse) -> dict[str, object]:
    data = None
    while True:
        line = (await r.content.readline()).decode()
        if line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "\n" and data is not None:
            return data


CARD = re.compile(r"\b(10|[2-9AJQK])[SHDC]\b|rank")


def settled_cards(sup: Supervisor) -> set[str]:
    assert sup.jt is not None
    settled = [r.payload for r in sup.jt.journal.records() if r.kind == "round_settled"]
    if not settled:
        return set()
    last = settled[-1]
    hands = [h["cards"] for b in last["boxes"] for h in b["hands"]]
    return {str(c) for cards in [last["dealer"]["cards"], *hands] for c in cards}


async def test_the_display_shows_the_layout_and_never_a_secret_card(console_rig: ConsoleRig) -> None:
    """Through whole rounds, every state the dealer display could show names only the cards face
    up at the table (the players' cards, the dealer's up card, the hole card once turned): the hole
    card before that, the reader's answer and the shoe's order are not public, and none is read."""
    rig = console_rig.rig
    table = rig.supervisor.table
    await rig.dealer.open_table()
    seen: list[tuple[str, list[str], set[str]]] = []
    async with console_rig.client() as c:
        await sign_in(c, "dan")

        async def look() -> None:
            async with c.get("/api/display") as r:
                text = await r.text()
            rnd = table.round
            public = settled_cards(rig.supervisor)  # the last round's, all face up by now
            dealer: list[str] = []
            if rnd is not None:
                dealer = dealer_cards(rnd.state)
                public |= {str(card) for b in rnd.state.boxes for h in b.hands for card in h.cards}
                public |= set(dealer)
            seen.append((text, dealer, public))

        rig.link.pace = look
        await rig.dealer.play(3)
    assert len(seen) > 30 and any('"decision"' in text for text, _, _ in seen)
    for text, dealer, public in seen:
        shown = json.loads(text)["layout"]
        assert shown["dealer"]["cards"] == dealer  # "hole" until it is turned
        assert {m.group(0) for m in CARD.finditer(text)} <= public, text
    assert any("hole" in dealer for _, dealer, _ in seen)
    assert any(b["hands"] for text, _, _ in seen for b in json.loads(text)["layout"]["boxes"] if "hands" in b)


async def test_sessions_are_bounded(console_rig: ConsoleRig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("controller.console.sessions.MAX_SESSIONS", 4)  # a share of 2 for each role
    async with console_rig.client() as first, console_rig.client() as second, console_rig.client() as third:
        for c in (first, second, third):
            await sign_in(c, "dan")
        assert len(console_rig.console.people.sessions) == 2
        async with first.get("/api/display") as r:
            assert r.status == 401  # the oldest session ended
        async with third.get("/api/display") as r:
            assert r.status == 200
