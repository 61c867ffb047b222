"""Rounds through the table core: cards routed by the dealing order, decisions from the keypad,
reader timing and misuse, failures that stop dealing, irregularities the devices can see."""

from __future__ import annotations

import re

import pytest

from controller.errors import RuleViolation
from controller.game_config import default_options
from controller.games import blackjack_games
from controller.rules.requests import MasqueRange
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.batches import Place
from tests.core.conftest import make

DBJ, DA, DU = "double-back-jack", "double-attack", "down-under"


def dealt(desk, kind: str = "card_dealt") -> list[tuple[int, str]]:
    return [(e.payload["seat"], e.payload["card"]) for e in desk.events if e.kind == kind]


def test_673a_7e_cards_are_routed_in_dealing_order() -> None:
    """673a.7(e): each box, the dealer's up card, each box, the hole card face down."""
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    d.deal("9H 8S 7D 6C 5H 4S")
    assert dealt(d) == [(1, "9H"), (2, "8S"), (0, "7D"), (1, "6C"), (2, "5H")]
    assert dealt(d, "hole_card_dealt") == [(0, "4S")]


def test_665a_7ef_double_attack_after_the_up_card() -> None:
    """665a.7(e),(f): the up card first; then the Double Attack wager, up to the Bet (665a.6(e))."""
    d = make(DA)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("7H")
    assert dealt(d) == [(0, "7H")]
    before = d.table.fingerprint()
    with pytest.raises(RuleViolation, match=r"^665a\.6\(e\)"):
        d.feed(I.WagerPlaced(seat=1, amount=15))
    assert d.table.fingerprint() == before
    d.feed(I.WagerPlaced(seat=1, amount=10))
    d.deal("9S 8D 4C")
    assert dealt(d) == [(0, "7H"), (1, "9S"), (1, "8D")]
    assert d.table.round is not None and d.table.round.state.boxes[0].double_attack == 10


def test_665a_11e_a_split_ace_that_drew_a_non_ace_is_refused_by_the_aces_rule() -> None:
    """Split aces, the left ace draws 5H: the dealer keys ``split`` on A-5. Aces may not be
    resplit (665a.11(e)); the refusal names that rule, not 665a.11(a)'s "identical in value"."""
    d = make("double-attack")
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("9C")  # the up card, then the Double Attack offer (665a.7(e))
    d.feed(I.KeyPressed(key="next"))
    d.deal("AS AD 7D")
    d.feed(I.KeyPressed(key="split"))
    d.draw("5H")  # the left split ace: A-5
    with pytest.raises(RuleViolation, match=re.escape("665a.11(e)")):
        d.feed(I.KeyPressed(key="split"))


def test_665a_7e_a_card_drawn_before_the_double_attack_offer_closes_is_held() -> None:
    """665a.13(b): a card drawn in error face down is used as though it were the next card."""
    d = make(DA)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("7H")
    d.draw("9S")  # drawn while the Double Attack offer is open
    assert d.kinds()[-1] == "card_held"
    d.feed(I.WagerPlaced(seat=1, amount=10))
    assert dealt(d)[-1] == (1, "9S")


def test_685a_7f_match_the_dealer_is_settled_before_the_reader() -> None:
    d = make(DU)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10, match_the_dealer=5),)))
    d.deal("7H 7C 9S 5D")
    d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    kinds = d.kinds()
    # The settlement lines come at the end, but the Match line is decided before the reader:
    # the round's state already holds it when the reader is asked.
    assert kinds.index("reader_used") > kinds.index("hole_card_dealt")
    settled = d.table.round.state.settlements if d.table.round else []
    assert any(s.wager == "match_the_dealer" and s.section.startswith("685a.7(f)") for s in settled)


