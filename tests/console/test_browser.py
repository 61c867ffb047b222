"""The console in a real browser (Debian's chromium, headless, driven by Playwright), as a dealer
and a floorperson use it: the floor signs in, acknowledges an alarm and takes the shuffler out of
order, the dealer shuffles by hand with the cut of 673a.5; a whole round dealt from the dealer
display (the boxes picked on the layout, the decisions on its buttons); the keypad-failed round;
a void confirmed with a reason; the appliance going away and coming back; axe-core on both pages.

With CONSOLE_SCREENSHOTS=DIR the tests also save the pages as PNGs (docs/console.md's; the
script bench/console_screenshots.sh runs them so).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from controller.console.display import turn as worded
from controller.console.server import Console
from controller.journal import Journal
from controller.supervisor.health import DeviceHealth
from controller.table.asking import asking
from devices.profiles import DeviceKind
from tests.console.conftest import PASSWORDS, ConsoleRig, console_for

AXE = Path(__file__).with_name("vendor") / "axe.min.js"  # axe-core from the npm registry
SHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
TIMEOUT_MS = 20_000  # failure guard only
TABLET = {"width": 1024, "height": 768}
MAX_ASKS = 200


async def open_signed_in(browser: Browser, url: str, user: str) -> Page:
    # The page's strict CSP refuses the inline script axe-core is injected as: bypassed here (the
    # CSP itself is checked in test_http.py); the page's own script is from the console either way.
    context = await browser.new_context(viewport=TABLET, bypass_csp=True)
    context.set_default_timeout(TIMEOUT_MS)
    page = await context.new_page()
    await page.goto(url)
    await sign_in(page, user)
    return page


async def sign_in(page: Page, user: str) -> None:
    await page.fill("#login input[name=user]", user)
    await page.fill("#login input[name=password]", PASSWORDS[user])
    await page.click("#login button")
    await expect(page.locator("#whoami")).to_contain_text(user)
    await expect(page.locator("#link")).to_have_text("live")


async def act(page: Page, action: str, **args: str) -> None:
    """Fill the action's form on the page, press its button, and wait for its result."""
    form = await action_form(page, action)
    for name, value in args.items():
        if name == "seat":
            await form.locator(f"label.seat:has(input[value='{value}'])").click()
            continue
        field = form.locator(f"[name={name}]")
        if await field.evaluate("e => e.tagName") == "SELECT":
            await field.select_option(value)
        else:
            await field.fill(value)
    await pressed(page, form.locator("button"), action)


async def action_form(page: Page, action: str) -> Any:
    """The action's form, its page's "More actions" menu opened when it is there."""
    form = page.locator(f"form.action[data-action={action}]")
    if await form.evaluate("f => f.closest('details') !== null && !f.closest('details').open"):
        await page.locator("#more summary").click()
    return form


async def pressed(page: Page, button: Any, action: str) -> None:
    """Press ``button`` and wait for the table's answer to ``action`` on the page."""
    await page.evaluate("document.getElementById('result').textContent = ''")
    await button.click()
    said = re.escape(action.replace("_", " "))
    await expect(page.locator("#result")).to_have_text(re.compile(f"^{said}( [a-z ]+)?: done$"))


async def shot(page: Page, name: str) -> None:
    if SHOTS:
        await page.screenshot(path=str(Path(SHOTS) / name), full_page=True)


async def no_serious_violations(page: Page) -> None:
    """axe-core on the page as it is: no serious or critical accessibility violation."""
    await page.add_script_tag(path=str(AXE))
    found = await page.evaluate(
        "async () => (await axe.run(document)).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', '))"
    )
    assert found == [], found


def journal(cr: ConsoleRig, kind: str) -> list[dict[str, Any]]:
    sup = cr.rig.supervisor
    with Journal.open(sup.journal_path, create=False, readonly=True) as j:
        return [dict(r.payload) for r in j.records() if r.kind == kind]


