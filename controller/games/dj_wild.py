"""DJ Wild Stud Poker (58 Pa. Code 687a), dealt from the dealer's hand (687a.9)."""

from __future__ import annotations

from controller.games.registry import register
from controller.games.spec import RULE_NAMES, DeckRule, GameId, GameSpec, WagerKind

GAME = register(
    GameSpec(
        id=GameId.DJ_WILD,
        title="DJ Wild Stud Poker",
        short_title="DJ Wild",
        chapter="687a",
        default_decks=1,
        # 687a: 52 cards and the DJ Wild joker; the stub counter checks for 53 (687a.9(f)).
        deck_rule=DeckRule("687a.9(f)", "DJ Wild Stud Poker is dealt from one 53-card deck", allowed=(1,)),
        jokers=1,
        # This project's DJ Wild procedure is 687a.9 only: every rule of the table core cites it,
        # the shuffler's failures its (a)(1).
        lettering={name: "687a.9" for name in RULE_NAMES}
        | {"shuffle_failed": "687a.9(a)(1)", "shuffler_out_of_order": "687a.9(a)(1)"},
        other_rules="687a.9",
        # 687a.9(a)(1): dealt from the hand, the deck is shuffled by an automated shuffler; the
        # table has no dealing shoe (687a.9(a)(2)) and no reader.
        shuffler_section="687a.9(a)(1)",
        dealt_from_hand="687a.9(a)(2)",
        wagers=(WagerKind("progressive", "Progressive", "687a.9(b)", optional=True),),
    )
)
