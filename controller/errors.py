"""Errors that name the rule they enforce.

Every refusal in tablectl carries the regulation section (or ruling id from docs/rulings.md) that
refuses it, so the one line a dealer, floorperson or tester sees says why:
``685a.7(i)(2): players may not surrender in Down Under Blackjack``.
"""

from __future__ import annotations


class TablectlError(Exception):
    """Base for every error tablectl reports as a one-line message."""


def short_reason(exc: BaseException) -> str:
    """The first line of an exception's text (at most 120 characters), for a one-line error about
    a library's failure (a broker, a TLS set-up): their texts can run to several lines."""
    text = str(exc).splitlines()
    return (text[0] if text and text[0] else type(exc).__name__)[:120]


class RuleViolation(TablectlError):
    """An action, wager or card the regulation forbids."""

    def __init__(self, section: str, message: str) -> None:
        self.section = section
        self.message = message
        super().__init__(f"{section}: {message}")


class ConfigError(TablectlError):
    """A configuration file that cannot be used. The message names the file, key and rule."""


class ScriptError(TablectlError):
    """A scripted round that is not well formed (not a rule violation: bad JSON, wrong types)."""
