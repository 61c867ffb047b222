"""Down Under Blackjack (58 Pa. Code 685a)."""

from __future__ import annotations

from controller.games.registry import register
from controller.games.spec import DeckRule, GameId, GameSpec, WagerKind, blackjack_devices

GAME = register(
    GameSpec(
        id=GameId.DOWN_UNDER,
        title="Down Under Blackjack",
        chapter="685a",
        default_decks=6,
        deck_rule=DeckRule(
            "685a.3(a)",
            "Down Under Blackjack uses a 4, 5, 6 or 8 deck batch, not {decks}",
            allowed=(4, 5, 6, 8),
        ),
        # 685a numbers its irregularities .12 where the other blackjack chapters use .13.
        lettering={
            "peek": "685a.7(h)",
            "decisions": "685a.7(i)(2)",
            "face_up": "685a.12(a)",
            "drawn_in_error": "685a.12(b)",
            "exposed_in_error": "685a.12(c)",
            "no_cards_dead": "685a.12(f)",
            "card_not_dealt": "685a.12(g)",
            "deal": "685a.7(e)",
            "wager_timing": "685a.6(c)",
            "insufficient_cards": "685a.12(e)",
            "dealer_extra": "685a.12(d)",
            "reader_misuse": "685a.12(h)",
            "reader_failed": "685a.12(i)",
            "shuffle_failed": "685a.12(j)",
            "reconstruction": "685a.7(s)",
            "shuffler_out_of_order": "685a.12(k)",
        },
        # The Masque Card Reader (685a.2(d)) lights the hole card's range (685a.3(e)).
        required_devices=blackjack_devices("685a"),
        shuffler_section="685a.3(b)",
        reader_mode="masque",
        procedure="controller.rules.down_under:DownUnder",
        adjacent_boxes="685a.6(f)",
        wagers=(
            WagerKind("bet", "Bet", "685a.6"),
            WagerKind("insurance", "Insurance", "685a.8"),
            WagerKind(
                "match_the_dealer",
                "Match-the-Dealer",
                "685a.6(e)",
                optional=True,
                decks=(6, 8),
                decks_refusal="Match-the-Dealer is offered only with six- or eight-deck batches, not {decks}",
            ),
        ),
        offers=("insurance", "even_money", "card_later"),
        rulings=(
            "settlement_procedure",
            "match_the_dealer_pays",
            "dealer_ace_ace",
            "large_pair_rule",
            "dealer_22_returns_busted",
        ),
    )
)
