"""A game's table options: what the certificate holder's Rules Submission chooses.

One TOML file per game in ``config/games/``. Loading validates every key and refuses a bad file
with one line naming the file, the key and the rule, e.g.::

    config/games/down-under.toml: wagers.match_the_dealer: 685a.6(e): Match-the-Dealer is
    offered only with six- or eight-deck batches, not 4

Keys under ``[rulings]`` are the readings of ambiguous text listed in docs/rulings.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, Field, ValidationError, create_model, field_validator

from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError, RuleViolation
from controller.games import GameId, GameSpec, game_ids, game_spec, registered, wager_kinds
from controller.schema import Document, Rule, first_error, one_line

MAX_BOXES = 6  # 673a.2(a), 665a.2(a), 685a.2(a): no more than six players


@dataclass(frozen=True)
class Rulings:
    """Choices where the text can be read two ways (docs/rulings.md)."""

    min_chip: int = 1  # G3
    settlement_procedure: int = 1  # G5: 673a.7(t) / 685a.7(r) procedure (1) or (2)
    busted_hand_pushes_on_dealer_22: bool = False  # D1
    second_chance_stake: str = "current"  # D3: current | original
    insurance_after_paid_blackjack: bool = False  # D4
    surrender_double_down: str = "half"  # A2: half | lost
    reader_reveals_hole_card: bool = False  # 665a.13(h)(1),(2): does this reader show players?
    match_the_dealer_pays: str = "best"  # U1: best | each
    dealer_ace_ace: int = 22  # U3: 22 | 12
    large_pair_rule: str = "two_card_hand"  # U4: two_card_hand | first_two_cards
    dealer_22_returns_busted: bool = False  # U5


_CHOICES: dict[str, tuple[object, ...]] = {
    "settlement_procedure": (1, 2),
    "second_chance_stake": ("current", "original"),
    "surrender_double_down": ("half", "lost"),
    "match_the_dealer_pays": ("best", "each"),
    "dealer_ace_ace": (22, 12),
    "large_pair_rule": ("two_card_hand", "first_two_cards"),
}

# Rulings every game reads; each other ruling means something only in the chapters of the games
# that list it (GameSpec.rulings), and a key for another game is a mistake worth refusing
# (someone copied the wrong file).
GENERAL_RULINGS: Final = ("min_chip",)


def _ruling_games(key: str) -> tuple[GameSpec, ...] | None:
    """The games a ruling applies to; None: every game (a general ruling)."""
    if key in GENERAL_RULINGS:
        return None
    return tuple(g for g in registered() if key in g.rulings)


def optional_wager_keys() -> tuple[str, ...]:
    """The optional wagers a game file's [wagers] may name: every registered game's
    (GameSpec.optional_wagers), in registration order."""
    return tuple(dict.fromkeys(w.key for g in registered() for w in g.optional_wagers))


# The largest chip unit (G3) a game file may name: larger is no chip at a table, and amounts in
# units of it would overflow what a keypad keys and the archive stores (docs/rulings.md).
MAX_CHIP_UNIT: Final = 100_000


class OptionViolation(RuleViolation):
    """A game option the chapter forbids, with the game file's ``key`` that set it (the refusal
    names the key the operator must change, which the section alone does not tell)."""

    def __init__(self, key: str, section: str, message: str) -> None:
        super().__init__(section, message)
        self.key = key


@dataclass(frozen=True)
class GameOptions:
    game: GameId
    decks: int  # per batch
    boxes: int = MAX_BOXES
    # 673a.6(e), 665a.6(g), 685a.6(f): adjacent boxes one player may bet on in a round (the Rules
    # Submission names it; not the number of seats, which is ``boxes``).
    boxes_per_player: int = 2
    # 673a.6(b), 665a.6(b), 685a.6(b): the house may bar a patron who sat out a round of this
    # shoe from wagering until the reshuffle (or until the floor lets him back in).
    bar_non_wagering: bool = False
    # 673a.2(d), 665a.2(d), 685a.2(d): refuse rounds until the reader's daily inspection is
    # recorded (off until the dealer and floor consoles carry the inspection at every table).
    reader_inspection_required: bool = False
    automated_shuffler: bool = True  # two batches of different back colours (…3(b))
    # An approved shoe that reshuffles and counts by itself, or a continuous shuffler (673a.5(h),
    # 665a.5(h), 685a.5(h); 685a.3(a)): no cut, no cover card, no batch alternation.
    self_shuffling_shoe: bool = False
    # 673a.5(a), 665a.5(a), 685a.5(a): a shuffler that inserts the stack directly into the dealing
    # shoe, where no person can cut (ruling G13). Off: the dealer takes the stack out of the
    # shuffler and the cut and cover card of 5(b)-(e) follow, as after a shuffle by hand.
    direct_insert_shuffler: bool = False
    # The optional wagers the game file's [wagers] offers, by key (the game's declared
    # GameSpec.optional_wagers); read with offers().
    optional_wagers: frozenset[str] = frozenset()
    rulings: Rulings = field(default_factory=Rulings)
    # Rules of the chapter switched off, for ``tablectl simulate --without`` only (to show what
    # each contributes to an edge); never read from a game file, never at a table.
    without: frozenset[str] = frozenset()

    @property
    def spec(self) -> GameSpec:
        return game_spec(self.game)

    def offers(self, wager: str) -> bool:
        """The game file offers this optional wager."""
        return wager in self.optional_wagers

    # The shipped games' optional wagers by name, for the code that applies one chapter's own.
    @property
    def bust_it(self) -> bool:
        return self.offers("bust_it")  # 665a.6(f)

    @property
    def match_the_dealer(self) -> bool:
        return self.offers("match_the_dealer")  # 685a.6(e)

    @property
    def progressive(self) -> bool:
        return self.offers("progressive")  # 687a.9(b)

    @property
    def shuffling_device(self) -> bool:
        """The table shuffles with a device (a batch shuffler or a self-shuffling shoe): the cards
        are shuffled by hand only once it is marked out of order (673a.13(l))."""
        return self.automated_shuffler or self.self_shuffling_shoe

    def validate(self) -> None:
        """Raise RuleViolation naming the section when the options break the chapter (an
        OptionViolation, naming the game file's key too, for every check of a key but the decks)."""
        spec = self.spec
        try:
            spec.check_decks(self.decks)
        except RuleViolation as e:
            raise OptionViolation("decks_per_batch", e.section, e.message) from None
        if not 1 <= self.boxes <= MAX_BOXES:
            raise OptionViolation(
                "boxes",
                f"{spec.chapter}.2(a)",
                f"a table has 1 to {MAX_BOXES} betting positions, not {self.boxes}",
            )
        adjacent = spec.adjacent_boxes
        if adjacent and not 1 <= self.boxes_per_player <= self.boxes:
            raise OptionViolation(
                "boxes_per_player",
                adjacent,
                f"a player may bet on 1 to {self.boxes} adjacent boxes, not {self.boxes_per_player}",
            )
        for name in sorted(self.optional_wagers):
            kind = wager_kinds().get(name)
            if kind is not None and kind.decks and self.decks not in kind.decks:
                raise OptionViolation(
                    f"wagers.{name}", kind.section, kind.decks_refusal.format(decks=self.decks)
                )
        from_hand = spec.dealt_from_hand
        if from_hand and self.self_shuffling_shoe:
            raise OptionViolation(
                "self_shuffling_shoe",
                from_hand,
                f"{spec.called} is dealt from the dealer's hand, not from a"
                " shoe; its shuffler is automated_shuffler (the stacked deck goes into the hand)",
            )
        if from_hand and not self.automated_shuffler:
            raise OptionViolation(
                "automated_shuffler",
                spec.shuffler_section,
                f"{spec.called} dealt from the hand is shuffled by an automated shuffler",
            )
        if self.direct_insert_shuffler and (not self.automated_shuffler or from_hand):
            raise OptionViolation(
                "direct_insert_shuffler",
                from_hand or f"{spec.chapter}.5(a)",
                "a direct-insert shuffler is an automated shuffler that loads the dealing shoe",
            )
        if self.self_shuffling_shoe and self.automated_shuffler:
            # Ruling G12: 673a.3(b) governs a shuffler that stores one batch while the other is dealt; 5(h)
            # an approved shoe that reshuffles and counts by itself. A table has one or the other.
            raise OptionViolation(
                "self_shuffling_shoe",
                f"{spec.chapter}.5(h)",
                "a self-shuffling shoe replaces the batch shuffler; set automated_shuffler = false",
            )
        offered = {w.key for w in spec.optional_wagers}
        for name in sorted(self.optional_wagers):
            if name not in offered:
                owners = [g for g in registered() if any(w.key == name for w in g.optional_wagers)]
                if not owners:
                    raise OptionViolation(
                        "wagers", f"{spec.chapter}.6", f"no game offers an optional {name} wager"
                    )
                raise OptionViolation(
                    "wagers",
                    wager_kinds()[name].section,
                    f"the {name} wager belongs to {' and '.join(g.title for g in owners)}",
                )
        if not 1 <= self.rulings.min_chip <= MAX_CHIP_UNIT:
            raise OptionViolation(
                "rulings.min_chip", "G3", f"min_chip must be a chip unit from 1 to {MAX_CHIP_UNIT}"
            )


def default_options(game: GameId | str, decks: int | None = None) -> GameOptions:
    """The game as a table would commonly run it, every optional wager the chapter allows at this
    number of decks offered (Match-the-Dealer only with six or eight decks, 685a.6(e))."""
    spec = game_spec(game)
    decks = spec.default_decks if decks is None else decks
    offered = frozenset(w.key for w in spec.optional_wagers if not w.decks or decks in w.decks)
    return GameOptions(game=spec.id, decks=decks, boxes=MAX_BOXES, optional_wagers=offered)


def _one_of(choices: tuple[object, ...]) -> Callable[[object], object]:
    def check(value: object) -> object:
        if value not in choices:
            raise ValueError("not a choice")
        return value

    return check


_WORDS: Final[dict[type, str]] = {int: "an integer", bool: "true or false", str: "text"}


def _ruling_field(name: str, default: object) -> Any:
    kind = type(default)
    if name in _CHOICES:
        rule = f"must be one of {' | '.join(repr(c) for c in _CHOICES[name])}"
        return (Annotated[kind, AfterValidator(_one_of(_CHOICES[name])), Rule(rule)] | None, None)
    return (Annotated[kind, Rule(f"must be {_WORDS[kind]}")] | None, None)


# [rulings]: one optional key per field of Rulings, of its type (and among its choices).
_RulingsDoc: Final = create_model(
    "_RulingsDoc",
    __base__=Document,
    **{f.name: _ruling_field(f.name, f.default) for f in fields(Rulings)},
)
Flag = Annotated[bool, Rule("must be true or false")]
Whole = Annotated[int, Rule("must be an integer")]


class GameFile(Document):
    """A game file's keys and their types; the game's own checks cite the chapter (validate)."""

    game: str  # checked first: which game decides what the other keys may say
    decks_per_batch: Whole | None = None
    boxes: Whole | None = None
    boxes_per_player: Whole | None = None
    bar_non_wagering: Flag | None = None
    reader_inspection_required: Flag | None = None
    automated_shuffler: Flag | None = None
    self_shuffling_shoe: Flag | None = None
    direct_insert_shuffler: Flag | None = None
    # [wagers]: the optional wagers offered, each true or false (the keys are the registered
    # games' optional wagers: options_from_dict refuses any other).
    wagers: dict[str, Flag] = Field(default_factory=dict)
    rulings: Any = Field(default=None, validate_default=True)  # a _RulingsDoc (made from Rulings)

    @field_validator("rulings", mode="plain")
    @classmethod
    def _rulings(cls, value: object) -> BaseModel:
        return _RulingsDoc.model_validate({} if value is None else value)


_UNKNOWN: Final = {"rulings": "unknown ruling (see docs/rulings.md)"}


def options_from_dict(doc: dict[str, Any], where: str) -> GameOptions:
    """Build and validate options from a parsed TOML document; errors name ``where`` and the key."""
    games = ", ".join(game_ids())
    if "game" not in doc:
        raise ConfigError(f"{where}: game: missing (one of {games})")
    if not isinstance(doc["game"], str) or doc["game"] not in game_ids():
        raise ConfigError(f"{where}: game: unknown game {str(doc['game'])[:40]!r} (one of {games})")
    spec = game_spec(doc["game"])
    gid = spec.id
    try:
        file = GameFile.model_validate(doc)
    except ValidationError as e:
        first = first_error(e)
        loc = first["loc"]
        if first["type"] == "extra_forbidden" and len(loc) == 2 and loc[0] in _UNKNOWN:
            raise ConfigError(f"{where}: {loc[0]}.{loc[1]}: {_UNKNOWN[str(loc[0])]}") from None
        raise ConfigError(one_line(e, where, model=GameFile)) from None
    given = file.model_dump(exclude_none=True, exclude={"game", "wagers", "rulings"})
    for key in ("boxes_per_player", "bar_non_wagering", "reader_inspection_required"):
        if key in given and not spec.adjacent_boxes:
            raise ConfigError(f"{where}: {key}: applies to the blackjack games, not {spec.title}")
    known = optional_wager_keys()
    for key in file.wagers:
        if key not in known:
            raise ConfigError(f"{where}: wagers.{key}: unknown optional wager (one of {', '.join(known)})")
    kwargs: dict[str, Any] = {"optional_wagers": frozenset(k for k, on in file.wagers.items() if on)}
    if "decks_per_batch" in given:
        kwargs["decks"] = given.pop("decks_per_batch")
    kwargs.update(given)
    ruling_kwargs: dict[str, Any] = file.rulings.model_dump(exclude_none=True)
    for key in ruling_kwargs:
        ruling_games = _ruling_games(key)
        if ruling_games is not None and spec not in ruling_games:
            titles = " and ".join(g.title for g in ruling_games)
            raise ConfigError(f"{where}: rulings.{key}: applies to {titles}, not {spec.title}")
    opts = replace(default_options(gid), rulings=Rulings(**ruling_kwargs), **kwargs)
    try:
        opts.validate()
    except OptionViolation as e:
        raise ConfigError(f"{where}: {e.key}: {e}") from None
    return opts


def options_to_dict(options: GameOptions) -> dict[str, Any]:
    """The TOML-shaped document that options_from_dict reads back to the same options."""
    spec = options.spec
    rulings = {
        f.name: getattr(options.rulings, f.name)
        for f in fields(Rulings)
        if f.name in GENERAL_RULINGS or f.name in spec.rulings
    }
    wagers = {w.key: options.offers(w.key) for w in spec.optional_wagers}
    per_player = (
        {
            "boxes_per_player": options.boxes_per_player,
            "bar_non_wagering": options.bar_non_wagering,
            "reader_inspection_required": options.reader_inspection_required,
        }
        if spec.adjacent_boxes
        else {}
    )
    return {
        "game": options.game.value,
        "decks_per_batch": options.decks,
        "boxes": options.boxes,
        **per_player,
        "automated_shuffler": options.automated_shuffler,
        "self_shuffling_shoe": options.self_shuffling_shoe,
        **({"direct_insert_shuffler": True} if options.direct_insert_shuffler else {}),
        "wagers": wagers,
        "rulings": rulings,
    }


def load_game_options(path: Path | str) -> GameOptions:
    p = Path(path)
    try:
        doc = read_toml(p)
    except InputRefused as e:
        raise ConfigError(f"{p}: {e}") from None
    return options_from_dict(doc, str(p))
