"""Double Back Jack (58 Pa. Code 673a)."""

from __future__ import annotations

from controller.games.registry import register
from controller.games.spec import DeckRule, GameId, GameSpec, WagerKind, blackjack_devices

GAME = register(
    GameSpec(
        id=GameId.DOUBLE_BACK_JACK,
        title="Double Back Jack",
        chapter="673a",
        default_decks=6,
        # 673a.3(b): with a shuffler, at least two decks in all, split equally into two batches:
        # one deck a batch is enough (ruling D8), so (a)'s one deck is the floor.
        deck_rule=DeckRule("673a.3(a)", "Double Back Jack is played with at least one deck", least=1),
        lettering={
            "peek": "673a.7(h)",
            "decisions": "673a.7(i)",
            "face_up": "673a.13(a)",
            "drawn_in_error": "673a.13(b)",
            "exposed_in_error": "673a.13(c)",
            "no_cards_dead": "673a.13(g)",
            "card_not_dealt": "673a.13(h)",
            "deal": "673a.7(e)",
            "wager_timing": "673a.6(c)",
            "insufficient_cards": "673a.13(f)",
            "dealer_extra": "673a.13(d)",
            "reader_misuse": "673a.13(i)",
            "reader_failed": "673a.13(j)",
            "shuffle_failed": "673a.13(k)",
            "reconstruction": "673a.7(u)",
            "shuffler_out_of_order": "673a.13(l)",
        },
        required_devices=blackjack_devices("673a"),
        shuffler_section="673a.3(b)",
        reader_mode="peek",
        procedure="controller.rules.double_back_jack:DoubleBackJack",
        adjacent_boxes="673a.6(e)",
        wagers=(
            WagerKind("bet", "Bet", "673a.6"),
            WagerKind("insurance", "Insurance", "673a.8"),
            WagerKind("second_chance", "Second Chance", "673a.7(l)"),
        ),
        offers=("insurance", "surrender", "second_chance", "card_later"),
        rulings=(
            "settlement_procedure",
            "busted_hand_pushes_on_dealer_22",
            "second_chance_stake",
            "insurance_after_paid_blackjack",
        ),
        switchable={
            "blackjack-pays-2-to-1": ("673a.12(a)", "a Blackjack pays 3 to 2"),
            "blackjack-before-the-reader": ("673a.7(f)", "a Blackjack against a dealer Blackjack pushes"),
            "21-paid-at-once": ("673a.7(m)", "a 21 waits for the dealer's hand"),
            "dealer-22-pushes": ("673a.7(q)(1)", "a dealer 22 is a bust"),
            "second-chance": ("673a.7(l)", "a hand over 21 is lost at once, no Second Chance card"),
        },
    )
)
