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
