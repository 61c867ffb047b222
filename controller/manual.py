"""``tablectl docs [PAGE]``: the manual that ships inside the package.

Help texts and error lines point to pages such as ``docs/mqtt.md``; an installed tablectl has no
checkout beside it, so the pages are package data (``controller/docs`` is a link to the
repository's ``docs/`` that the wheel build follows, as ``controller/shipped`` is for ``config/``)
and this command prints them: ``tablectl docs`` lists the pages, ``tablectl docs mqtt`` (or
``mqtt.md``, ``docs/mqtt.md``, ``devices/shoe``, ``docs/devices/``) prints one, ``--path`` prints
where it is instead (for a pager, an editor or a Markdown viewer).
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_OK, EXIT_USAGE = 0, 2


def docs_dir() -> Path:
    """The installed docs folder (a real folder: tablectl is never run zipped)."""
    return Path(str(importlib.resources.files("controller").joinpath("docs")))


def pages() -> list[str]:
    """Every page, by the name ``tablectl docs`` takes: ``mqtt.md``, ``devices/shoe.md``."""
    root = docs_dir()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))


def page_path(name: str) -> Path | None:
    """The page a pointer names, however it is written: ``docs/mqtt.md``, ``mqtt.md``, ``mqtt``,
    ``devices/shoe``, ``docs/devices/`` (a folder's README); None when there is none."""
    text = name.strip().removeprefix("./").removeprefix("docs/").rstrip(".")
    text = text.split("#", 1)[0]  # docs/mqtt.md#schemas: the page
    if text in ("", "/") or text.endswith("/"):
        text = f"{text.strip('/')}/README.md".lstrip("/")
    if not text.endswith(".md"):
        text += ".md"
    root = docs_dir().resolve()
    path = (root / text).resolve()
    if not path.is_relative_to(root) or not path.is_file():  # never a file outside the manual
        return None
    return path


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablectl docs",
        description="The manual shipped with tablectl: with no PAGE, the list of pages; with a PAGE, "
        "the page itself (Markdown). Every docs/... a help text or an error names is a PAGE here.",
    )
    p.add_argument("page", nargs="?", metavar="PAGE", help="e.g. mqtt, docs/install.md, devices/shoe")
    p.add_argument("--path", action="store_true", help="print where the page (or the manual) is instead")
    return p


def main(argv: Sequence[str]) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `tablectl docs mqtt | head`: the reader has read enough
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (so the exit's flush cannot fail again)
        return EXIT_OK


def _main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    if args.page is not None and args.page.strip().strip("./") in ("", "docs"):
        args.page = None  # docs/ itself: the list of pages
    if args.page is None:
        if args.path:
            print(docs_dir().resolve())
            return EXIT_OK
        width = max(len(name) for name in pages())
        for name in pages():
            print(f"{name:<{width}}  {_title(docs_dir() / name)}")
        return EXIT_OK
    path = page_path(args.page)
    if path is None:
        print(f"tablectl docs: no page {args.page!r}; the pages are: {', '.join(pages())}", file=sys.stderr)
        return EXIT_USAGE
    if args.path:
        print(path)
    else:
        sys.stdout.write(path.read_text(encoding="utf-8"))
    return EXIT_OK