async def shown_ask(page: Page, cr: ConsoleRig) -> dict[str, Any]:
    """The table's ask now, once the page shows it in the dealer's words."""
    table = cr.rig.supervisor.table
    ask = asking(table)
    t = worded(ask)
    text = f"{t['who']} hand {t['hand']}: {t['what']}" if "hand" in t else f"{t['who']}: {t['what']}"
    await expect(page.locator("#turn")).to_have_text(text)
    return ask


async def deal_round_from_display(
    page: Page, cr: ConsoleRig, seen: list[str], *, sensors: bool = True, shots: str = "console-dealer"
) -> None:
    """One round dealt by a person standing at the table: the chips on box 1, box 2 picked on the
    layout, Start Game, each decision and offer on the display's buttons; the cards drawn from the
    shoe and the hole card into the reader by hand (the simulated devices)."""
    rig, sup = cr.rig, cr.rig.supervisor
    dealer, table = rig.dealer, sup.table
    start = table.round_no
    hole = None
    for _ in range(MAX_ASKS):
        if table.round_no > start and not table.in_round:
            return
        ask = await shown_ask(page, cr)
        what = ask["what"]
        seen.append(what)
        buttons = page.locator("#now button")
        if what == "bets":
            await dealer.until(lambda: table.shoe_back is not None, "a batch in the shoe")
            assert await dealer.hands.shoe_holds(str(table.shoe_back), 30.0)
            dealer.hands.place_bets(1, side=False)  # chips on box 1's main spot only
            box1, box2 = page.locator("#boxes [data-seat='1']"), page.locator("#boxes [data-seat='2']")
            if sensors:
                await rig.link.touched(DeviceKind.KEYPAD)
                await expect(box1).to_have_attribute("aria-pressed", "true")  # from the sensors
            else:  # no sensor reading: the dealer picks the boxes with chips on the layout
                await box1.click()
            await expect(box1).to_have_attribute("aria-pressed", "true")
            await expect(box2).to_have_attribute("aria-pressed", "false")
            await box2.click()  # the player on box 2 bets too: picked on the layout
            await expect(buttons).to_have_text(["Start Game (boxes 1, 2)"])
            if shots == "console-dealer":  # (with the keypad failed the picture is the same)
                await shot(page, "console-dealer-bets.png")
            await pressed(page, buttons.first, "start_round")
        elif what in ("card", "burn"):
            card = await dealer.draw()
            if ask.get("seat") == 0 and ask.get("face_up") is False:  # the dealer is seat 0
                hole = card
        elif what == "reader":
            assert hole is not None
            dealer.hands.hole_into_reader(hole)
            await rig.link.touched(DeviceKind.READER)
        elif what == "decision":
            legal = sorted(ask["legal"])
            keys = [await f.get_attribute("data-key") for f in await page.locator("#now form").all()]
            assert sorted(k for k in keys if k) == legal  # a button for each legal choice, no more
            if seen.count("decision") == 1:
                await shot(page, f"{shots}.png")
            choice = "stand" if "stand" in legal else legal[0]
            await pressed(page, page.locator(f"#now form[data-key={choice}] button"), "key")
        elif what == "offer":
            await pressed(page, page.locator("#now form[data-key=next] button"), "key")
        else:
            await dealer.until(lambda a=ask: asking(table) != a, f"the table past {what}")
    raise AssertionError(f"the round did not end; seen {seen}")