def test_673a_8b_reader_used_before_insurance_closes_raises_an_alarm() -> None:
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10))))
    d.deal("9H 8S AD 6C 5H 4S")
    d.feed(I.WagerPlaced(seat=1, amount=5))
    d.feed(I.ReaderReport(blackjack=False))  # seat 2's insurance was still open
    alarm = [e for e in d.events if e.kind == "alarm_raised"][-1]
    assert alarm.payload["section"] == "673a.8(b)"
    assert d.table.round is not None  # play goes on: decisions next


def test_insurance_closed_key_declines_every_open_offer() -> None:
    """673a.8(b): the insurance line closes before the hole card goes into the reader."""
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10), SeatWagers(2, 10), SeatWagers(3, 10))))
    d.deal("9H 8S 7C AD 6C 5H 4D 4S")
    d.feed(I.WagerPlaced(seat=1, amount=5))
    d.feed(I.KeyPressed(key="insurance_closed"))
    answered = [e.payload for e in d.events if e.kind == "offer_answered"]
    assert [(a["seat"], a["value"]) for a in answered] == [(1, 5), (2, 0), (3, 0)]


def test_673a_13i_reader_used_with_a_low_up_card_continues_after_notice() -> None:
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("9H 7D 6C 4S")
    d.feed(I.ReaderReport(blackjack=False))
    alarm = [e for e in d.events if e.kind == "alarm_raised"][-1]
    assert alarm.payload["section"] == "673a.13(i)" and alarm.payload["halts"] is False
    d.feed(I.KeyPressed(key="stand"))
    d.draw("10C")  # the dealer's 11 draws to 21
    assert "round_settled" in d.kinds()


@pytest.mark.parametrize(("reveals", "voided"), [(True, True), (False, False)])
def test_665a_13h_misuse_depends_on_whether_the_reader_shows_the_hole_card(
    reveals: bool, voided: bool
) -> None:
    """665a.13(h)(1): all hands dead if the reader lets a player see the hole card; (2) else play on."""
    d = make(DA, reader_reveals_hole_card=reveals)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("7H")
    d.feed(I.KeyPressed(key="next"))  # no Double Attack
    d.deal("9S 8D 4C")
    d.feed(I.ReaderReport(blackjack=False))
    sections = [e.payload["section"] for e in d.events if e.kind == "alarm_raised"]
    assert sections[-1] == ("665a.13(h)(1)" if reveals else "665a.13(h)(2)")
    assert ("round_voided" in d.kinds()) is voided


def test_685a_12h_wrong_light_is_raised_for_the_floor() -> None:
    d = make(DU)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("9S 7H 8D KC")  # hole K is Large; the reader lights blue
    d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    alarm = [e for e in d.events if e.kind == "alarm_raised"][-1]
    assert alarm.payload["section"] == "685a.12(h)"


@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.13(j)"), (DA, "665a.13(i)"), (DU, "685a.12(i)")])
def test_a_failed_reader_stops_dealing_until_replaced(game: str, section: str) -> None:
    d = make(game)
    d.feed(I.ReaderFailed(code=3))
    assert d.table.snapshot()["halted"][0]["section"] == section
    before = d.table.fingerprint()
    with pytest.raises(RuleViolation, match="^" + re.escape(section)):
        d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    assert d.table.fingerprint() == before
    alarm_id = d.table.halted[0].id
    with pytest.raises(RuleViolation):
        d.feed(I.AlarmAcknowledged(alarm=alarm_id, by="floor-1"))  # not until it is replaced
    d.feed(I.ReaderReplaced(by="tech-1"))
    assert not d.table.halted
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))


def test_a_reader_that_fails_mid_round_holds_the_round_at_the_reader() -> None:
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("9H AD 6C 4S")
    d.feed(I.KeyPressed(key="next"))  # no insurance
    d.feed(I.ReaderFailed(code=1))
    with pytest.raises(RuleViolation, match=r"^673a\.13\(j\)"):
        d.feed(I.ReaderReport(blackjack=False))
    d.feed(I.ReaderReplaced(by="tech-1"))
    d.feed(I.ReaderReport(blackjack=False))
    assert d.table.round is not None and "reader_used" in d.kinds()


