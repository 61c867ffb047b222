"""The games, device profiles and example tables that ship with tablectl, wherever it is installed.

They live in the repository's ``config/`` folder and are installed as package data of
``controller`` (``controller/shipped`` is a link to ``config/`` that the wheel build follows), so
``importlib.resources`` finds them in a source checkout, an editable install and a wheel alike.

A config file names another file either by a path relative to its own folder or, when the
relative path does not exist, by the shipped file of the same kind and name: a table file copied
out of the checkout (or written from scratch with ``game = "down-under"``) still finds its game.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Literal

Kind = Literal["games", "devices", "tables", "prometheus"]


def shipped_dir(kind: Kind) -> Path:
    """The folder of shipped files of one kind (a real folder: tablectl is never run zipped)."""
    return Path(str(importlib.resources.files("controller").joinpath("shipped", kind)))


def shipped_names(kind: Kind) -> list[str]:
    return sorted(p.stem for p in shipped_dir(kind).glob("*.toml"))


def shipped_file(kind: Kind, name: str) -> Path | None:
    """The shipped file called ``name`` (with or without ``.toml``), or None."""
    stem = Path(name).name.removesuffix(".toml")
    path = shipped_dir(kind) / f"{stem}.toml"
    return path if stem and path.is_file() else None


def resolve_ref(base_dir: Path, ref: str, kind: Kind) -> Path | None:
    """A file named in a config: relative to ``base_dir`` when it is there, else the shipped file
    of that name; None when neither exists."""
    local = base_dir / ref
    if local.is_file():
        return local.resolve()
    return shipped_file(kind, ref)


def table_file(game: str) -> Path:
    """The shipped example table of a game (config/tables/<game>.toml)."""
    path = shipped_file("tables", game)
    if path is None:
        raise FileNotFoundError(
            f"no shipped table for {game!r} (shipped: {', '.join(shipped_names('tables'))})"
        )
    return path
