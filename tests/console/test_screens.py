"""The console at each game mid-round and at each kind of alarm, in a real browser, as a dealer and
a floorperson see it (docs/console.md's pictures come from here: tools/console_screenshots.py).

Mid-round, at the first decision (DJ Wild: the hands being dealt), the dealer display shows the
signed-in person, the devices in view above the layout, the wagers by their names. At Double
Back Jack the floor deals with a halting 673a.3(b) alarm by the void it asks for and with a
failed reader by "reader replaced", each on the alarm itself, the result said there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from controller.games import game_ids
from controller.table import inputs as I
from controller.table.asking import asking
from tests.console.conftest import ConsoleRig, console_for
from tests.console.test_browser import no_serious_violations, open_signed_in, shot

GAMES = game_ids()
ROUNDS_FOR_A_SECOND_CHANCE = 60  # the seeded table gives one well before


class _Stop(Exception):
    """Stops the virtual dealer at the moment a test wants."""


async def _mid_round(cr: ConsoleRig) -> str:
    """The virtual dealer plays until the round's first decision (DJ Wild: the hands to deal)."""
    sup = cr.rig.supervisor

    async def until_mid_round() -> None:
        what = asking(sup.table).get("what") if sup.table.in_round or sup.table.wild else None
        locked = bool(sup.table.wild and sup.table.wild.locked)
        if what == "decision" or (what == "wild_deal" and locked):
            raise _Stop

    cr.rig.link.pace = until_mid_round
    with pytest.raises(_Stop):
        await cr.rig.dealer.play_round()
    cr.rig.link.pace = None
    return str(asking(sup.table)["what"])


async def _devices_in_view(page: Page) -> None:
    """Before: the reader, keypad and shoe were below the fold during a decision, and then said
    a second time in boxes of their own below the layout: once, in view, now."""
    status = page.locator("#status")
    await expect(status).to_be_in_viewport()
    await expect(status).to_contain_text("keypad: online")
    assert await page.locator("#reader, #progressive, #shoe").count() == 0


@pytest.mark.parametrize("game", GAMES)
async def test_each_game_mid_round_in_the_dealers_words(game: str, tmp_path: Path, browser: Browser) -> None:
    async with console_for(tmp_path, game) as cr:
        await cr.rig.dealer.open_table()
        page = await open_signed_in(browser, cr.url + "/", "dan")
        what = await _mid_round(cr)
        turn = page.locator("#turn")
        await expect(turn).to_contain_text("decision" if what == "decision" else "deal the hands")
        await expect(page.locator("#whoami")).to_have_text("signed in: dan (dealer)")
        await expect(page.locator("#title")).not_to_contain_text("dealer dealer-")
        await _devices_in_view(page)
        if game == "double-back-jack":
            await expect(page.locator("#status")).to_contain_text("reader: online")
            await expect(page.locator("#status")).to_contain_text("shoe: online")
        main = "Ante and Blind" if game == "dj-wild" else "Blackjack Wager"
        named = page.locator("#boxes [data-seat='1'] .wagers, #boxes [data-seat='1'] .spots")
        await expect(named.first).to_contain_text(main)
        await expect(page.locator("#boxes")).not_to_contain_text("chips: main")
        await shot(page, f"console-{game}.png")
        await no_serious_violations(page)


async def test_the_floor_clears_each_halting_alarm_from_the_alarm(tmp_path: Path, browser: Browser) -> None:
    async with console_for(tmp_path, "double-back-jack") as cr:
        rig, sup = cr.rig, cr.rig.supervisor
        await rig.dealer.open_table()
        floor = await open_signed_in(browser, cr.url + "/floor", "flo")
        await _mid_round(cr)
        # The shoe's history contradicts the journal mid-round: 673a.3(b), "void it if they differ".
        await sup.stepper.feed(
            I.DeviceGap(
                device="shoe",
                what="cards",
                reason="the shoe's history disagrees",
                unaccounted=0,
                halts=True,
                check=((3, ""),),
            ),
            origin="shoe",
        )
        (alarm,) = sup.table.halted
        row = floor.locator(f"#alarms li[data-alarm='{alarm.id}']")
        await expect(row).to_contain_text("673a.3(b)")
        await expect(row.locator("button")).to_have_text(["they differ: void the round", "acknowledge"])
        await shot(floor, "console-alarm-cards-conflict.png")
        await row.locator("button", has_text="void the round").click()
        doc = floor.locator("#confirm-doc")
        await expect(doc).to_contain_text("Every wager of the round in play is returned")
        await floor.fill("#confirm input[name=reason]", "the shoe's draws differ from the layout")
        await floor.locator("#confirm-yes").click()
        said = floor.locator("#alarms-box .said")
        await expect(said).to_have_text("void round: done")  # where the floor pressed
        assert not sup.table.in_round
        await row.locator("button", has_text="acknowledge").click()
        await expect(said).to_have_text("alarm acknowledged: done")
        await expect(floor.locator("#alarms")).to_have_text("none")

        # The reader fails: the alarm offers what clears it, not an Acknowledge the table refuses.
        rig.dealer.reader.faults.dead = True
        await sup.settle("reader")
        (alarm,) = sup.table.halted
        row = floor.locator(f"#alarms li[data-alarm='{alarm.id}']")
        await expect(row).to_contain_text("the card reader malfunctioned")
        await expect(row.locator("button")).to_have_text(["reader replaced: dealing resumes"])
        await expect(said).to_have_count(0)  # what was said of the last alarm is not left under this one
        await shot(floor, "console-alarm-reader-failed.png")
        await no_serious_violations(floor)
        rig.dealer.reader.faults.dead = False  # the technician swaps the reader
        await sup.settle("reader")
        await row.locator("button").click()
        await expect(said).to_have_text("reader replaced: done")
        await expect(floor.locator("#alarms")).to_have_text("none")
        assert not sup.table.halted


async def test_a_second_chance_hand_is_shown_as_673a_7_l_counts_it(tmp_path: Path, browser: Browser) -> None:
    """Before: "2♥ Q♥ 10♣ Q♣ 12 LOSE", no mark of the card taken away. The virtual dealer plays
    Double Back Jack (seeded) until a player takes a Second Chance card; the display shows it
    sideways after the total it is subtracted from."""
    async with console_for(tmp_path, "double-back-jack") as cr:
        sup = cr.rig.supervisor
        await cr.rig.dealer.open_table()
        page = await open_signed_in(browser, cr.url + "/", "dan")

        async def until_second_chance() -> None:
            rnd = sup.table.round
            if rnd is not None and any(h.second_chance_card for b in rnd.state.boxes for h in b.hands):
                raise _Stop

        cr.rig.link.pace = until_second_chance
        with pytest.raises(_Stop):
            for _ in range(ROUNDS_FOR_A_SECOND_CHANCE):
                await cr.rig.dealer.play_round()
        cr.rig.link.pace = None
        rnd = sup.table.round
        assert rnd is not None
        hand = next(h for b in rnd.state.boxes for h in b.hands if h.second_chance_card)
        sc = str(hand.second_chance_card)
        marked = page.locator(".second-chance .card.sideways")
        await expect(marked).to_have_attribute("aria-label", sc)
        row = page.locator(".hand", has=marked)
        await expect(row.locator(".total.before")).to_have_text(
            str(hand.total + hand.second_chance_card.points)
        )
        await expect(row.locator(".total").last).to_have_text(str(hand.total))
        await shot(page, "console-second-chance.png")