def test_673a_13a_a_card_face_up_in_the_shoe_is_not_used() -> None:
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("KH", face_up_in_shoe=True)
    assert d.kinds()[-1] == "card_discarded_face_up"
    d.draw("9H")
    assert dealt(d) == [(1, "9H")]
    assert d.table.batches["blue"].conserved()


def test_673a_13d_dealers_extra_card_goes_to_the_discard() -> None:
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("9H 10D 8C 7S")  # dealer 17
    d.feed(I.KeyPressed(key="next"))  # 10 up: no early surrender (ruling D5)
    d.feed(I.ReaderReport(blackjack=False))
    d.feed(I.KeyPressed(key="stand"))
    assert "round_settled" in d.kinds()
    d.draw("5C")  # the dealer draws by mistake
    assert d.kinds()[-1] == "card_discarded_extra"
    assert d.table.batches["blue"].conserved()


def test_an_illegal_decision_is_refused_with_its_section_and_changes_nothing() -> None:
    d = make(DU)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("9H 7D 6C 4S")
    d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    before = d.table.fingerprint()
    with pytest.raises(RuleViolation, match=r"^685a\.7\(i\)\(2\)"):
        d.feed(I.KeyPressed(key="surrender"))
    with pytest.raises(RuleViolation, match=r"^685a\.7\(i\)"):
        d.feed(I.KeyPressed(key="bogus"))
    assert d.table.fingerprint() == before
    d.feed(I.KeyPressed(key="hit"))


def test_round_settles_through_the_rules_engine() -> None:
    d = make(DBJ)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("AH 9D KC 7S")  # 673a.7(f): Blackjack paid 2 to 1 at once; dealer 16 draws nothing (p)
    settled = [e for e in d.events if e.kind == "round_settled"][-1].payload
    assert settled["settlements"][0]["halves"] == 4 and settled["settlements"][0]["section"].startswith(
        "673a.7(f)"
    )
    assert settled["dealer"]["cards"] == ["9D", "7S"]


@pytest.mark.parametrize(
    ("game", "jam", "out_of_order"),
    [(DBJ, "673a.13(k)", "673a.13(l)"), (DA, "665a.13(j)", "665a.13(k)"), (DU, "685a.12(j)", "685a.12(k)")],
)
def test_shuffler_faults_cite_each_chapters_own_section(game: str, jam: str, out_of_order: str) -> None:
    """The irregularity letters differ: 673a.13(k) is 665a.13(j) and 685a.12(j)."""
    d = make(game)
    d.feed(I.ShuffleFailed(back="red", reason="jam at card 40"))
    assert [e.payload["section"] for e in d.events if e.kind == "alarm_raised"] == [jam]
    with pytest.raises(RuleViolation, match="^" + re.escape(out_of_order)):
        d.feed(I.HandShuffled(back="red", dealer="d1"))


