"""What a game is to tablectl: the facts its chapter fixes, as data.

A game is one :class:`GameSpec`, built in a module of its own and handed to
:func:`controller.games.registry.register`. Everything else (the game file's checks, the rules
engine, the table core's sections, ``config check``, the dispute account) reads the game from
the registry, so a game has no entry anywhere else to forget.

Facts here come straight from the text and are not configurable; what a certificate holder
chooses (decks where the chapter allows a choice, optional wagers, number of boxes, readings of
ambiguous text) lives in :mod:`controller.game_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Final

from controller.cards import JOKER, RANKS, SUITS, Card, card
from controller.errors import RuleViolation


class GameId(str):
    """A game's name, as its game file's ``game`` and the journal write it ("down-under").

    Open: every registered game's name is a GameId. The games tablectl ships are named below for
    the code that applies one chapter's own rule; a new game needs no name here.
    """

    __slots__ = ()

    DOUBLE_BACK_JACK: ClassVar[GameId]
    DOUBLE_ATTACK: ClassVar[GameId]
    DOWN_UNDER: ClassVar[GameId]
    DJ_WILD: ClassVar[GameId]

    @property
    def value(self) -> str:
        """The name as plain text (what an enum member's ``value`` was)."""
        return str(self)


GameId.DOUBLE_BACK_JACK = GameId("double-back-jack")
GameId.DOUBLE_ATTACK = GameId("double-attack")
GameId.DOWN_UNDER = GameId("down-under")
GameId.DJ_WILD = GameId("dj-wild")

# The rules of the table core that sit at different letters in different chapters: every game's
# ``lettering`` places each of them (a rule with the same letter everywhere, such as the cut in
# "5(d)", is not named; see :func:`controller.table.sections.section`).
RULE_NAMES: Final = frozenset(
    {
        "peek",  # the dealer's Blackjack ends the round (…7(h); 665a.7(g))
        "decisions",  # the players' decisions (…7(i))
        "face_up",  # a card face up in the shoe (…13(a); 685a.12(a))
        "drawn_in_error",
        "exposed_in_error",
        "no_cards_dead",
        "card_not_dealt",
        "deal",  # the order of the deal (…7(e))
        "wager_timing",  # wagers other than those the procedure offers go down before the first card
        "insufficient_cards",
        "dealer_extra",
        "reader_misuse",
        "reader_failed",
        "shuffle_failed",
        "reconstruction",  # the record that lets every hand be reconstructed: the journal
        "shuffler_out_of_order",
    }
)


@dataclass(frozen=True)
class DeckRule:
    """How many decks a batch may hold, and where the chapter says so: exactly one of
    ``allowed``, or (``allowed`` empty) at least ``least``. ``refusal`` is the error's text, with
    ``{decks}`` for the number refused."""

    section: str
    refusal: str
    allowed: tuple[int, ...] = ()
    least: int = 1

    def check(self, decks: int) -> None:
        if (decks not in self.allowed) if self.allowed else decks < self.least:
            raise RuleViolation(self.section, self.refusal.format(decks=decks))


@dataclass(frozen=True)
class WagerKind:
    """A wager of the game: ``key`` as the journal's settlement lines and the game file's
    ``[wagers]`` write it, ``name`` as the dispute account says it, ``section`` where the chapter
    provides for it. ``optional``: offered only if the game file's ``[wagers]`` says so (the Rules
    Submission's choice), placed on the layout before the first card; ``at_most_bet``: no more
    than the box's Bet (665a.6(f)); ``decks``: the deck counts it may be offered with (empty: any),
    refused with ``decks_refusal`` (``{decks}`` for the number)."""

    key: str
    name: str
    section: str
    optional: bool = False
    at_most_bet: bool = False
    decks: tuple[int, ...] = ()
    decks_refusal: str = ""


@dataclass(frozen=True, eq=False)
class GameSpec:
    """One game: what its chapter fixes, everything the rest of tablectl asks of a game."""

    id: GameId
    title: str  # as the chapter names the game
    chapter: str
    default_decks: int
    deck_rule: DeckRule
    # Where each rule of RULE_NAMES sits in the chapter, e.g. {"peek": "673a.7(h)", ...}.
    lettering: Mapping[str, str]
    # "": a subsection the table core names by its letter ("5(d)") has that letter in this
    # chapter too; otherwise the one section every such rule cites (687a.9: DJ Wild's procedure
    # is one section).
    other_rules: str = ""
    # The deck: 52 cards without these ranks (665a.3(a): the 10s), with this many jokers (687a).
    without_ranks: tuple[str, ...] = ()
    jokers: int = 0
    # The devices the chapter requires at every table of the game, by device kind, with the
    # subsection that requires each (``config check`` and ``run`` refuse a table without one).
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
    # The blackjack procedure that plays a round, as "module:Class" (a subclass of
    # controller.rules.procedure.BlackjackProcedure, loaded when a round is played); empty for a
    # game the rules engine does not play round by round (DJ Wild).
    procedure: str = ""
    # Where the Rules Submission names how many adjacent boxes one player may bet on (673a.6(e));
    # every blackjack game has one.
    adjacent_boxes: str = ""
    wagers: tuple[WagerKind, ...] = ()
    # The offers the procedure makes (controller.rules.requests.OFFER_NAMES' names).
    offers: tuple[str, ...] = ()
    # The readings of ambiguous text (controller.game_config.Rulings' fields) that mean something
    # in this chapter only; a game file of another game naming one is refused.
    rulings: tuple[str, ...] = ()
    # Rules of the chapter `tablectl simulate --without` may switch off to show what each is worth:
    # name -> (the section, what is played instead). Never at a table.
    switchable: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # The title as an error's sentence names the game when it is short for it ("DJ Wild").
    short_title: str = ""

    @property
    def called(self) -> str:
        return self.short_title or self.title

    @property
    def blackjack(self) -> bool:
        """The rules engine plays this game's rounds (it has a blackjack procedure)."""
        return bool(self.procedure)

    @property
    def decks_section(self) -> str:
        """Where the chapter fixes the number of decks."""
        return self.deck_rule.section

    @property
    def cards_per_deck(self) -> int:
        return 4 * (len(RANKS) - len(self.without_ranks)) + self.jokers

    @property
    def optional_wagers(self) -> tuple[WagerKind, ...]:
        return tuple(w for w in self.wagers if w.optional)

    def check_decks(self, decks: int) -> None:
        """Refuse a deck count the chapter does not allow; the error names the section."""
        self.deck_rule.check(decks)

    def deck(self, back: str | None = None) -> list[Card]:
        """One deck, in deck order (suit by suit)."""
        cards = [card(r, s, back) for s in SUITS for r in RANKS if r not in self.without_ranks]
        return cards + [JOKER.with_back(back)] * self.jokers

    def batch(self, decks: int, back: str | None = None) -> list[Card]:
        """Every card of one batch, in deck order (unshuffled)."""
        out: list[Card] = []
        for _ in range(decks):
            out.extend(self.deck(back))
        return out


def blackjack_devices(chapter: str) -> tuple[tuple[str, str], ...]:
    """The devices a blackjack chapter requires: "All cards shall be dealt from a dealing shoe"
    (…7(a)); "Each … table must have a card reader device" (…2(d))."""
    return (("shoe", f"{chapter}.7(a)"), ("reader", f"{chapter}.2(d)"))
