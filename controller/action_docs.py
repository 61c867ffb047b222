"""The allow-list of actions as the Markdown table docs/install.md and docs/mqtt.md carry.

``python -m controller.action_docs`` rewrites the tables between their markers;
tests/supervisor/test_actions.py fails when a doc and the allow-list differ.
"""

from __future__ import annotations

from pathlib import Path

from controller.actions import ACTIONS, FLOOR, ROLES


def markdown_table(roles: frozenset[str] = ROLES) -> str:
    """The allow-list as the Markdown table of docs/install.md and docs/mqtt.md."""
    lines = ["| name | roles | section | args | what |", "|---|---|---|---|---|"]
    for a in ACTIONS.values():
        if not a.roles & roles:
            continue
        args = ", ".join(f"`{k}` ({v.describe()})" for k, v in a.args.items())
        lines.append(f"| `{a.name}` | {', '.join(sorted(a.roles))} | {a.section} | {args} | {a.doc} |")
    return "\n".join(lines)


# The docs that carry the table, and which roles' actions each lists.
DOCS = {"docs/install.md": ROLES, "docs/mqtt.md": frozenset({FLOOR})}
_BEGIN = "<!-- actions: generated from controller/actions.py -->\n"
_END = "\n<!-- /actions -->"


def generated(text: str) -> str | None:
    """The generated table in a doc's text, None when the markers are missing."""
    begin, end = text.find(_BEGIN), text.find(_END)
    return None if begin < 0 or end < begin else text[begin + len(_BEGIN) : end]


def write_docs(root: Path) -> None:
    """Rewrite the generated tables of DOCS under ``root``."""
    for doc, roles in DOCS.items():
        path = root / doc
        text = path.read_text(encoding="utf-8")
        old = generated(text)
        if old is None:
            raise SystemExit(f"{path}: no generated actions table (the markers are missing)")
        path.write_text(
            text.replace(_BEGIN + old + _END, _BEGIN + markdown_table(roles) + _END), encoding="utf-8"
        )


if __name__ == "__main__":  # pragma: no cover
    write_docs(Path(__file__).resolve().parents[1])
