"""docs/compliance.md stays true: every section the code cites is listed (sections the table core
builds at run time included), every row names the tests that prove it and those tests exist and
run, and the counts at the end add up and leave no enforceable subsection without a row."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from controller.games import RULE_NAMES, registered
from controller.table.sections import section

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "compliance.md"
SECTION = re.compile(r"\b6[6-8][0-9]a\.[0-9]+(?:\([a-z0-9]+\))*")
NODE_ID = re.compile(r"`(tests/[^`]+?::[^`]+)`")
BLACKJACK_CHAPTERS = tuple(g.chapter for g in registered() if g.blackjack)
# The table core names a section by its letter (the same in every chapter) or by what it is
# (table/sections.py): t.sec("5(a)"), t.sec("reader_failed").
RUNTIME_SEC = re.compile(r'\bsec\("([^"]+)"\)')
# A section written with the chapter filled in at run time: f"{chapter}.6(d)", f"{spec.chapter}.8(a)".
CHAPTER_FSTRING = re.compile(r"\{[\w.]*chapter\}\.([0-9]+(?:\([a-z0-9]+\))*)")


def doc_parts() -> tuple[str, str]:
    text = DOC.read_text(encoding="utf-8")
    matrix, _, counts = text.partition("\n## Counts")
    assert counts, "docs/compliance.md has no '## Counts' part"
    return matrix, counts


def matrix_rows() -> list[str]:
    return [line for line in doc_parts()[0].splitlines() if line.startswith("| 6")]


def listed() -> set[str]:
    """Every section in the first column of the matrix's rows."""
    return {s for row in matrix_rows() for s in SECTION.findall(row.split("|")[1])}


def parents(sec: str) -> list[str]:
    out = [sec]
    while sec.endswith(")"):
        sec = sec[: sec.rindex("(")]
        out.append(sec)
    return out


def covered(sec: str, rows: set[str]) -> bool:
    """A row for the section itself, for a subsection of it, or for the whole of its parent."""
    return any(sec in parents(r) or r in parents(sec) for r in rows)