async def test_a_whole_round_dealt_from_the_display_by_hand(
    console_rig: ConsoleRig, browser: Browser
) -> None:
    rig, sup = console_rig.rig, console_rig.rig.supervisor
    await rig.dealer.open_table()
    page = await open_signed_in(browser, console_rig.url + "/", "dan")
    await expect(page.locator("#batches")).to_contain_text("in the shoe, being dealt")
    # Only what fits the moment: no misdeal of DJ Wild, no hand shuffle while the shuffler works,
    # no floor action; and every target big enough to touch.
    names = await page.locator("form.action").evaluate_all("fs => fs.map(f => f.dataset.action)")
    assert "misdeal_determined" not in names and "hand_shuffled" not in names and "void_round" not in names
    assert "held_card_exposed" in names and "key" in names
    seen: list[str] = []
    await deal_round_from_display(page, console_rig, seen)
    assert {"bets", "card", "decision"} <= set(seen), seen
    (settled,) = journal(console_rig, "round_settled")
    assert [b["seat"] for b in settled["boxes"]] == [1, 2]
    # The layout has emptied; the round stays in view, with every hand's result, for paying.
    await expect(page.locator("#last-h")).to_have_text(f"Last round ({settled['round']})")
    last = page.locator("#last-round")
    results = [h["result"] for b in settled["boxes"] for h in b["hands"]]
    await expect(last.locator(".result")).to_have_text(results)
    for box in settled["boxes"]:
        await expect(last).to_contain_text(f"Box {box['seat']}")
    await shot(page, "console-dealer-settled.png")
    await expect(page.locator("#title")).to_contain_text(f"round {sup.table.round_no}")
    sizes = await page.locator("button:visible").evaluate_all(
        "bs => bs.map(b => b.getBoundingClientRect().height)"
    )
    assert min(sizes) >= 44, sizes
    ask_px = await page.locator("#turn").evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert ask_px >= 32
    await no_serious_violations(page)


async def test_the_keypad_fails_and_the_round_goes_on_with_the_display_buttons(
    console_rig: ConsoleRig, browser: Browser
) -> None:
    rig, sup = console_rig.rig, console_rig.rig.supervisor
    await rig.dealer.open_table()
    page = await open_signed_in(browser, console_rig.url + "/", "dan")
    keypad = rig.sim.devices["keypad"].register_sim
    assert keypad is not None
    keypad.faults.silent = True  # the keypad answers nothing any more
    for _ in range(60):
        if sup.health["keypad"] is DeviceHealth.FAULT:
            break
        rig.clock.advance(1.0)
        await sup.settle("keypad")
    assert sup.health["keypad"] is DeviceHealth.FAULT
    alarm = page.locator("#alarms li", has_text="keypad has failed")
    await expect(alarm).to_contain_text("673a.7(i)")
    await expect(alarm).to_contain_text("the dealer keys Start Game and the decisions on the dealer display")
    await expect(page.locator("#status")).to_contain_text("keypad: failed: key the decisions here")
    seen: list[str] = []
    await deal_round_from_display(page, console_rig, seen, sensors=False, shots="console-keypad-failed")
    assert "decision" in seen, seen
    assert sup.health["keypad"] is DeviceHealth.FAULT  # the whole round without it


async def test_the_floor_voids_a_round_after_confirming_with_a_reason(
    tmp_path: Path, browser: Browser
) -> None:
    async with console_for(tmp_path, "double-attack") as cr:
        rig, sup = cr.rig, cr.rig.supervisor
        await rig.dealer.open_table()
        dealer = await open_signed_in(browser, cr.url + "/", "dan")
        floor = await open_signed_in(browser, cr.url + "/floor", "flo")
        sup_round: list[int] = []

        async def until_decision() -> None:
            if sup.table.in_round and asking(sup.table)["what"] == "decision" and not sup_round:
                sup_round.append(sup.table.round_no)
                raise _Stop

        rig.link.pace = until_decision
        with pytest.raises(_Stop):
            await rig.dealer.play_round()
        rig.link.pace = None
        await shown_ask(dealer, cr)
        form = await action_form(floor, "void_round")
        await expect(form.locator("[name=section]")).to_have_value("665a.13(h)(1)")  # this game's
        await form.locator("button").click()
        dialog = floor.locator("#confirm")
        await expect(dialog).to_be_visible()
        await expect(dialog).to_contain_text("cannot be undone")
        await floor.locator("#confirm-no").click()  # changed their mind: nothing happens
        await expect(dialog).to_be_hidden()
        assert sup.table.in_round and not journal(cr, "round_voided")
        await form.locator("button").click()
        await floor.fill("#confirm input[name=reason]", "reader misused: cards seen by a player")
        await shot(floor, "console-floor-void.png")
        await floor.evaluate("document.getElementById('result').textContent = ''")
        await floor.locator("#confirm-yes").click()
        await expect(floor.locator("#result")).to_have_text("void round: done")
        assert not sup.table.in_round
        (voided,) = journal(cr, "round_voided")
        assert voided["by"] == "flo"
        taken = [t for t in journal(cr, "action_taken") if t["action"] == "void_round"]
        assert taken == [
            {
                "action": "void_round",
                "who": "flo",
                "role": "floor",
                "reason": "reader misused: cards seen by a player",
            }
        ]
        await expect(dealer.locator("#turn")).to_have_text("players: place wagers, then Start Game")
        await no_serious_violations(floor)


