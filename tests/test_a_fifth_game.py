"""A fifth game, registered here and nowhere else, is a game to all of tablectl: its game file
loads and is checked against its own chapter, ``config check`` asks for the devices its chapter
requires, the table core deals it and cites its sections, a script plays it, and the dispute
account names its wagers. No file outside this one knows it.

"House Jack" is a made-up blackjack variant with a made-up chapter (699a) that plays Double
Back Jack's procedure, plus a made-up optional side wager of its own, the House Pair, settled
here, and a made-up offer of its own, House Insurance, asked and settled here: what proves the
point is that every section of the table's own comes out with 699a, that its game file offers
the House Pair, that a script, the virtual dealer and the table core answer House Insurance and
the journal and the dispute account record it, and that the places that once listed the games,
the wagers and the offers by hand have nothing to add.
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.cards import hard_total
from controller.cli import main
from controller.console.display import in_words, now, turn
from controller.errors import ConfigError, RuleViolation
from controller.game_config import default_options, options_from_dict, options_to_dict
from controller.games import (
    DeckRule,
    GameId,
    GameSpec,
    WagerKind,
    blackjack_devices,
    blackjack_games,
    game_ids,
    game_spec,
    register,
    unregister,
)
from controller.rules.double_back_jack import DoubleBackJack
from controller.rules.procedure import Procedure
from controller.rules.requests import WAGER_OFFER_KEYS, WagerOffer, offer, unregister_offer
from controller.rules.round import check_wagers
from controller.rules.state import SeatWagers
from controller.rules.wagers import LOSE, Wager, odds
from controller.script import run_script
from controller.table import inputs as I
from controller.table.asking import asking
from controller.table.dispute import wager_name
from controller.table.sections import section, sections_of
from controller.table.virtual import VirtualTable
from tests.core.conftest import make
from tests.table.helpers import ready
from tests.table.test_dispute import told

ROOT = Path(__file__).parent.parent
HOUSE = GameId("house-jack")
DBJ = game_spec(GameId.DOUBLE_BACK_JACK)
# 699a.6(h) (made up): an optional House Pair wager, no more than the Bet, placed with it.
HOUSE_PAIR = WagerKind("house_pair", "House Pair", "699a.6(h)", optional=True, at_most_bet=True)


HOUSE_INSURANCE = WagerKind("house_insurance", "House Insurance", "699a.8(e)")


@dataclass(slots=True)
class HouseInsuranceOffer(WagerOffer):
    """699a.8(e) (made up): before the first card, each box may place House Insurance, at most
    half its Bet; it pays 2 to 1 when the dealer's first two cards are both 10-valued (a hard 20)
    and is lost otherwise. Registered (``offer``) by the fixture below, with the game."""


def register_house_insurance() -> None:
    offer("house_insurance", WAGER_OFFER_KEYS, section="8(e)", described="House Insurance")(
        HouseInsuranceOffer
    )


class HouseJack(DoubleBackJack):
    """699a.8(e) (made up): House Insurance offered to each box; Double Back Jack's round; then
    House Insurance settled, and 699a.7(v) (made up): the House Pair pays 5 to 1 when the
    dealer's first two cards are of a rank, and is lost otherwise."""

    def run(self) -> Procedure:
        rs = self.rs
        insured: dict[int, int] = {}
        for box in rs.boxes:
            insured[box.seat] = int((yield HouseInsuranceOffer(box.seat, box.bet // 2)) or 0)
        yield from super().run()
        for box in rs.boxes:
            if insured[box.seat] and len(rs.dealer) >= 2:
                won = hard_total(rs.dealer[:2]) == 20 and not any(c.rank == "A" for c in rs.dealer[:2])
                halves = odds(2) if won else LOSE
                rs.settle(box.seat, None, Wager(HOUSE_INSURANCE.key), insured[box.seat], halves, "699a.8(e)")
        for box in reversed(rs.boxes):
            stake = box.stake(HOUSE_PAIR.key)
            done = any(s.seat == box.seat and s.wager == HOUSE_PAIR.key for s in rs.settlements)
            if stake and not done and len(rs.dealer) >= 2:
                pair = rs.dealer[0].rank == rs.dealer[1].rank
                rs.settle(
                    box.seat, None, Wager(HOUSE_PAIR.key), stake, odds(5) if pair else LOSE, "699a.7(v)"
                )


HOUSE_JACK = GameSpec(
    id=HOUSE,
    title="House Jack",
    chapter="699a",
    default_decks=2,
    deck_rule=DeckRule("699a.3(a)", "House Jack uses a 2 or 4 deck batch, not {decks}", allowed=(2, 4)),
    # Double Back Jack's letters in chapter 699a, but its irregularities in .14.
    lettering={
        name: where.replace("673a.13", "699a.14").replace("673a", "699a")
        for name, where in DBJ.lettering.items()
    },
    required_devices=blackjack_devices("699a"),
    shuffler_section="699a.3(b)",
    reader_mode="peek",
    procedure=f"{__name__}:HouseJack",
    adjacent_boxes="699a.6(e)",
    wagers=(
        WagerKind("bet", "Bet", "699a.6"),
        WagerKind("insurance", "Insurance", "699a.8"),
        WagerKind("free_double", "Free Double", "699a.6(g)"),
        HOUSE_PAIR,
        HOUSE_INSURANCE,
    ),
    offers=(*DBJ.offers, "house_insurance"),
    rulings=("settlement_procedure",),
)


@pytest.fixture(autouse=True)
def house_jack() -> Iterator[GameSpec]:
    register_house_insurance()
    spec = register(HOUSE_JACK)
    try:
        yield spec
    finally:
        unregister(HOUSE)
        unregister_offer(HouseInsuranceOffer)


def test_it_is_listed_as_a_game_and_a_blackjack_game() -> None:
    assert game_ids()[-1] == HOUSE and blackjack_games()[-1] == HOUSE
    with pytest.raises(RuleViolation, match=r"one of double-back-jack, .*, house-jack"):
        game_spec("house-jak")


def test_its_game_file_is_checked_against_its_chapter() -> None:
    opts = options_from_dict(
        {
            "game": "house-jack",
            "decks_per_batch": 4,
            "boxes_per_player": 3,
            "rulings": {"settlement_procedure": 2},
        },
        "house.toml",
    )
    assert (opts.decks, opts.boxes_per_player, opts.rulings.settlement_procedure) == (4, 3, 2)
    refusals = {
        "decks_per_batch = 3": (
            {"decks_per_batch": 3},
            "decks_per_batch: 699a.3(a): House Jack uses a 2 or 4",
        ),
        "boxes_per_player": ({"boxes_per_player": 7}, "boxes_per_player: 699a.6(e):"),
        "another game's ruling": (
            {"rulings": {"dealer_ace_ace": 12}},
            "rulings.dealer_ace_ace: applies to Down Under Blackjack, not House Jack",
        ),
        "another game's wager": (
            {"wagers": {"bust_it": True}},
            "wagers: 665a.6(f): the bust_it wager belongs to Double Attack Blackjack",
        ),
    }
    for why, (keys, words) in refusals.items():
        with pytest.raises(ConfigError) as info:
            options_from_dict({"game": "house-jack", **keys}, "house.toml")
        assert str(info.value).startswith(f"house.toml: {words}"), (why, info.value)


def _table(tmp_path: Path, reader: str) -> Path:
    (tmp_path / "house-jack.toml").write_text(
        'game = "house-jack"\ndecks_per_batch = 4\n[wagers]\nhouse_pair = true\n', encoding="utf-8"
    )
    table = tmp_path / "table.toml"
    table.write_text(
        textwrap.dedent(f"""\
            extends = "{ROOT}/config/tables/base/blackjack.toml"

            [table]
            id = "hj-01"
            game = "house-jack.toml"

            [devices.shuffler]
            port = 15041

            [devices.shuffler.sim]
            decks = 4

            [devices.shoe]
            port = 15042

            [devices.reader]
            profile = "{ROOT}/config/devices/ref-reader-{reader}.toml"
            path = "/tmp/tablectl/hj-01/rs485"

            [devices.keypad]
            path = "/tmp/tablectl/hj-01/rs485"
            """),
        encoding="utf-8",
    )
    return table


def test_config_check_asks_for_the_devices_its_chapter_requires(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "check", str(_table(tmp_path, "peek"))]) == 0
    assert "ok: table hj-01" in capsys.readouterr().out
    assert main(["config", "check", str(_table(tmp_path, "masque"))]) == 2
    err = capsys.readouterr().err
    assert "devices.reader.profile: 699a.2(d): a House Jack table's reader tells whether" in err, err


def test_its_sections_are_its_own() -> None:
    assert section(HOUSE_JACK, "peek") == "699a.7(h)"
    assert section(HOUSE_JACK, "insufficient_cards") == "699a.14(f)"
    assert section(HOUSE_JACK, "5(d)") == "699a.5(d)"
    assert "699a.14(j)" in sections_of("reader_failed")


def test_the_table_core_deals_it_and_cites_its_sections() -> None:
    rig = ready(HOUSE)
    ask = asking(rig.table)
    assert (ask["what"], ask["section"]) == ("burn", "699a.7(c)")
    for _ in range(3):
        rig.play_round(seats=(1, 2))
    assert rig.conserved()
    with pytest.raises(RuleViolation, match=r"^699a\.6\(e\)"):
        check_wagers(
            default_options(HOUSE),
            [SeatWagers(seat=1, bet=5, player="p"), SeatWagers(seat=3, bet=5, player="p")],
        )


def test_a_script_plays_it() -> None:
    seat = '"seats": [{"seat": 1, "wagers": {"bet": 10}}]'
    # Box 1 10S 8D = 18; the dealer 9H 10C = 19.
    result = run_script(f'{{"game": "house-jack", "shoe": ["10S", "9H", "8D", "10C"], {seat}}}')
    assert result["seats"][0]["net"]["bet"] == -10
    with pytest.raises(RuleViolation, match=r"^699a\.14\(f\)"):
        run_script(f'{{"game": "house-jack", "shoe": ["10S"], {seat}}}')


def test_the_dispute_account_names_its_wagers() -> None:
    assert wager_name("free_double") == "Free Double"
    desk = make("house-jack")
    desk.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    desk.feed(I.KeyPressed(key="insurance_closed"))  # House Insurance declined (699a.8(e))
    desk.deal("8S 9H 6D KS")
    desk.feed(I.KeyPressed(key="stand"))
    started = next(e for e in desk.events if e.kind == "round_started")
    started.payload["wagers"][0]["free_double"] = 5  # as a table offering it would journal it
    text, _ = told(desk.events)
    assert "Free Double 5" in text, text


def test_its_game_file_offers_its_own_side_wager() -> None:
    on = options_from_dict({"game": "house-jack", "wagers": {"house_pair": True}}, "house.toml")
    off = options_from_dict({"game": "house-jack", "wagers": {"house_pair": False}}, "house.toml")
    assert on.offers("house_pair") and not off.offers("house_pair")
    assert options_to_dict(on)["wagers"] == {"house_pair": True}
    assert default_options(HOUSE).offers("house_pair")  # a chapter's optional wager, offered
    refusals = {
        "another game's file": (
            {"game": "double-back-jack", "wagers": {"house_pair": True}},
            "wagers: 699a.6(h): the house_pair wager belongs to House Jack",
        ),
        "no game's wager": (
            {"game": "house-jack", "wagers": {"lucky_ladies": True}},
            "wagers.lucky_ladies: unknown optional wager"
            " (one of bust_it, match_the_dealer, progressive, house_pair)",
        ),
    }
    for why, (doc, words) in refusals.items():
        with pytest.raises(ConfigError) as info:
            options_from_dict(doc, "house.toml")
        assert str(info.value) == f"house.toml: {words}", (why, info.value)


def test_its_side_wager_is_checked_as_it_declares() -> None:
    on = options_from_dict({"game": "house-jack", "wagers": {"house_pair": True}}, "house.toml")
    off = options_from_dict({"game": "house-jack", "wagers": {"house_pair": False}}, "house.toml")
    check_wagers(on, [SeatWagers(1, 10, house_pair=10)])
    with pytest.raises(RuleViolation, match=r"^699a\.6\(h\): this table does not offer the House Pair wager"):
        check_wagers(off, [SeatWagers(1, 10, house_pair=5)])
    with pytest.raises(RuleViolation, match=r"a House Pair wager of 11 is more than the Bet of 10"):
        check_wagers(on, [SeatWagers(1, 10, house_pair=11)])
    with pytest.raises(RuleViolation, match=r"^665a\.6\(f\): this table does not offer the Bust It wager"):
        check_wagers(on, [SeatWagers(1, 10, bust_it=5)])


def test_a_script_settles_its_side_wager() -> None:
    seat = '"seats": [{"seat": 1, "wagers": {"bet": 10, "house_pair": 5}}]'
    # Box 1 10S 8D = 18; the dealer 9H 9C = 18: the Bet pushes, the House Pair pays 5 to 1.
    result = run_script(f'{{"game": "house-jack", "shoe": ["10S", "9H", "8D", "9C"], {seat}}}')
    net = result["seats"][0]["net"]
    assert (net["bet"], net["house_pair"], result["seats"][0]["total"]) == (0, 25, 25)
    # The dealer 9H 10C = 19: the Bet and the House Pair lost.
    result = run_script(f'{{"game": "house-jack", "shoe": ["10S", "9H", "8D", "10C"], {seat}}}')
    assert result["seats"][0]["net"]["house_pair"] == -5


def test_the_table_journals_and_the_dispute_account_names_its_side_wager() -> None:
    desk = make("house-jack")
    desk.feed(I.RoundOpened(wagers=(SeatWagers(1, 10, house_pair=5),)))
    desk.feed(I.KeyPressed(key="insurance_closed"))  # House Insurance declined (699a.8(e))
    desk.deal("8S 9H 6D 9S")
    desk.feed(I.KeyPressed(key="stand"))
    started = next(e for e in desk.events if e.kind == "round_started")
    assert started.payload["wagers"][0]["house_pair"] == 5
    text, _ = told(desk.events)
    assert "Box 1: Bet 10, House Pair 5" in text, text
    assert "Box 1 House Pair 5: paid +25  (699a.7(v))" in text, text


def test_the_console_names_its_side_wager() -> None:
    layout = {"boxes": [{"seat": 1, "spots": [True, True], "wagers": {"bet": 10, "house_pair": 5}}]}
    box = in_words(layout, "house-jack")["boxes"][0]
    assert box["chips"] == ["Blackjack Wager", "House Pair"]
    assert box["wagers"] == {"Blackjack Wager": 10, "House Pair": 5}


def test_the_table_asks_its_own_offer_and_takes_the_answers_it_registered() -> None:
    rig = ready(HOUSE)
    while rig.table.burns_due:
        rig.draw()
    rig.open_round(seats=(1, 2))
    ask = asking(rig.table)
    assert (ask["what"], ask["offer"], ask["seat"], ask["maximum"]) == ("offer", "house_insurance", 1, 5)
    assert ask["answers"] == [
        {"key": "double", "answer": "take"},
        {"key": "next", "answer": "decline"},
        {"key": "insurance_closed", "answer": "decline_all"},
    ]
    assert turn(ask) == {"who": "box 1", "what": "house insurance offered"}
    buttons = [(b["args"]["key"], b["label"]) for b in now(ask, {}, keypad_failed=False)]
    assert buttons == [("double", "take"), ("next", "decline"), ("insurance_closed", "decline all")]
    with pytest.raises(RuleViolation, match=r"^699a\.8\(e\): the HouseInsuranceOffer is open, not 'hit'"):
        rig.feed(I.KeyPressed(key="hit"))
    with pytest.raises(RuleViolation, match=r"^699a\.8\(e\): seat 1: 6 is more than the 5 allowed"):
        rig.feed(I.WagerPlaced(seat=1, amount=6))
    taken = rig.feed(I.WagerPlaced(seat=1, amount=5))
    declined = rig.feed(I.KeyPressed(key="next"))
    answered = [e for e in (*taken.events, *declined.events) if e.kind == "offer_answered"]
    assert [(e.payload["offer"], e.payload["seat"], e.payload["value"]) for e in answered] == [
        ("house_insurance", 1, 5),
        ("house_insurance", 2, 0),
    ]
    assert asking(rig.table)["what"] == "card"
    rig.finish_round()


def test_the_virtual_dealer_answers_its_offer_on_the_generic_path() -> None:
    """The virtual dealer has no hook for House Insurance: its default declines it."""
    table = VirtualTable(default_options(HOUSE), random.Random(7), seats=3)
    table.open_table()
    for _ in range(3):
        table.play_round()
    assert table.rounds == 3 and not table.table.halted


def test_a_script_answers_and_settles_its_offer() -> None:
    seat = '"seats": [{"seat": 1, "wagers": {"bet": 10}, "offers": {"house_insurance": 5}}]'
    # Box 1 9S 8D = 17; the dealer KH QC = 20: the Bet lost, House Insurance paid 2 to 1.
    result = run_script(f'{{"game": "house-jack", "shoe": ["9S", "KH", "8D", "QC"], {seat}}}')
    net = result["seats"][0]["net"]
    assert (net["bet"], net["house_insurance"]) == (-10, 10)
    # The dealer 9H 10C: House Insurance lost.
    result = run_script(f'{{"game": "house-jack", "shoe": ["10S", "9H", "8D", "10C"], {seat}}}')
    assert result["seats"][0]["net"]["house_insurance"] == -5
    too_much = seat.replace('"house_insurance": 5', '"house_insurance": 6')
    with pytest.raises(RuleViolation, match=r"^699a\.8\(e\): seat 1: House Insurance of 6 is more"):
        run_script(f'{{"game": "house-jack", "shoe": ["10S", "9H", "8D", "10C"], {too_much}}}')
    with pytest.raises(RuleViolation, match=r"^673a\.8\(e\): House Insurance is not offered in Double Back"):
        run_script(f'{{"game": "double-back-jack", "shoe": ["10S", "9H", "8D", "10C"], {seat}}}')


def test_the_journal_and_the_dispute_account_record_its_offer() -> None:
    desk = make("house-jack")
    desk.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    desk.feed(I.WagerPlaced(seat=1, amount=5))
    desk.feed(I.KeyPressed(key="next"))
    desk.deal("8S 7C 9H 6D QS 9S")  # the dealer 9H 9S: no hard 20
    desk.feed(I.KeyPressed(key="stand"))
    desk.feed(I.KeyPressed(key="stand"))
    answered = [e.payload for e in desk.events if e.kind == "offer_answered"]
    assert [(p["offer"], p["seat"], p["value"], p["taken"]) for p in answered] == [
        ("house_insurance", 1, 5, True),
        ("house_insurance", 2, 0, False),
    ]
    text, _ = told(desk.events)
    assert "Box 1 offered House Insurance: wagered 5" in text, text
    assert "Box 2 offered House Insurance: declined" in text, text
    assert "Box 1 House Insurance 5: lost -5  (699a.8(e))" in text, text
