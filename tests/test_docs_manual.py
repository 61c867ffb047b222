"""docs/ is a manual: each page says what is true now. History (which issue asked for what, what
a thing was before) lives in git, so no page names an issue by its number. The benchmarks pages
(docs/benchmarks.md, docs/benchmarks-*.md) are dated records of measurements and may say which
change a figure was taken for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# "issue 16", "Issues 11 and 12", "#38" (not a link's anchor: "[...](bring-up.md#2-the-table-file)").
ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w(/.])#\d+\b", re.IGNORECASE)


def _pages() -> list[Path]:
    pages = sorted(DOCS.rglob("*.md"))
    return [p for p in pages if not (p.parent == DOCS and p.name.startswith("benchmarks"))]


def test_the_manual_has_its_pages() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in _pages()}
    assert {"install.md", "reliability.md", "design.md", "devices/README.md"} <= names
    assert "benchmarks.md" not in names


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_no_page_names_an_issue(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in ISSUE.finditer(text)]
    assert not found, f"{page.relative_to(ROOT)} names issues (history lives in git): {found}"


def test_the_rule_catches_an_issue_number() -> None:
    for text in ("as issue 16 asked", "(Issue 23 item 1)", "issues 11 and 12", "see #38"):
        assert ISSUE.search(text), text
    for text in (
        "173a.7(g)",
        "HTTP 404",
        "the issuer",
        "(#heading)",
        "[the file](bring-up.md#2-the-table-file)",
    ):
        assert not ISSUE.search(text), text
