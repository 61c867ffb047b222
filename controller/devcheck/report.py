"""What one run of `tablectl device check` finds: an Outcome per requirement (pass, fail with
what was expected and what came, or not checked and why), gathered in a Report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["pass", "fail", "not checked"]
POLL_S = 0.05  # how often a physical step's effect is looked for


@dataclass(frozen=True, slots=True)
class Outcome:
    id: str
    requirement: str
    status: Status
    expected: str = ""
    came: str = ""
    why: str = ""

    def line(self) -> str:
        text = f"{self.status:<11}  {self.id}: {self.requirement}"
        if self.status == "fail":
            text += f" (expected {self.expected}; came {self.came})"
        elif self.status == "not checked":
            text += f" ({self.why})"
        return text

    def as_json(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (
                ("id", self.id),
                ("requirement", self.requirement),
                ("status", self.status),
                ("expected", self.expected),
                ("came", self.came),
                ("why", self.why),
            )
            if v
        }


Ask = Callable[[str, str, float], None]  # (step id, what to do, seconds allowed): tell the person


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def add(self, id_: str, requirement: str, ok: bool, expected: str = "", came: str = "") -> bool:
        status: Status = "pass" if ok else "fail"
        self.outcomes.append(
            Outcome(id_, requirement, status, expected if not ok else "", came if not ok else "")
        )
        return ok

    def skip(self, id_: str, requirement: str, why: str) -> None:
        self.outcomes.append(Outcome(id_, requirement, "not checked", why=why))

    @property
    def passed(self) -> bool:
        return all(o.status != "fail" for o in self.outcomes)


class Unreachable(Exception):
    """A row's state cannot be reached without harm (or the person did not do the step)."""
