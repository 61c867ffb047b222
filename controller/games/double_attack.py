"""Double Attack Blackjack (58 Pa. Code 665a)."""

from __future__ import annotations

from controller.games.registry import register
from controller.games.spec import DeckRule, GameId, GameSpec, WagerKind, blackjack_devices

GAME = register(
    GameSpec(
        id=GameId.DOUBLE_ATTACK,
        title="Double Attack Blackjack",
        chapter="665a",
        default_decks=8,
        deck_rule=DeckRule(
            "665a.3(a)", "Double Attack Blackjack uses eight-deck batches, not {decks}", allowed=(8,)
        ),
        # 665a.3(a): "the 10 of each suit removed from each deck".
        without_ranks=("10",),
        # 665a's irregularities run one letter behind 673a's from (h) on, and its dealing
        # procedure puts the reader in .7(g).
        lettering={
            "peek": "665a.7(g)",
            "decisions": "665a.7(h)(2)",
            "face_up": "665a.13(a)",
            "drawn_in_error": "665a.13(b)",
            "exposed_in_error": "665a.13(c)",
            "no_cards_dead": "665a.13(f)",
            "card_not_dealt": "665a.13(g)",
            "deal": "665a.7(f)",
            # 665a.6 has no clause on when wagers go down (its Double Attack wager comes after
            # the up card).
            "wager_timing": "665a.6",
            "insufficient_cards": "665a.13(e)",
            "dealer_extra": "665a.13(d)",
            "reader_misuse": "665a.13(h)(2)",
            "reader_failed": "665a.13(i)",
            "shuffle_failed": "665a.13(j)",
            "reconstruction": "665a.7(q)",
            "shuffler_out_of_order": "665a.13(k)",
        },
        required_devices=blackjack_devices("665a"),
        shuffler_section="665a.3(b)",
        reader_mode="peek",
        procedure="controller.rules.double_attack:DoubleAttack",
        adjacent_boxes="665a.6(g)",
        wagers=(
            WagerKind("bet", "Bet", "665a.6"),
            WagerKind("double_attack", "Double Attack", "665a.6(e)"),
            WagerKind("insurance", "Insurance", "665a.8"),
            # 665a.6(f): "in an amount equal to or less than the player's Bet Wager".
            WagerKind("bust_it", "Bust It", "665a.6(f)", optional=True, at_most_bet=True),
        ),
        offers=("insurance", "double_attack", "card_later"),
        # 665a.7(p) has one settlement procedure (673a.7(t) and 685a.7(r) offer two): no
        # settlement_procedure here.
        rulings=("surrender_double_down", "reader_reveals_hole_card"),
    )
)
