"""The console in a real browser (Debian's chromium, headless, driven by Playwright): the floor
signs in, acknowledges an alarm and takes the shuffler out of order, the dealer shuffles by hand
with the cut of 673a.5 into the shoe; the dealer display follows a round played by the virtual
dealer; a dealer is refused a floor action.

With CONSOLE_SCREENSHOTS=DIR the tests also save the two pages as PNGs (docs/console.md's).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from controller.console.display import turn as worded
from controller.table.asking import asking
from tests.console.conftest import PASSWORDS, ConsoleRig

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
TIMEOUT_MS = 20_000  # failure guard only


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        # Debian's build; nothing is downloaded (no `playwright install`).
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield b
        finally:
            await b.close()


async def open_signed_in(browser: Browser, url: str, user: str) -> Page:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = await context.new_page()
    await page.goto(url)
    await page.fill("#login input[name=user]", user)
    await page.fill("#login input[name=password]", PASSWORDS[user])
    await page.click("#login button")
    await expect(page.locator("#whoami")).to_contain_text(user)
    return page


async def act(page: Page, action: str, **args: str) -> None:
    """Fill the action's form on the page, press its button, and wait for its result."""
    form = page.locator(f"form[data-action={action}]")
    for name, value in args.items():
        field = form.locator(f"[name={name}]")
        if await field.evaluate("e => e.tagName") == "SELECT":
            await field.select_option(value)
        else:
            await field.fill(value)
    await form.locator("button").click()
    await expect(page.locator("#result")).to_have_text(f"{action}: done")


async def shot(page: Page, name: str) -> None:
    if SHOTS:
        await page.screenshot(path=str(Path(SHOTS) / name), full_page=True)


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
    await row.locator("button.ack").click()
    await expect(floor.locator("#alarms")).to_have_text("none")
    assert alarm.acknowledged_by == "flo"

    await act(floor, "mark_out_of_order", device="shuffler")  # 673a.13(l)
    await expect(floor.locator("#devices")).to_contain_text("shuffler (shuffler): out_of_order")
    assert sup.table.shuffler_out_of_order

    dealer = await open_signed_in(browser, console_rig.url + "/", "dan")
    await expect(floor.locator("#people")).to_contain_text("dan (dealer)")
    size = sup.table.batches["red"].size
    await act(dealer, "first_player_seated", seat="2")  # 673a.5(c)(1): the first player cuts
    await act(dealer, "hand_shuffled", back="red")
    turn = dealer.locator("#turn")
    await expect(turn).to_have_text("box 2: the cut of the red batch is offered to box 2")
    await act(dealer, "cut_refused", seat="2")  # 673a.5(b): then the dealer cuts
    await expect(turn).to_have_text("dealer: the cut of the red batch is offered to dealer")
    await act(dealer, "cut_made", at="100", by="0")  # 673a.5(d): 10 or more cards from either end
    await expect(dealer.locator("#turn")).to_have_text("dealer: place the cover card")
    await act(dealer, "cover_card_placed", from_bottom=str(size // 2))
    await act(dealer, "batch_to_shoe", back="red")
    await expect(dealer.locator("#shoe")).to_have_text(f"red batch, {size} cards")
    assert sup.table.shoe_back == "red"
    assert [(e.kind, e.payload.get("by_hand")) for e in _events(console_rig, "shuffle_started")][-1] == (
        "shuffle_started", "dan")  # fmt: skip


def _events(console_rig: ConsoleRig, kind: str) -> list[object]:
    from controller.journal import Journal

    sup = console_rig.rig.supervisor
    with Journal.open(sup.journal_path, create=False, readonly=True) as j:
        return [r for r in j.records() if r.kind == kind]


async def test_the_dealer_display_follows_a_round_and_a_dealer_is_refused_a_floor_action(
    console_rig: ConsoleRig, browser: Browser
) -> None:
    rig, sup = console_rig.rig, console_rig.rig.supervisor
    await rig.dealer.open_table()
    page = await open_signed_in(browser, console_rig.url + "/", "dan")
    await expect(page.locator("#shoe")).to_contain_text(f"{sup.table.shoe_back} batch")
    shown: list[str] = []

    async def follow() -> None:
        # Before each of the virtual dealer's actions: the page shows what the table asks now.
        turn = worded(asking(sup.table))
        text = (
            f"{turn['who']} hand {turn['hand']}: {turn['what']}"
            if "hand" in turn
            else f"{turn['who']}: {turn['what']}"
        )
        await expect(page.locator("#turn")).to_have_text(text)
        if turn["what"] == "decision":
            await expect(page.locator("#turn-detail")).to_contain_text("may: ")
        shown.append(text)
        if "decision" in text and len([s for s in shown if "decision" in s]) == 1:
            await shot(page, "console-dealer.png")

    rig.link.pace = follow
    await rig.dealer.play_round()
    rig.link.pace = None
    await expect(page.locator("#title")).to_contain_text("round 1")
    assert any(s.startswith("dealer: deal a card to box 1") for s in shown), shown
    assert any("decision" in s for s in shown), shown

    # A dealer's page offers no floor action, and the server refuses one sent anyway.
    assert await page.locator("form[data-action=reshuffle_ordered]").count() == 0
    await page.evaluate("run('reshuffle_ordered', {})")
    await expect(page.locator("#result")).to_have_text("reshuffle_ordered: the dealer role may not do this")
    assert not sup.table.reshuffle_due
