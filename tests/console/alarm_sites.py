"""Every alarm the code can raise, read from the code itself, so that a new alarm cannot be added
without the console walk (test_alarm_actions.py) raising it and pressing what it offers.

Three ways an alarm is made, each found in the source's syntax tree:

- ``raise_alarm(t, step, section, message, floor_action, halts)`` anywhere in controller/ (the
  table core: every journalled alarm);
- ``Stall(section, message, floor_action)`` in controller/supervisor/ (a wait that cannot end,
  fed to the core as ``I.Stalled``: stalls.py);
- a dict with a ``floor_action`` key written in controller/supervisor/ (the shell's own alarm,
  never journalled: the journal that cannot be written and its disk running low,
  journal_outage.py).

Each site's message and floor action become patterns (a formatted value matches any text, a
module constant its value), and each raised alarm is attributed to the most specific site that
matches it: a site is walked when an alarm is attributed to it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Sites that only pass on an alarm made elsewhere (all three texts from their input): the core's
# handler of I.Stalled, whose alarms are the Stall sites, and of I.DeviceCondition, whose texts
# are a device profile's [conditions] (a shoe's door bit raises one).
FORWARDERS = frozenset({"controller/table/alarms.py:_stalled", "controller/table/devices.py:_condition"})
_ARGS = {
    "raise_alarm": ("t", "step", "section", "message", "floor_action"),
    "Stall": ("section", "message", "floor_action"),
}


@dataclass(frozen=True, slots=True)
class Site:
    where: str  # file:function, numbered where a function has several
    message: re.Pattern[str]
    floor_action: re.Pattern[str]
    fixed: int  # characters of fixed text in the two: the more, the more specific

    def matches(self, message: str, floor_action: str) -> bool:
        return bool(self.message.fullmatch(message) and self.floor_action.fullmatch(floor_action))


def _pattern(node: ast.expr | None, constants: Mapping[str, str]) -> tuple[str, int]:
    """A regular expression for the text ``node`` builds, and how many fixed characters it has."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value), len(node.value)
    if isinstance(node, ast.Name) and node.id in constants:
        return re.escape(constants[node.id]), len(constants[node.id])
    if isinstance(node, ast.JoinedStr):
        parts = [_pattern(v, constants) if isinstance(v, ast.Constant) else (".*?", 0) for v in node.values]
        return "".join(p for p, _ in parts), sum(n for _, n in parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        (a, m), (b, n) = _pattern(node.left, constants), _pattern(node.right, constants)
        return a + b, m + n
    if isinstance(node, ast.IfExp):
        (a, m), (b, n) = _pattern(node.body, constants), _pattern(node.orelse, constants)
        return f"(?:{a}|{b})", min(m, n)
    return ".*", 0  # a value only known when the alarm is raised


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's string constants (FLOOR_ACTION = "..."), which alarms name by name."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant | ast.JoinedStr):
            text = node.value.value if isinstance(node.value, ast.Constant) else None
            if isinstance(text, str):
                out.update({t.id: text for t in node.targets if isinstance(t, ast.Name)})
    return out


def _argument(call: ast.Call, names: tuple[str, ...], name: str) -> ast.expr | None:
    i = names.index(name)
    if i < len(call.args):
        return call.args[i]
    return next((k.value for k in call.keywords if k.arg == name), None)


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _in_file(path: Path, supervisor: bool) -> Iterable[tuple[str, ast.expr | None, ast.expr | None]]:
    """(enclosing function, message, floor action) of each alarm made in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and (name := _callee(node)) in _ARGS:
                if name == "Stall" and not supervisor:
                    continue
                names = _ARGS[str(name)]
                yield fn.name, _argument(node, names, "message"), _argument(node, names, "floor_action")
            elif supervisor and isinstance(node, ast.Dict):
                keys = {
                    k.value: v
                    for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant)
                }
                if "floor_action" in keys:
                    yield fn.name, keys.get("message"), keys["floor_action"]


def sites() -> list[Site]:
    """Every place in controller/ that makes an alarm, named for the function it is in."""
    found: dict[tuple[str, int, int], Site] = {}
    forwarders: set[str] = set()
    for path in sorted((ROOT / "controller").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        supervisor = rel.startswith("controller/supervisor/")
        tree = ast.parse(path.read_text(), str(path))
        constants = _constants(tree)
        counts: dict[str, int] = {}
        for fn_name, message, floor_action in _in_file(path, supervisor):
            if message is not None and floor_action is not None:
                key = (rel, message.lineno, message.col_offset)
            elif floor_action is not None:
                key = (rel, floor_action.lineno, floor_action.col_offset)
            else:
                continue
            if key in found:
                continue
            (m, mn), (f, fn_) = _pattern(message, constants), _pattern(floor_action, constants)
            where = f"{rel}:{fn_name}"
            if mn + fn_ == 0:
                forwarders.add(where)
                continue
            counts[fn_name] = counts.get(fn_name, 0) + 1
            where += f"#{counts[fn_name]}" if counts[fn_name] > 1 else ""
            found[key] = Site(where, re.compile(m, re.S), re.compile(f, re.S), mn + fn_)
    assert forwarders == FORWARDERS, f"an alarm made of its input's texts only: {forwarders - FORWARDERS}"
    return list(found.values())


def attributed(alarms: Iterable[Mapping[str, object]], known: list[Site]) -> dict[str, list[str]]:
    """Each site's alarms (by message); an alarm that matches no site is under ``""``."""
    out: dict[str, list[str]] = {}
    for a in alarms:
        message, action = str(a.get("message")), str(a.get("floor_action"))
        best = max((s for s in known if s.matches(message, action)), key=lambda s: s.fixed, default=None)
        out.setdefault(best.where if best else "", []).append(message)
    return out
