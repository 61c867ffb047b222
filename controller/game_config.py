"""A game's table options: what the certificate holder's Rules Submission chooses.

One TOML file per game in ``config/games/``. Loading validates every key and refuses a bad file
with one line naming the file, the key and the rule, e.g.::

    config/games/down-under.toml: wagers.match_the_dealer: 685a.6(e): Match-the-Dealer is
    offered only with six- or eight-deck batches, not 4

Keys under ``[rulings]`` are the readings of ambiguous text listed in docs/rulings.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError, RuleViolation
from controller.games import GameId, GameSpec, game_spec

MAX_BOXES = 6  # 673a.2(a), 665a.2(a), 685a.2(a): no more than six players
# Where the Rules Submission names how many adjacent boxes one player may bet on in a round.
ADJACENT_BOXES: dict[GameId, str] = {
    GameId.DOUBLE_BACK_JACK: "673a.6(e)",
    GameId.DOUBLE_ATTACK: "665a.6(g)",
    GameId.DOWN_UNDER: "685a.6(f)",
}


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
    match_both_cards: str = "best"  # U1: best | each
    dealer_ace_ace: int = 22  # U3: 22 | 12
    large_pair_rule: str = "two_card_hand"  # U4: two_card_hand | first_two_cards
    dealer_22_returns_busted: bool = False  # U5


_CHOICES: dict[str, tuple[object, ...]] = {
    "settlement_procedure": (1, 2),
    "second_chance_stake": ("current", "original"),
    "surrender_double_down": ("half", "lost"),
    "match_both_cards": ("best", "each"),
    "dealer_ace_ace": (22, 12),
    "large_pair_rule": ("two_card_hand", "first_two_cards"),
}

# Which rulings mean something in which chapter; a key for another game is a mistake worth
# refusing (someone copied the wrong file).
_RULING_GAMES: dict[str, tuple[GameId, ...]] = {
    # 665a.7(p) has one settlement procedure; only 673a.7(t) and 685a.7(r) offer two.
    "settlement_procedure": (GameId.DOUBLE_BACK_JACK, GameId.DOWN_UNDER),
    "busted_hand_pushes_on_dealer_22": (GameId.DOUBLE_BACK_JACK,),
    "second_chance_stake": (GameId.DOUBLE_BACK_JACK,),
    "insurance_after_paid_blackjack": (GameId.DOUBLE_BACK_JACK,),
    "surrender_double_down": (GameId.DOUBLE_ATTACK,),
    "reader_reveals_hole_card": (GameId.DOUBLE_ATTACK,),
    "match_both_cards": (GameId.DOWN_UNDER,),
    "dealer_ace_ace": (GameId.DOWN_UNDER,),
    "large_pair_rule": (GameId.DOWN_UNDER,),
    "dealer_22_returns_busted": (GameId.DOWN_UNDER,),
}

_WAGER_GAMES: dict[str, tuple[GameId, str]] = {
    "bust_it": (GameId.DOUBLE_ATTACK, "665a.6(f)"),
    "match_the_dealer": (GameId.DOWN_UNDER, "685a.6(e)"),
    "progressive": (GameId.DJ_WILD, "687a.9(b)"),
}


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
    bust_it: bool = False
    match_the_dealer: bool = False
    progressive: bool = False
    rulings: Rulings = field(default_factory=Rulings)

    @property
    def spec(self) -> GameSpec:
        return game_spec(self.game)

    def validate(self) -> None:
        """Raise RuleViolation naming the section when the options break the chapter."""
        spec = self.spec
        spec.check_decks(self.decks, automated_shuffler=self.automated_shuffler)
        if not 1 <= self.boxes <= MAX_BOXES:
            raise RuleViolation(
                f"{spec.chapter}.2(a)", f"a table has 1 to {MAX_BOXES} betting positions, not {self.boxes}"
            )
        adjacent = ADJACENT_BOXES.get(self.game)
        if adjacent is not None and not 1 <= self.boxes_per_player <= self.boxes:
            raise RuleViolation(
                adjacent, f"a player may bet on 1 to {self.boxes} adjacent boxes, not {self.boxes_per_player}"
            )
        if self.match_the_dealer and self.decks not in (6, 8):
            raise RuleViolation(
                "685a.6(e)",
                f"Match-the-Dealer is offered only with six- or eight-deck batches, not {self.decks}",
            )
        if self.self_shuffling_shoe and self.game is GameId.DJ_WILD:
            raise RuleViolation("687a.9(a)(1)", "DJ Wild dealt from the hand uses an automated shuffler")
        for name, (game, section) in _WAGER_GAMES.items():
            if getattr(self, name) and self.game != game:
                raise RuleViolation(section, f"the {name} wager belongs to {game_spec(game).title}")
        if self.rulings.min_chip < 1:
            raise RuleViolation("G3", "min_chip must be a positive chip unit")


def default_options(game: GameId | str, decks: int | None = None) -> GameOptions:
    """The game as a table would commonly run it, every optional wager the chapter allows at this
    number of decks offered (Match-the-Dealer only with six or eight decks, 685a.6(e))."""
    gid = GameId(game)
    spec = game_spec(gid)
    decks = spec.default_decks if decks is None else decks
    return GameOptions(
        game=gid,
        decks=decks,
        boxes=MAX_BOXES,
        bust_it=gid == GameId.DOUBLE_ATTACK,
        match_the_dealer=gid == GameId.DOWN_UNDER and decks in (6, 8),
        progressive=gid == GameId.DJ_WILD,
    )


def _expect(where: str, key: str, value: Any, kind: type | tuple[type, ...]) -> Any:
    # bool is an int in Python; a deck count of `true` is a typo, not 1.
    if isinstance(value, bool) and kind is not bool:
        raise ConfigError(f"{where}: {key}: expected {_kind_name(kind)}, got {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: {key}: expected {_kind_name(kind)}, got {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return {"int": "an integer", "bool": "true or false", "str": "text"}.get(kind.__name__, kind.__name__)


def options_from_dict(doc: dict[str, Any], where: str) -> GameOptions:
    """Build and validate options from a parsed TOML document; errors name ``where`` and the key."""
    known_top = {
        "game",
        "decks_per_batch",
        "boxes",
        "boxes_per_player",
        "bar_non_wagering",
        "reader_inspection_required",
        "automated_shuffler",
        "self_shuffling_shoe",
        "wagers",
        "rulings",
    }
    for key in doc:
        if key not in known_top:
            raise ConfigError(f"{where}: {key}: unknown key (expected one of {', '.join(sorted(known_top))})")
    if "game" not in doc:
        raise ConfigError(f"{where}: game: missing (one of {', '.join(g.value for g in GameId)})")
    try:
        gid = GameId(_expect(where, "game", doc["game"], str))
    except ValueError:
        raise ConfigError(
            f"{where}: game: unknown game {doc['game']!r} (one of {', '.join(g.value for g in GameId)})"
        ) from None
    opts = default_options(gid)
    kwargs: dict[str, Any] = {
        "bust_it": False,
        "match_the_dealer": False,
        "progressive": False,
    }
    if "decks_per_batch" in doc:
        kwargs["decks"] = _expect(where, "decks_per_batch", doc["decks_per_batch"], int)
    if "boxes" in doc:
        kwargs["boxes"] = _expect(where, "boxes", doc["boxes"], int)
    for key in ("boxes_per_player", "bar_non_wagering", "reader_inspection_required"):
        if key in doc and gid not in ADJACENT_BOXES:
            raise ConfigError(f"{where}: {key}: applies to the blackjack games, not {game_spec(gid).title}")
    if "boxes_per_player" in doc:
        kwargs["boxes_per_player"] = _expect(where, "boxes_per_player", doc["boxes_per_player"], int)
    for key in ("bar_non_wagering", "reader_inspection_required"):
        if key in doc:
            kwargs[key] = _expect(where, key, doc[key], bool)
    if "self_shuffling_shoe" in doc:
        kwargs["self_shuffling_shoe"] = _expect(
            where, "self_shuffling_shoe", doc["self_shuffling_shoe"], bool
        )
    if "automated_shuffler" in doc:
        kwargs["automated_shuffler"] = _expect(where, "automated_shuffler", doc["automated_shuffler"], bool)

    wagers = _expect(where, "wagers", doc.get("wagers", {}), dict)
    for key, value in wagers.items():
        if key not in _WAGER_GAMES:
            raise ConfigError(
                f"{where}: wagers.{key}: unknown optional wager (one of {', '.join(_WAGER_GAMES)})"
            )
        kwargs[key] = _expect(where, f"wagers.{key}", value, bool)

    rulings_doc = _expect(where, "rulings", doc.get("rulings", {}), dict)
    defaults = Rulings()
    ruling_kwargs: dict[str, Any] = {}
    names = {f.name for f in fields(Rulings)}
    for key, value in rulings_doc.items():
        if key not in names:
            raise ConfigError(f"{where}: rulings.{key}: unknown ruling (see docs/rulings.md)")
        default = getattr(defaults, key)
        _expect(where, f"rulings.{key}", value, type(default))
        if key in _CHOICES and value not in _CHOICES[key]:
            allowed = " | ".join(repr(c) for c in _CHOICES[key])
            raise ConfigError(f"{where}: rulings.{key}: {value!r} is not one of {allowed}")
        games = _RULING_GAMES.get(key)
        if games is not None and gid not in games:
            raise ConfigError(
                f"{where}: rulings.{key}: applies to {' and '.join(game_spec(g).title for g in games)}, "
                f"not {game_spec(gid).title}"
            )
        ruling_kwargs[key] = value

    opts = replace(opts, rulings=Rulings(**ruling_kwargs), **kwargs)
    try:
        opts.validate()
    except RuleViolation as e:
        key = _key_for(e.section)
        raise ConfigError(f"{where}: {key}: {e}") from None
    return opts


def options_to_dict(options: GameOptions) -> dict[str, Any]:
    """The TOML-shaped document that options_from_dict reads back to the same options."""
    rulings = {
        f.name: getattr(options.rulings, f.name)
        for f in fields(Rulings)
        if options.game in _RULING_GAMES.get(f.name, (options.game,))
    }
    wagers = {
        name: getattr(options, name) for name, (game, _) in _WAGER_GAMES.items() if game == options.game
    }
    per_player = (
        {
            "boxes_per_player": options.boxes_per_player,
            "bar_non_wagering": options.bar_non_wagering,
            "reader_inspection_required": options.reader_inspection_required,
        }
        if options.game in ADJACENT_BOXES
        else {}
    )
    return {
        "game": options.game.value,
        "decks_per_batch": options.decks,
        "boxes": options.boxes,
        **per_player,
        "automated_shuffler": options.automated_shuffler,
        "self_shuffling_shoe": options.self_shuffling_shoe,
        "wagers": wagers,
        "rulings": rulings,
    }


def _key_for(section: str) -> str:
    if section == "685a.6(e)":
        return "wagers.match_the_dealer"
    if section.endswith(".2(a)"):
        return "boxes"
    if section in ADJACENT_BOXES.values():
        return "boxes_per_player"
    if section == "G3":
        return "rulings.min_chip"
    if section in ("665a.6(f)", "687a.9(b)"):
        return "wagers"
    if section == "687a.9(a)(1)":
        return "self_shuffling_shoe"
    return "decks_per_batch"


def load_game_options(path: Path | str) -> GameOptions:
    p = Path(path)
    try:
        doc = read_toml(p)
    except InputRefused as e:
        raise ConfigError(f"{p}: {e}") from None
    return options_from_dict(doc, str(p))