class _Stop(Exception):
    """Stops the virtual dealer at the moment a test wants."""


async def test_the_pages_say_when_the_table_is_gone_and_recover_by_themselves(
    console_rig: ConsoleRig, browser: Browser
) -> None:
    rig, sup = console_rig.rig, console_rig.rig.supervisor
    await rig.dealer.open_table()
    page = await open_signed_in(browser, console_rig.url + "/", "dan")
    floor = await open_signed_in(browser, console_rig.url + "/floor", "flo")
    await expect(page.locator("#conn")).to_be_hidden()
    host, port = console_rig.url.removeprefix("http://").split(":")
    await console_rig.console.stop()  # `run` stops: its console with it
    banner = page.locator("#conn")
    await expect(banner).to_be_visible()
    await expect(floor.locator("#conn")).to_contain_text("Connection to the table lost")
    await expect(banner).to_contain_text("Connection to the table lost: do not deal from this screen")
    await expect(page.locator("#link")).to_have_text("offline")  # never "live" from memory
    assert await page.locator("#main").evaluate("m => m.inert")  # nothing under it can be pressed
    await shot(page, "console-lost.png")
    await rig.dealer.play_round()  # the table goes on meanwhile (another console, the keypad)
    # `run` is back: a new console, which keeps its sessions beside the journal: the pages pick
    # up the table as it is now, still signed in.
    console_rig.console = Console(sup, console_rig.users, clock=console_rig.clock)
    await console_rig.console.start(host, int(port))
    await expect(banner).to_be_hidden()
    await expect(page.locator("#link")).to_have_text("live")
    await expect(page.locator("#title")).to_contain_text(f"round {sup.table.round_no}")
    await expect(floor.locator("#conn")).to_be_hidden()
    # Back once more, but without the files it kept (a new appliance, say): the pages say plainly
    # that their sessions are gone.
    await console_rig.console.stop()
    await expect(banner).to_be_visible()
    await rig.dealer.play_round()
    fresh = sup.journal_path.with_name("elsewhere.db")
    console_rig.console = Console(sup, console_rig.users, clock=console_rig.clock, state=fresh)
    await console_rig.console.start(host, int(port))
    await expect(page.locator("#login-why")).to_have_text(
        "Signed out, sign in again (the table restarted or the session ended)."
    )
    await expect(banner).to_be_hidden()
    await expect(floor.locator("#login-why")).to_contain_text("Signed out, sign in again")
    await sign_in(page, "dan")
    await expect(page.locator("#title")).to_contain_text(f"round {sup.table.round_no}")
    await shown_ask(page, console_rig)
    await no_serious_violations(page)


