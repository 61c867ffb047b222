"""Where each rule the table core enforces sits in each game's chapter.

Most subsections have the same letter in 673a, 665a and 685a (the batches in .3(b), the cut in
.5, the shoe in .7(a)-(d)); these are written once, e.g. ``"5(d)"``. Some do not: 685a numbers
its irregularities .12 where the others use .13, 665a's irregularities run one letter behind from
(h) on, and 665a's dealing procedure puts the reader in .7(g). Those are named by what they are
(:data:`controller.games.RULE_NAMES`), and each game's ``lettering`` places every one of them,
so a game never cites another chapter's letter.
"""

from __future__ import annotations

from controller.games import GameSpec, registered


def section(game: GameSpec, rule: str) -> str:
    """The section for ``rule`` (a name of RULE_NAMES, or a subsection with the same letter in
    every chapter that letters it) in ``game``'s chapter."""
    named = game.lettering.get(rule)
    if named is not None:
        return named
    return game.other_rules or f"{game.chapter}.{rule}"


def cited(game: GameSpec, rule: str) -> str:
    """``rule`` as ``section`` places it, or as it is when it is a whole section ("665a.6(e)")."""
    return rule if "." in rule else section(game, rule)


def sections_of(rule: str) -> frozenset[str]:
    """Every registered game's section for a named rule (e.g. every chapter's "reader_failed")."""
    return frozenset(g.lettering[rule] for g in registered())
