"""docs/compliance.md stays true: every section the code cites is listed, every listed section is
cited by a test (a test citing a subsection of a listed section counts)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
SECTION = re.compile(r"\b6[6-8][0-9]a\.[0-9]+(?:\([a-z0-9]+\))*")


def cited_in(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for p in paths:
        found.update(SECTION.findall(p.read_text(encoding="utf-8")))
    return found


def parents(section: str) -> list[str]:
    out = [section]
    while section.endswith(")"):
        section = section[: section.rindex("(")]
        out.append(section)
    return out


def listed() -> set[str]:
    """Every section in the first column of the matrix's rows."""
    text = (ROOT / "docs" / "compliance.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| 6")]
    return {s for row in rows for s in SECTION.findall(row.split("|")[1])}


def test_every_section_the_code_cites_is_in_the_matrix() -> None:
    doc = listed()
    code = cited_in(sorted((ROOT / "controller").rglob("*.py")))
    # A bare "673a.11" is covered by its rows "673a.11(a)", "673a.11(b)"; "673a.7(l)(1)" by "673a.7(l)".
    missing = sorted(s for s in code if not any(s in parents(d) or d in parents(s) for d in doc))
    assert not missing, f"cited in controller/ but not in docs/compliance.md: {missing}"


def test_every_section_in_the_matrix_is_cited_by_a_test() -> None:
    tests = cited_in(sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.json")))
    covered = {p for s in tests for p in parents(s)}
    untested = sorted(s for s in listed() if s not in covered)
    assert not untested, f"listed in docs/compliance.md but cited by no test: {untested}"
