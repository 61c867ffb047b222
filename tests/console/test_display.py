"""The display's moment and menu (controller/console/display.py): pure functions of the table's
public ask and snapshot, checked on their own."""

from __future__ import annotations

from controller.console.display import display, menu, now, turn

KINDS = {"shuffler": "shuffler", "shoe": "shoe", "reader": "reader", "keypad": "keypad"}


def test_a_decision_has_one_button_per_legal_choice() -> None:
    ask = {"what": "decision", "seat": 3, "hand": 0, "legal": ["hit", "stand", "split"], "round": 4}
    buttons = now(ask, {}, keypad_failed=False)
    assert [(b["action"], b["args"]) for b in buttons] == [
        ("key", {"key": "hit"}), ("key", {"key": "stand"}), ("key", {"key": "split"})
    ]  # fmt: skip


def test_an_offer_has_its_answers_and_wagers_pick_the_boxes() -> None:
    insurance = now({"what": "offer", "offer": "insurance", "seat": 1}, {}, keypad_failed=True)
    assert [b["args"]["key"] for b in insurance] == ["double", "next", "insurance_closed"]
    (start,) = now({"what": "bets"}, {}, keypad_failed=True)
    assert (start["action"], start.get("pick")) == ("start_round", "seats")


def test_an_ask_the_display_does_not_know_is_worded_and_has_no_buttons() -> None:
    """A new kind of ask (another chapter's, a later version's) is shown by its words; its
    actions are in the menu, never guessed."""
    ask = {"what": "something_new", "round": 2}
    assert now(ask, {}, keypad_failed=False) == []
    assert turn(ask)["what"] == "something_new"
    odd_choice = {"what": "decision", "seat": 1, "hand": 0, "legal": ["stand", "a_new_choice"]}
    assert [b["args"]["key"] for b in now(odd_choice, {}, keypad_failed=False)] == ["stand"]


def test_the_menu_holds_only_this_games_actions() -> None:
    dbj = menu("double-back-jack", KINDS.values(), {})
    assert "held_card_exposed" in dbj["rare"] and "misdeal_determined" in dbj["hidden"]
    assert "void_round" in dbj["hidden"] and "hand_shuffled" in dbj["hidden"]  # the shuffler works
    wild = menu("dj-wild", ["shuffler", "keypad", "stub_counter"], {"shuffler_out_of_order": True})
    assert "misdeal_determined" in wild["rare"] and "hand_shuffled" in wild["rare"]
    assert "held_card_exposed" in wild["hidden"] and "reader_replaced" in wild["hidden"]  # no reader
    assert menu("double-attack", KINDS.values(), {})["void_section"] == "665a.13(h)(1)"


def test_the_batch_in_the_shoe_says_it_is_being_dealt() -> None:
    snapshot = {
        "game": "double-back-jack",
        "cards_in_shoe": 305,
        "batches": {"blue": {"location": "shoe", "shuffler": "unshuffled"}},
        "asking": {"what": "bets"},
    }
    shown = display(snapshot, KINDS, turn(snapshot["asking"]))
    assert shown["batches"][0]["state"] == "in the shoe, being dealt (305 cards left)"
    assert shown["now"][0]["action"] == "start_round"


def test_a_missed_card_is_reported_from_the_menu_and_the_players_option_has_its_buttons() -> None:
    """673a.13(g),(h), 665a.13(f),(g), 685a.12(f),(g): the dealer reports the card he missed
    (`card_missed`, a blackjack game's action) and the table offers the player his option."""
    for game in ("double-back-jack", "double-attack", "down-under"):
        assert "card_missed" in menu(game, KINDS.values(), {})["rare"]
    assert "card_missed" in menu("dj-wild", ["shuffler", "keypad"], {})["hidden"]
    ask = {"what": "offer", "offer": "card_later", "seat": 2, "hand": 0, "section": "673a.13(h)"}
    assert [(b["args"]["key"], b["label"]) for b in now(ask, {}, keypad_failed=True)] == [
        ("hit", "card after the others"), ("next", "hand dead")
    ]  # fmt: skip
    assert "after the others" in turn(ask)["what"]


def test_a_burn_says_card_or_cards() -> None:
    """Before: "burn 1 card(s)"."""
    assert turn({"what": "burn", "cards": 1})["what"] == "burn 1 card"
    assert turn({"what": "burn", "cards": 3})["what"] == "burn 3 cards"


def _layout(box: dict[str, object]) -> dict[str, object]:
    return {"dealer": {"cards": [], "total": None}, "boxes": [box]}


def test_chips_and_wagers_are_named_as_the_game_names_them() -> None:
    """Before: "chips: main -"."""
    box = {"seat": 1, "spots": [True, True], "wagers": {"bet": 10, "bust_it": 10}, "hands": []}
    shown = display({"game": "double-attack"}, KINDS, {}, layout=_layout(box))["layout"]["boxes"][0]
    assert shown["chips"] == ["Blackjack Wager", "Bust It"]
    assert shown["wagers"] == {"Blackjack Wager": 10, "Bust It": 10}
    wild = {"seat": 2, "spots": [True, False]}
    shown = display({"game": "dj-wild"}, KINDS, {}, layout=_layout(wild))["layout"]["boxes"][0]
    assert shown["chips"] == ["Ante and Blind"]
    down_under = {"seat": 1, "spots": [False, True]}
    shown = display({"game": "down-under"}, KINDS, {}, layout=_layout(down_under))["layout"]["boxes"][0]
    assert shown["chips"] == ["Match-the-Dealer"]


def test_a_second_chance_card_is_marked_as_673a_7_l_counts_it() -> None:
    """Before: "2♥ Q♥ 10♣ Q♣ 12 LOSE", no mark of the card taken away. The hand was 22 when the
    Second Chance card came; its 10 is subtracted: 12."""
    from controller.console.display import mark_second_chance

    marked = mark_second_chance({"cards": ["2H", "QH", "10C", "QC"], "total": 12, "result": "lose"})
    assert (marked["second_chance"], marked["before"]) == ("QC", 22)
    for plain in (["10H", "QH"], ["5H", "6H", "10C"], ["AH", "5C", "AD", "9S"], ["9H", "9C", "AS", "2D"]):
        assert "second_chance" not in mark_second_chance({"cards": plain}), plain
    box = {"seat": 1, "spots": [True, False], "hands": [{"cards": ["KH", "5C", "9D", "AS"], "total": 23}]}
    hand = display({"game": "double-back-jack"}, KINDS, {}, layout=_layout(box))["layout"]["boxes"][0][
        "hands"
    ][0]
    assert (hand["second_chance"], hand["before"]) == ("AS", 24)  # an ace counts 1 here


def test_no_action_is_described_by_its_argument_names() -> None:
    """Before: "put `at` cards from the top by seat `by`". The console shows each action's words
    and labels each field with its argument's own words."""
    from controller.actions import ACTIONS

    for action in ACTIONS.values():
        if action.telemetry:
            continue
        assert "`" not in action.doc, action.name
        for name, arg in action.args.items():
            assert arg.doc and "`" not in arg.doc, (action.name, name)
