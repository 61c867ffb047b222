"""Where each rule the table core enforces sits in each chapter.

Most subsections have the same letter in 673a, 665a and 685a (the batches in .3(b), the cut in
.5, the shoe in .7(a)-(d)); these are written once, e.g. ``"5(d)"``. Some do not: 685a numbers
its irregularities .12 where the others use .13, 665a's irregularities run one letter behind from
(h) on, and 665a's dealing procedure puts the reader in .7(g). Those are named by what they are.
DJ Wild's procedure in this project is 687a.9 only.
"""

from __future__ import annotations

from typing import Final

BY_NAME: Final[dict[str, dict[str, str]]] = {
    "peek": {"673a": "673a.7(h)", "665a": "665a.7(g)", "685a": "685a.7(h)"},
    "decisions": {"673a": "673a.7(i)", "665a": "665a.7(h)(2)", "685a": "685a.7(i)(2)"},
    "face_up": {"673a": "673a.13(a)", "665a": "665a.13(a)", "685a": "685a.12(a)"},
    "drawn_in_error": {"673a": "673a.13(b)", "665a": "665a.13(b)", "685a": "685a.12(b)"},
    "exposed_in_error": {"673a": "673a.13(c)", "665a": "665a.13(c)", "685a": "685a.12(c)"},
    "no_cards_dead": {"673a": "673a.13(g)", "665a": "665a.13(f)", "685a": "685a.12(f)"},
    "card_not_dealt": {"673a": "673a.13(h)", "665a": "665a.13(g)", "685a": "685a.12(g)"},
    "deal": {"673a": "673a.7(e)", "665a": "665a.7(f)", "685a": "685a.7(e)"},
    # Wagers other than those the procedure offers go down before the first card; 665a.6 has no
    # such clause (its Double Attack wager comes after the up card).
    "wager_timing": {"673a": "673a.6(c)", "665a": "665a.6", "685a": "685a.6(c)"},
    "insufficient_cards": {"673a": "673a.13(f)", "665a": "665a.13(e)", "685a": "685a.12(e)"},
    "dealer_extra": {"673a": "673a.13(d)", "665a": "665a.13(d)", "685a": "685a.12(d)"},
    "reader_misuse": {"673a": "673a.13(i)", "665a": "665a.13(h)(2)", "685a": "685a.12(h)"},
    "reader_failed": {"673a": "673a.13(j)", "665a": "665a.13(i)", "685a": "685a.12(i)", "687a": "687a.9"},
    "shuffle_failed": {
        "673a": "673a.13(k)", "665a": "665a.13(j)", "685a": "685a.12(j)", "687a": "687a.9(a)(1)",
    },
    # The record that lets every hand be reconstructed after a question or dispute: the journal.
    "reconstruction": {"673a": "673a.7(u)", "665a": "665a.7(q)", "685a": "685a.7(s)"},
    "shuffler_out_of_order": {
        "673a": "673a.13(l)", "665a": "665a.13(k)", "685a": "685a.12(k)", "687a": "687a.9(a)(1)",
    },
}  # fmt: skip


def section(chapter: str, rule: str) -> str:
    """The section for ``rule`` (a name above, or a subsection with the same letter everywhere)."""
    named = BY_NAME.get(rule)
    if named is not None:
        return named.get(chapter, f"{chapter}.9")
    if chapter == "687a":
        return "687a.9"
    return f"{chapter}.{rule}"