@pytest.mark.parametrize("game", blackjack_games())
def test_face_up_drawn_in_error_and_extra_cards_in_every_game(game: str) -> None:
    """673a.13(a), 673a.13(b), 673a.13(d); 665a.13(a), 665a.13(b), 665a.13(d);
    685a.12(a), 685a.12(b), 685a.12(d)."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.draw("KH", face_up_in_shoe=True)  # (a) not used this round
    assert d.kinds()[-1] == "card_discarded_face_up"
    if game == DA:
        d.draw("7H")  # the up card comes first
        d.draw("9C")  # (b) drawn while the Double Attack offer is open: held, used as the next card
        assert d.kinds()[-1] == "card_held"
        d.feed(I.KeyPressed(key="next"))
        d.deal("8D 5S")
        assert dealt(d)[-1] == (1, "8D")
        d.feed(I.KeyPressed(key="stand"))
        d.deal("3C")  # dealer 7 5 draws 3 = 15 (Bust It card), then 10 = 25
        d.deal("KC")
    else:
        d.deal("9C 10D 8D 7S")
        if game == DBJ:
            d.feed(I.KeyPressed(key="next"))  # 10 up: no early surrender
            d.feed(I.ReaderReport(blackjack=False))
        else:
            d.feed(I.ReaderReport(light=MasqueRange.MEDIUM))
        d.feed(I.KeyPressed(key="stand"))
    assert "round_settled" in d.kinds()
    d.draw("5C")  # (d) the dealer had 17 or more and drew by mistake
    assert d.kinds()[-1] == "card_discarded_extra"
    assert all(b.conserved() for b in d.table.batches.values())


def test_687a_9a1_dj_wild_is_never_shuffled_by_hand() -> None:
    """687a.9(a)(1): dealing from the hand needs the automated shuffler, even when it is out of order."""
    d = make("dj-wild")
    d.feed(I.ShufflerOutOfOrder(by="floor"))
    with pytest.raises(RuleViolation, match=r"^687a\.9\(a\)\(1\)"):
        d.feed(I.HandShuffled(back="red", dealer="d1"))


@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.5(h)"), (DA, "665a.5(h)"), (DU, "685a.5(h)")])
def test_673a_5h_a_self_shuffling_shoe_skips_the_cut(game: str, section: str) -> None:
    """673a.5(h), 665a.5(h), 685a.5(h), 685a.3(a): an approved shoe that reshuffles and counts by itself, or a
    continuous shuffler, skips the cut procedure of (b)-(g) and has no cover card."""
    from dataclasses import replace

    from controller.table.core import Table

    options = replace(default_options(game), automated_shuffler=False, self_shuffling_shoe=True)
    options.validate()
    table = Table(options)
    table.handle(I.DecksOpened(back="blue", dealer="d1", floorperson="f1"), 1.0)
    step = table.handle(I.BatchToShoe(back="blue"), 2.0)  # no shuffle, no cut, no cover card
    assert [e.kind for e in step.events] == ["batch_to_shoe"] and not step.commands
    with pytest.raises(RuleViolation, match="^" + re.escape(section)):
        table.handle(I.CoverCardReached(), 3.0)
    with pytest.raises(Exception, match=r"687a\.9\(a\)\(2\)"):  # dealt from the hand, not a shoe
        replace(default_options("dj-wild"), self_shuffling_shoe=True).validate()
    # A self-shuffling shoe is shuffled by hand only once it is marked out of order (673a.13(l),
    # 665a.13(k), 685a.12(k)).
    with pytest.raises(RuleViolation, match=r"^6\d\da\.1[23]\([kl]\): cards are shuffled by another"):
        table.handle(I.HandShuffled(back="red", dealer="d1"), 4.0)


def test_673a_13f_not_enough_cards_the_discards_are_reshuffled_and_the_round_finished() -> None:
    """673a.13(f), 665a.13(e), 685a.12(e): the discards are shuffled and cut, one card is burned,
    and the round is completed; then the whole batch is reshuffled."""
    import random
    from dataclasses import replace

    from controller.rules.requests import CardFor, Decision, ReaderUse, SurrenderOffer
    from controller.table.core import Table
    from controller.table.virtual import cut_and_cover

    options = replace(default_options(DBJ), decks=2)
    table = Table(options)
    t = [0.0]

    def feed(inp: I.Input) -> list[str]:
        t[0] += 1
        return [e.kind for e in table.handle(inp, t[0]).events]

    for back in ("blue", "red"):
        feed(I.DecksOpened(back=back, dealer="d1", floorperson="f1"))
    for step in (I.BatchToShuffler, I.ShuffleStarted):
        feed(step(back="blue"))
    feed(I.ShuffleCompleted(back="blue", cards_counted=104))
    cut_and_cover(feed, table, "blue", 40)  # 673a.5(b)-(d)
    feed(I.BatchToShoe(back="blue"))
    for step in (I.BatchToShuffler, I.ShuffleStarted):
        feed(step(back="red"))
    feed(I.ShuffleCompleted(back="red", cards_counted=104))
    rng = random.Random(4)
    stack = options.spec.batch(2, "blue")
    rng.shuffle(stack)
    discards: list = []
    on_layout: list = []

    def draw() -> list[str]:
        card = stack.pop()
        burning = table.burns_due > 0
        kinds = feed(I.CardDrawn(card=card))
        (discards if burning else on_layout).append(card)
        return kinds

    draw()  # the burn card
    refilled = False
    while not refilled or table.round is not None:
        if table.round is None:
            discards += on_layout
            on_layout.clear()
            feed(I.RoundOpened(wagers=tuple(SeatWagers(s, 10) for s in range(1, 7))))
        req = table.round.request if table.round else None
        if isinstance(req, CardFor):
            if not stack:
                with pytest.raises(RuleViolation, match=r"^673a\.5\(d\)"):
                    feed(I.DiscardsReshuffled(back="blue", cut_at=5, by="d1"))
                feed(I.DiscardsReshuffled(back="blue", cut_at=12, by="d1"))
                assert table.batches["blue"].places[Place.SHOE] == len(discards)
                stack, discards = discards, []
                rng.shuffle(stack)
                refilled = True
                assert draw() == ["card_burned"]  # the first card after the reshuffle is burned
                continue
            draw()
        elif isinstance(req, Decision):
            feed(I.KeyPressed(key="stand"))
        elif isinstance(req, SurrenderOffer):
            feed(I.KeyPressed(key="next"))
        elif isinstance(req, ReaderUse):
            feed(I.ReaderReport(blackjack=table.round.procedure.dealer_blackjack()))
        else:
            feed(I.KeyPressed(key="next"))
        assert all(b.conserved() for b in table.batches.values())
    # The round was finished, then the whole batch went back to be reshuffled (673a.7(d)).
    assert table.shoe_back is None and not table.alarms


@pytest.mark.parametrize(("game", "section", "pays"), [(DBJ, "673a.13(j)", 10), (DA, "665a.13(i)", 12.5)])
def test_a_reader_that_answers_wrongly_stops_dealing_and_insurance_follows_the_hole_card(
    game: str, section: str, pays: float
) -> None:
    """673a.13(j), 665a.13(i): a malfunctioning reader stops dealing until it is replaced; there is
    no 685a.12(h) remedy in these chapters. 673a.8(a), 665a.8(a): insurance wins on the hole card.
    Up AD, hole KC, insurance 5; the reader says "no Blackjack"."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    if game == DA:
        d.draw("AD")  # the up card first (665a.7(e))
        d.feed(I.KeyPressed(key="next"))  # no Double Attack
        d.deal("9H 7S KC")
    else:
        d.deal("9H AD 7S KC")
    d.feed(I.WagerPlaced(seat=1, amount=5))
    if game == DBJ:
        d.feed(I.KeyPressed(key="next"))  # no early surrender (ruling D5)
    d.feed(I.ReaderReport(blackjack=False))
    alarm = [e for e in d.events if e.kind == "alarm_raised"][-1].payload
    assert (alarm["section"], alarm["halts"]) == (section, True)
    assert "hole" not in alarm["message"] and d.table.reader_failed
    before = d.table.fingerprint()
    for answer in (False, True):  # the broken reader is not used again
        with pytest.raises(RuleViolation, match="^" + re.escape(section)):
            d.feed(I.ReaderReport(blackjack=answer))
    with pytest.raises(RuleViolation):
        d.feed(I.KeyPressed(key="stand"))  # no decision before the hole card is read
    assert d.table.fingerprint() == before
    with pytest.raises(RuleViolation, match="^" + re.escape(section)):
        d.feed(I.AlarmAcknowledged(alarm=alarm["id"], by="floor-1"))
    d.feed(I.ReaderReplaced(by="tech-1"))
    d.feed(I.ReaderReport(blackjack=True))  # the replacement reads the hole card right
    settled = [e for e in d.events if e.kind == "round_settled"][-1].payload
    nets = {
        (s["wager"], s["section"].split(",")[0]): s["stake"] * s["halves"] / 2 for s in settled["settlements"]
    }
    assert nets[("insurance", f"{section[:4]}.8(a)")] == pays
    assert sum(v for (w, _), v in nets.items() if w == "bet") == -10


