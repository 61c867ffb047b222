"""The one schema library for every document tablectl reads: table, game, device profile, command.

Each document's shape is a pydantic model built on ``Document``: strict types (``true`` is not 1,
``"5"`` is not 5), unknown keys refused (a misspelt key would otherwise be silently ignored),
immutable once read. A value whose type or bounds are wrong is refused with the ``Rule`` its field
carries, in the words the docs use ("must be an integer 1-247"); ``one_line`` turns pydantic's
error into the one line every refusal is: ``<file>: <dotted key>: <rule>``.

The checks that cite a regulation (a deck count 673a.3 allows, a wager that belongs to another
game) stay in the modules that own them, after the schema has checked the shapes: a schema says
what a key may hold, the regulation says what a table may do.

The value itself is never quoted in the line: a password or a card may be what was misplaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, ValidatorFunctionWrapHandler
from pydantic_core import PydanticCustomError, core_schema


class Document(BaseModel):
    """Base of every document model (see the module's docstring)."""

    # defer_build: a model's validator is built on its first use, not at import, so the
    # documents `tablectl run` never reads before `ready` (users, commands) cost it nothing.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)


@dataclass(frozen=True, slots=True)
class Rule:
    """``Annotated`` metadata: any failure of the value's type or bounds is refused as ``text``.

    Only for leaf values (a number, a string, a list of them): a nested table keeps the key of its
    own first problem. ``ge``, ``gt`` and ``le`` bound a number (NaN is never inside)."""

    text: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None

    def inside(self, value: object) -> bool:
        if not isinstance(value, int | float):
            return True
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
        )

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        inner = handler(source)
        rule = self

        def wrap(value: object, validate: ValidatorFunctionWrapHandler) -> object:
            try:
                checked = validate(value)
            except ValidationError:
                checked = rule  # any failure below is the rule
            if checked is rule or not rule.inside(checked):
                raise PydanticCustomError("rule", "{rule}", {"rule": rule.text})
            return checked

        return core_schema.no_info_wrap_validator_function(wrap, inner)


@dataclass(frozen=True, slots=True)
class Range:
    """``Annotated`` metadata: a number of the right type outside ``ge``..``le`` is refused as
    ``text`` (after the type's own check, which keeps its own words)."""

    text: str
    ge: float | None = None
    le: float | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        rule = Rule(self.text, ge=self.ge, le=self.le)

        def check(value: object) -> object:
            if not rule.inside(value):
                raise PydanticCustomError("rule", "{rule}", {"rule": rule.text})
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))


# pydantic's error types in the words of our docs, for fields without a Rule of their own.
_WORDS: Final[dict[str, str]] = {
    "extra_forbidden": "unknown key",
    "missing": "required",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
}


def _rule(err: Any) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "rule":
        return str(ctx["rule"])
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected', '')}".strip()
    if kind in _WORDS:
        return _WORDS[kind]
    bounds = {
        "greater_than_equal": ("ge", "at least"),
        "greater_than": ("gt", "above"),
        "less_than_equal": ("le", "at most"),
        "less_than": ("lt", "below"),
    }
    if kind in bounds:
        key, words = bounds[kind]
        return f"must be {words} {ctx.get(key)}"
    if kind in ("too_short", "too_long", "string_too_short", "string_too_long"):
        return (
            str(err["msg"])
            .replace("Value should", "must")
            .replace("String should", "must")
            .replace("List should", "must")
        )
    return str(err["msg"]).splitlines()[0] if err.get("msg") else kind


def key_of(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as the dotted key the docs use: ``devices.shoe.port``,
    ``frames.count.fields[0].name``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def one_line(
    error: ValidationError, source: str, prefix: str = "", model: type[BaseModel] | None = None
) -> str:
    """``<source>: <prefix><key>: <rule>`` for the first problem pydantic found (without
    ``<source>: `` when it is empty: the caller adds the file).

    ``prefix`` is where the validated value sits in its document (``devices.shoe.``) when the
    model is not the whole document. With ``model`` (the one validated), an unknown key's line
    lists the keys its table may have."""
    first = first_error(error)
    loc = tuple(first["loc"])
    key = key_of(loc)
    rule = _rule(first)
    if first["type"] == "extra_forbidden" and model is not None:
        known = _keys_at(model, loc[:-1])
        if known:
            rule += f" (expected {', '.join(known)})"
    where = (prefix + key) if key else prefix.rstrip(".")
    parts = [p for p in (source, where, rule) if p]
    return ": ".join(parts)


def first_error(error: ValidationError) -> Any:
    """The problem to name: the first, except that a misspelt key (unknown, beside a missing one
    in the same table) is named rather than the key it was meant to be."""
    errors = error.errors(include_url=False, include_input=False, include_context=True)
    first = errors[0]
    if first["type"] == "missing":
        parent = tuple(first["loc"][:-1])
        for err in errors:
            if err["type"] == "extra_forbidden" and tuple(err["loc"][:-1]) == parent:
                return err
    return first


def _keys_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys of the table at ``loc`` in ``model``'s document (through nested models and
    tables of them, such as ``[devices.<name>]``)."""
    parts = list(loc)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        found = _model_in(field.annotation) if field is not None else None
        if found is None:
            return []
        inner, named = found
        if named:  # a table of tables (or a list): the next part is one's name (or index)
            if not parts:
                return []
            parts.pop(0)
        model = inner
    return list(model.model_fields)


def _model_in(annotation: Any, named: bool = False) -> tuple[type[BaseModel], bool] | None:
    """The model an annotation holds (``X``, ``X | None``, ``dict[str, X]``, ``list[X]``), and
    whether it is held in a table of named ones (or a list)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, named
    is_table = get_origin(annotation) in (dict, list)
    for arg in get_args(annotation):
        found = _model_in(arg, named or is_table)
        if found is not None:
            return found
    return None


def between(lo: float, hi: float, what: str = "an integer") -> Rule:
    """A number from ``lo`` to ``hi``, refused in the docs' words: ``must be an integer 1-247``."""
    return Rule(f"must be {what} {_num(lo)}-{_num(hi)}", ge=lo, le=hi)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("blank")
    return value


# A string with something in it: a name, a path, a reference.
NonEmpty = Annotated[str, AfterValidator(_not_blank), Rule("must be a non-empty string")]