async def test_the_floor_acknowledges_an_alarm_and_a_batch_is_shuffled_by_hand(
    console_rig: ConsoleRig, browser: Browser
) -> None:
    rig, sup = console_rig.rig, console_rig.rig.supervisor
    rig.dealer.shuffler.faults.miscount = -1  # the shuffler reports one card short every time
    floor = await open_signed_in(browser, console_rig.url + "/floor", "flo")
    await expect(floor.locator("#people")).to_contain_text("flo (floor)")
    for back in sup.table.batches:
        await act(floor, "inspection_verified", back=back, dealer="dan")  # 673a.4
    await rig.dealer.until(lambda: bool(sup.table.alarms), "the shuffler's count")
    (alarm,) = sup.table.alarms.values()
    row = floor.locator(f"#alarms li[data-alarm='{alarm.id}']")
    await expect(row).to_contain_text(f"{alarm.section} the shuffler counted")
    await expect(row).to_contain_text("floor: count the batch and reshuffle it")
    await shot(floor, "console-floor.png")
    await no_serious_violations(floor)
    await row.locator("button.ack").click()
    await expect(floor.locator("#alarms")).to_have_text("none")
    # The result is said where the button was pressed, not only at the top of the page.
    await expect(floor.locator("#alarms-box .said")).to_have_text("alarm acknowledged: done")
    assert alarm.acknowledged_by == "flo"

    # Out of order is destructive: confirmed, with a reason.
    form = floor.locator("#actions form[data-action=mark_out_of_order]")
    await form.locator("[name=device]").select_option("shuffler")
    await form.locator("button").click()
    # The dialog says what is true: "device restored" brings it back.
    doc = floor.locator("#confirm-doc")
    await expect(doc).to_contain_text("until the floor restores it (device restored)")
    await expect(doc).not_to_contain_text("cannot be undone")
    await floor.fill("#confirm input[name=reason]", "miscounts every batch")
    await floor.locator("#confirm-yes").click()
    await expect(floor.locator("#devices")).to_contain_text("shuffler (shuffler): out of order")
    assert sup.table.shuffler_out_of_order  # 673a.13(l)

    dealer = await open_signed_in(browser, console_rig.url + "/", "dan")
    await expect(floor.locator("#people")).to_contain_text("dan (dealer)")
    size = sup.table.batches["red"].size
    await act(dealer, "first_player_seated", seat="2")  # 673a.5(c)(1): the first player cuts
    now = dealer.locator("#now button")
    await pressed(dealer, now.filter(has_text="the red batch shuffled by hand"), "hand_shuffled")
    turn = dealer.locator("#turn")
    await expect(turn).to_have_text("box 2: the cut of the red batch is offered to box 2")
    await pressed(dealer, now.filter(has_text="box 2 refuses the cut"), "cut_refused")  # 673a.5(b)
    await expect(turn).to_have_text("dealer: the cut of the red batch is offered to dealer")
    await dealer.fill("#now input[name=at]", "100")  # 673a.5(d): 10 or more cards from either end
    await pressed(dealer, now.filter(has_text="cut made"), "cut_made")
    await expect(turn).to_have_text("dealer: place the cover card")
    await dealer.fill("#now input[name=from_bottom]", str(size // 2))
    await pressed(dealer, now.filter(has_text="cover card placed"), "cover_card_placed")
    await pressed(dealer, now.filter(has_text="the red batch into the shoe"), "batch_to_shoe")
    await expect(dealer.locator("#status")).to_contain_text(f"red batch, {size} cards")
    assert sup.table.shoe_back == "red"
    started = journal(console_rig, "shuffle_started")
    assert started[-1].get("by_hand") == "dan"
    # A dealer's page offers no floor action, and the server refuses one sent anyway.
    assert await dealer.locator("form[data-action=reshuffle_ordered]").count() == 0
    await dealer.evaluate("run('reshuffle_ordered', {})")
    await expect(dealer.locator("#result")).to_have_text("reshuffle_ordered: the dealer role may not do this")
    assert not sup.table.reshuffle_due


async def test_a_silent_connection_is_declared_lost_and_picked_up_again(
    console_rig: ConsoleRig, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network cut closes nothing: the stream just goes quiet. The page does not wait for TCP
    to notice; two seconds without a word and it covers itself, then reconnects."""
    monkeypatch.setattr("controller.console.streams.HEARTBEAT_S", 3600.0)  # the table says nothing
    page = await open_signed_in(browser, console_rig.url + "/", "dan")
    await expect(page.locator("#conn")).to_contain_text("Connection to the table lost")
    await expect(page.locator("#conn-detail")).to_contain_text("no word from the table for 2 s")
    await expect(page.locator("#link")).to_have_text("offline")
    monkeypatch.setattr("controller.console.streams.HEARTBEAT_S", 1.0)  # the network is back
    await expect(page.locator("#conn")).to_be_hidden()
    await expect(page.locator("#link")).to_have_text("live")
    await shown_ask(page, console_rig)