def test_673a_3c_no_round_opens_with_cards_past_24_hours() -> None:
    """673a.3(c) (ruling G6): the decks are changed at least once every 24 hours; a round that
    opened before the 24 hours ran out is finished, but no round opens after."""
    d = make(DBJ)
    opened = d.table.batches["blue"].opened_at
    assert opened is not None
    d.now = opened + 24 * 3600 - 10
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.now += 20  # past the 24 hours in the middle of the round
    d.deal("9H 7D 6C 4S")
    d.feed(I.KeyPressed(key="stand"))
    d.draw("KC")  # the dealer's 11 draws to 21: the round is finished
    assert d.kinds()[-1] == "round_settled"
    before = d.table.fingerprint()
    with pytest.raises(RuleViolation, match=r"^673a\.3\(c\)"):
        d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    assert d.table.fingerprint() == before


@pytest.mark.parametrize("game", blackjack_games())
def test_the_hole_card_is_turned_after_the_players_and_before_the_dealer_draws(game: str) -> None:
    """673a.7(n), 665a.7(l), 685a.7(l): box 1 (9H 6C) stands; the hole card 4S is turned, then the
    dealer's 11 draws KC (in 665a the Bust It card, 665a.7(m))."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    if game == DA:
        d.draw("7D")
        d.feed(I.KeyPressed(key="next"))
        d.deal("9H 6C 4S")
    else:
        d.deal("9H 7D 6C 4S")
    if game == DU:
        d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    step = d.feed(I.KeyPressed(key="stand"))
    assert [e.kind for e in step.events] == ["decision", "hole_card_turned"]
    assert step.events[-1].payload["hole"] == "4S"
    step = d.draw("KC")
    assert [e.kind for e in step.events] == ["card_dealt", "round_settled"]


def test_685a_7l_a_hole_card_already_shown_is_not_turned_again() -> None:
    """685a.7(h),(l): up KD and hole QS are both Large: the hole card is shown after the reader,
    and not turned a second time."""
    d = make(DU)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("9H KD 9C QS")
    step = d.feed(I.ReaderReport(light=MasqueRange.LARGE))
    assert "hole_card_exposed" in [e.kind for e in step.events]
    d.feed(I.KeyPressed(key="stand"))
    assert "hole_card_turned" not in d.kinds() and d.kinds()[-1] == "round_settled"


@pytest.mark.parametrize(("game", "section"), [(DBJ, "673a.6(c)"), (DU, "685a.6(c)")])
def test_wagers_go_down_before_the_first_card(game: str, section: str) -> None:
    """673a.6(c), 685a.6(c): every wager but insurance, doubles and splits (and 673a's Second
    Chance) is placed before the first card; a wager pressed in at a decision is refused."""
    d = make(game)
    d.feed(I.RoundOpened(wagers=(SeatWagers(1, 10),)))
    d.deal("9H 7D 6C 4S")
    if game == DU:
        d.feed(I.ReaderReport(light=MasqueRange.SMALL))
    before = d.table.fingerprint()
    with pytest.raises(RuleViolation, match="^" + re.escape(section)):
        d.feed(I.WagerPlaced(seat=1, amount=5))
    assert d.table.fingerprint() == before