def cited_in_code() -> set[str]:
    found: set[str] = set()
    for path in sorted((ROOT / "controller").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found.update(SECTION.findall(text))
        for rule in RUNTIME_SEC.findall(text):
            # A named rule has a place in every game; a letter, in every chapter that letters it.
            games = [g for g in registered() if rule in RULE_NAMES or not g.other_rules]
            found.update(section(g, rule) for g in games)
        for sub in CHAPTER_FSTRING.findall(text):
            found.update(f"{ch}.{sub}" for ch in BLACKJACK_CHAPTERS)
    return found


def test_sections_built_at_run_time_are_found() -> None:
    code = cited_in_code()
    # sec("5(a)") in the table core, f"{chapter}.6(d)" in rules/round.py, _sec("reader_failed").
    assert {"665a.5(a)", "685a.5(a)", "685a.6(d)", "665a.13(i)", "685a.12(i)"} <= code


def test_every_section_the_code_cites_is_in_the_matrix() -> None:
    doc = listed()
    missing = sorted(s for s in cited_in_code() if not covered(s, doc))
    assert not missing, f"cited in controller/ but not in docs/compliance.md: {missing}"


COLLECTOR = """
import json, os
def pytest_collection_modifyitems(session, config, items):
    out = {it.nodeid: [m.name for m in it.iter_markers() if m.name in ("skip", "skipif", "xfail")]
           for it in items}
    with open(os.environ["TABLECTL_COLLECTED"], "w") as f:
        json.dump(out, f)
"""


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The node ids pytest collects from the files the matrix names, with any skip marks."""
    tmp = tmp_path_factory.mktemp("collect")
    (tmp / "tablectl_collector.py").write_text(COLLECTOR)
    out = tmp / "collected.json"
    files = sorted({n.split("::")[0] for row in matrix_rows() for n in NODE_ID.findall(row)})
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "TABLECTL_COLLECTED": str(out),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tablectl_collector", *files],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result: dict[str, list[str]] = json.loads(out.read_text())
    return result


def test_every_row_names_tests_that_exist_and_run(collected: dict[str, list[str]]) -> None:
    for row in matrix_rows():
        ids = NODE_ID.findall(row)
        assert ids, f"a row names no test: {row[:80]}"
        for node in ids:
            assert node in collected, f"{row.split('|')[1].strip()}: no such test {node}"
            assert not collected[node], f"{node} is marked {collected[node]}"


def expand(item: str) -> list[str]:
    """'673a.2(a)-(e)' -> 673a.2(a) ... 673a.2(e); '687a.9(a)(1)-(3)' likewise; else the item."""
    m = re.fullmatch(r"(.*)\(([a-z0-9])\)-\(([a-z0-9])\)", item)
    if m is None:
        return [item]
    prefix, first, last = m.groups()
    return [f"{prefix}({chr(c)})" for c in range(ord(first), ord(last) + 1)]


def first_column(counts: str, heading: str) -> set[str]:
    part = counts.split(heading, 1)[1].split("\n### ", 1)[0]
    rows = [line for line in part.splitlines() if line.startswith("| 6")]
    return {s for row in rows for s in SECTION.findall(row.split("|")[1])}


def test_the_counts_add_up_and_every_enforceable_subsection_has_a_row() -> None:
    _, counts = doc_parts()
    admin = first_column(counts, "### Administrative")
    partial = first_column(counts, "### In part")
    rows = listed()
    totals = re.findall(
        r"\*\*(6[6-8][0-9]a(?:\.9)?)\*\*: (\d+) subsections, (\d+) administrative, (\d+) enforceable; "
        r"(\d+) implemented and tested, (\d+) of them in part",
        counts,
    )
    lists = {chapter: body for body, chapter in re.findall(r"Subsections: ((6[6-8][0-9]a)[^\n]*)", counts)}
    assert {t[0] for t in totals} == {"673a", "665a", "685a", "687a.9"}
    everything: set[str] = set()
    for chapter, n, n_admin, n_enforceable, n_built, n_partial in totals:
        subs = [s for item in lists[chapter.split(".")[0]].split("; ") for s in expand(item.strip())]
        assert len(subs) == len(set(subs)) == int(n), chapter
        mine_admin = {s for s in admin if s in subs}
        mine_partial = {s for s in partial if s in subs}
        assert len(mine_admin) == int(n_admin), (chapter, sorted(mine_admin))
        assert int(n_enforceable) == int(n) - int(n_admin) == int(n_built), chapter
        assert len(mine_partial) == int(n_partial), (chapter, sorted(mine_partial))
        without_row = [s for s in subs if s not in admin and not covered(s, rows)]
        assert not without_row, f"{chapter}: enforceable but no row in the matrix: {without_row}"
        everything.update(subs)
    assert admin <= everything and partial <= everything
    assert not admin & partial
    assert all(any(s in parents(r) or r in parents(s) for s in everything) for r in rows), (
        "a row outside the counts"
    )


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split(" | ")]


def test_a_row_in_part_says_partly() -> None:
    """A subsection whose alternative is not built (the counts' "In part" list, e.g. the dealer's
    hand in the wrong area of 685a.12(h)) says so in its own row, not only at the end of the page."""
    _, counts = doc_parts()
    partial = first_column(counts, "### In part")
    for row in matrix_rows():
        sections, what = _cells(row)[0], _cells(row)[1]
        if set(SECTION.findall(sections)) & partial:
            assert what.startswith("Partly:"), f"{sections}: in part, but the row does not say 'Partly:'"


# What a test builds that the shipped game files (config/games/) do not: a table shuffled by hand,
# a self-shuffling shoe, a direct-insert shuffler. A row that only such tests prove says which
# configuration it is about (the words here); otherwise the shipped default must be built too.
NON_DEFAULT: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "a table shuffling by hand": (
        re.compile(r"\bmanual\(|automated_shuffler=False|HandShuffled|hand_shuffle|_manual_in_shoe"),
        re.compile(r"by hand|out of order|13\(l\)|no automated shuffler|manual", re.IGNORECASE),
    ),
    "a self-shuffling shoe": (
        re.compile(r"self_shuffling_shoe=True"),
        re.compile(r"self_shuffling_shoe|self-shuffling", re.IGNORECASE),
    ),
    "a direct-insert shuffler": (
        re.compile(r"direct_insert_shuffler=True"),
        re.compile(r"direct_insert_shuffler|direct-insert", re.IGNORECASE),
    ),
}


def _test_source(node: str, cache: dict[str, tuple[str, dict[str, str]]]) -> str:
    """The test function's source and that of the module-level helpers it calls (one level)."""
    import ast

    path, _, name = node.partition("::")
    name = name.split("[", 1)[0]
    if path not in cache:
        text = (ROOT / path).read_text(encoding="utf-8")
        funcs = {
            f.name: ast.get_source_segment(text, f) or ""
            for f in ast.parse(text).body
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        cache[path] = (text, funcs)
    _, funcs = cache[path]
    body = funcs.get(name, "")
    called = set(re.findall(r"\b([A-Za-z_]\w*)\(", body))
    return body + "".join(funcs[c] for c in called if c in funcs and c != name)


def test_each_row_is_proved_on_the_shipped_configuration_or_names_its_own() -> None:
    """A row whose tests all build a configuration the shipped game files do not use (a table
    shuffled by hand, a self-shuffling shoe, a direct-insert shuffler) proves nothing about the
    default, which behaves differently there: it fails unless the row says which configuration
    it is about. (Issue 24: the cut rows cited hand-shuffled tables only, while every shipped
    table has a batch shuffler.)"""
    cache: dict[str, tuple[str, dict[str, str]]] = {}
    unproved = []
    for row in matrix_rows():
        cells = _cells(row)
        nodes = NODE_ID.findall(row)
        builds = [
            {name for name, (marker, _) in NON_DEFAULT.items() if marker.search(_test_source(n, cache))}
            for n in nodes
        ]
        if any(not b for b in builds):
            continue  # at least one test builds the shipped configuration
        alternatives = set.intersection(*builds) if builds else set()
        named = {a for a in alternatives if NON_DEFAULT[a][1].search(cells[1])}
        if not named:
            unproved.append(f"{cells[0]}: every test builds {' or '.join(sorted(set().union(*builds)))}")
    assert not unproved, "rows not proved on the shipped configuration: " + "; ".join(unproved)
