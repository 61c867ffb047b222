"""The four games: what each chapter fixes about cards and shoes.

Facts here come straight from the text and are not configurable; what a certificate holder chooses
(decks where the chapter allows a choice, optional wagers, number of boxes, readings of ambiguous
text) lives in :mod:`controller.game_config`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from controller.cards import JOKER, RANKS, SUITS, Card, card, standard_deck
from controller.errors import RuleViolation


class GameId(StrEnum):
    DOUBLE_BACK_JACK = "double-back-jack"
    DOUBLE_ATTACK = "double-attack"
    DOWN_UNDER = "down-under"
    DJ_WILD = "dj-wild"


def _deck_52(back: str | None) -> list[Card]:
    return standard_deck(back)


def _deck_48(back: str | None) -> list[Card]:
    # 665a.3(a): "the 10 of each suit removed from each deck".
    return [card(r, s, back) for s in SUITS for r in RANKS if r != "10"]


def _deck_53(back: str | None) -> list[Card]:
    # 687a: 52 cards and the DJ Wild joker; the stub counter checks for 53 (687a.9(f)).
    return [*standard_deck(back), JOKER.with_back(back)]


@dataclass(frozen=True)
class GameSpec:
    id: GameId
    title: str
    chapter: str
    deck: Callable[[str | None], list[Card]]
    cards_per_deck: int
    default_decks: int
    decks_section: str  # where the chapter fixes the number of decks
    # The devices the chapter requires at every table of the game, by device kind, with the
    # subsection that requires each: the dealing shoe (…7(a)) and the card reader (…2(d)).
    required_devices: tuple[tuple[str, str], ...] = ()
    # Where the chapter governs the automated (batch) shuffler: 3(b) in the blackjack chapters;
    # 687a.9(a)(1) requires one when DJ Wild is dealt from the hand.
    shuffler_section: str = ""
    # The reader the chapter names: "peek" tells whether the hole card gives the dealer a Blackjack
    # (673a.7(h), 665a.7(g)); "masque" is the Masque Card Reader that lights its range (685a.2(d),
    # 685a.3(e)). Empty: no reader.
    reader_mode: str = ""
    # Where the chapter deals from the dealer's hand, so that a dealing shoe has no place at the
    # table (687a.9(a)(2)); empty for the games dealt from a shoe.
    dealt_from_hand: str = ""

    def check_decks(self, decks: int) -> None:
        """Refuse a deck count the chapter does not allow; the error names the section."""
        match self.id:
            case GameId.DOUBLE_BACK_JACK:
                # 673a.3(b): with a shuffler, at least two decks in all, split equally into two
                # batches: one deck a batch is enough (ruling D8), so (a)'s one deck is the floor.
                if decks < 1:
                    raise RuleViolation("673a.3(a)", "Double Back Jack is played with at least one deck")
            case GameId.DOUBLE_ATTACK:
                if decks != 8:
                    raise RuleViolation(
                        "665a.3(a)", f"Double Attack Blackjack uses eight-deck batches, not {decks}"
                    )
            case GameId.DOWN_UNDER:
                if decks not in (4, 5, 6, 8):
                    raise RuleViolation(
                        "685a.3(a)",
                        f"Down Under Blackjack uses a 4, 5, 6 or 8 deck batch, not {decks}",
                    )
            case GameId.DJ_WILD:
                if decks != 1:
                    raise RuleViolation("687a.9(f)", "DJ Wild Stud Poker is dealt from one 53-card deck")

    def batch(self, decks: int, back: str | None = None) -> list[Card]:
        """Every card of one batch, in deck order (unshuffled)."""
        out: list[Card] = []
        for _ in range(decks):
            out.extend(self.deck(back))
        return out


def _blackjack_devices(chapter: str) -> tuple[tuple[str, str], ...]:
    # "All cards shall be dealt from a dealing shoe" (…7(a)); "Each … table must have a card
    # reader device" (673a.2(d), 665a.2(d); the Masque Card Reader, 685a.2(d)).
    return (("shoe", f"{chapter}.7(a)"), ("reader", f"{chapter}.2(d)"))


GAMES: dict[GameId, GameSpec] = {
    GameId.DOUBLE_BACK_JACK: GameSpec(
        GameId.DOUBLE_BACK_JACK, "Double Back Jack", "673a", _deck_52, 52, 6, "673a.3(a)",
        _blackjack_devices("673a"), "673a.3(b)", "peek",
    ),
    GameId.DOUBLE_ATTACK: GameSpec(
        GameId.DOUBLE_ATTACK, "Double Attack Blackjack", "665a", _deck_48, 48, 8, "665a.3(a)",
        _blackjack_devices("665a"), "665a.3(b)", "peek",
    ),
    GameId.DOWN_UNDER: GameSpec(
        GameId.DOWN_UNDER, "Down Under Blackjack", "685a", _deck_52, 52, 6, "685a.3(a)",
        _blackjack_devices("685a"), "685a.3(b)", "masque",
    ),
    GameId.DJ_WILD: GameSpec(
        GameId.DJ_WILD, "DJ Wild Stud Poker", "687a", _deck_53, 53, 1, "687a.9(f)", (), "687a.9(a)(1)", "",
        "687a.9(a)(2)",
    ),
}  # fmt: skip

BLACKJACK_GAMES = (GameId.DOUBLE_BACK_JACK, GameId.DOUBLE_ATTACK, GameId.DOWN_UNDER)


def game_spec(name: str) -> GameSpec:
    try:
        return GAMES[GameId(name)]
    except ValueError:
        known = ", ".join(g.value for g in GameId)
        raise RuleViolation("game", f"unknown game {name!r} (one of {known})") from None
