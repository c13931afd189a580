"""`diff_schemas`: every rule at any depth, the docs table, and an oracle that checks verdicts against decode."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import math
import os
import re
import types as pytypes
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union, overload

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    create_model,
    field_validator,
)

from verl_ctx import ContextRegistry, RoleContext, decode, encode
from verl_ctx._files.export import _behaviour_changes
from verl_ctx._files.json_nodes import pattern_wider
from verl_ctx._wire.codec import decode_payload, encode_payload
from verl_ctx.errors import ContextError, SchemaMismatchError, SchemaSkewWarning
from verl_ctx.schema import RULES, Change, Rule, diff_schemas, schema_info

from ..budget import budget

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schema-evolution.md"

Extra = Literal["allow", "ignore", "forbid"]  # what pydantic's ConfigDict(extra=...) accepts


def _model(name: str = "Ctx", extra: Extra | None = None, **fields: Any) -> type[BaseModel]:
    config = ConfigDict(extra=extra) if extra else None
    return create_model(name, __config__=config, **fields)


def _diff(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(rule, path, detail) of every change between two models with these fields."""
    changes = diff_schemas(_model(**old).model_json_schema(), _model(**new).model_json_schema())
    return [(c.rule, c.path, c.detail) for c in changes]


# Any: classes made at run time, used below inside type expressions (`list[Row1]`) that mypy cannot see through.
Row1: Any = _model("ShapingRow", bonus=(float, Field(0.0, le=1)))
Row2: Any = _model("ShapingRow", bonus=(float, Field(0.0, le=0.5)))
RowExtra: Any = _model("ShapingRow", bonus=(float, Field(0.0, le=1)), weight=(float, 1.0))
RowForbid = _model("ShapingRow", extra="forbid", bonus=(float, Field(0.0, le=1)))
RowAllow = _model("ShapingRow", extra="allow", bonus=(float, Field(0.0, le=1)))


class Search(BaseModel):
    kind: Literal["search"] = "search"
    index: int = 0


class SearchV2(BaseModel):
    kind: Literal["search"] = "search"
    index: int = Field(0, le=10)
    top_k: int = 5


class Calc(BaseModel):
    kind: Literal["calc"] = "calc"


class Web(BaseModel):
    kind: Literal["web"] = "web"


Tool = Annotated[Search | Calc, Field(discriminator="kind")]
ToolV2 = Annotated[SearchV2 | Calc | Web, Field(discriminator="kind")]
ToolNoCalc = Annotated[Search | Web, Field(discriminator="kind")]

JOINS = (
    "an old value may now validate as it (or lack the tag to be routed); "
    'use a discriminated union, Field(discriminator="...")'
)

# (case, old fields, new fields, every expected (rule, path, detail))
CASES: list[tuple[str, dict[str, Any], dict[str, Any], set[tuple[str, str, str]]]] = [
    (
        "field removed",
        {"a": (int, 1), "b": (int, 2)},
        {"a": (int, 1)},
        {("FIELD_REMOVED", "b", "old payloads carry it; it would be dropped")},
    ),
    (
        "nested field removed",
        {"table": (list[RowExtra], [])},
        {"table": (list[Row1], [])},
        {("FIELD_REMOVED", "table[].weight", "old payloads carry it; it would be dropped")},
    ),
    (
        "required field added",
        {},
        {"a": (int, ...)},
        {("REQUIRED_FIELD_ADDED", "a", "old payloads lack it; give it a default")},
    ),
    (
        "field made required",
        {"a": (int, 1)},
        {"a": (int, ...)},
        {("FIELD_MADE_REQUIRED", "a", "it no longer has a default")},
    ),
    ("type changed", {"a": (int, 1)}, {"a": (float, 1)}, {("FIELD_TYPE_CHANGED", "a", "integer -> number")}),
    (
        "dict value type changed",
        {"weights": (dict[str, float], {})},
        {"weights": (dict[str, int], {})},
        {("FIELD_TYPE_CHANGED", "weights{}", "number -> integer")},
    ),
    (
        "dict key constraint added",
        {"weights": (dict[str, float], {})},
        {"weights": (dict[Annotated[str, Field(min_length=2)], float], {})},
        {("CONSTRAINT_TIGHTENED", "weights{key}", "minLength None -> 2")},
    ),
    (
        "tuple position type changed",
        {"pair": (tuple[int, str], (1, "a"))},
        {"pair": (tuple[int, int], (1, 1))},
        {("FIELD_TYPE_CHANGED", "pair[1]", "string -> integer"), ("DEFAULT_CHANGED", "pair", '[1, "a"] -> [1, 1]')},
    ),
    (
        "Decimal for float",
        {"a": (float, 1.5)},
        {"a": (decimal.Decimal, 1.5)},
        {("FIELD_TYPE_CHANGED", "a", "number -> number|string")},
    ),
    (
        "member removed",
        {"a": (int | None, None)},
        {"a": (int, 0)},
        {("UNION_MEMBER_REMOVED", "a", "no longer accepts null"), ("DEFAULT_CHANGED", "a", "null -> 0")},
    ),
    (
        "tagged member removed",
        {"tools": (list[Tool], [])},
        {"tools": (list[ToolNoCalc], [])},
        {
            ("UNION_MEMBER_REMOVED", "tools[calc]", "no member is tagged kind='calc' any more"),
            ("UNION_MEMBER_ADDED", "tools[web]", "now accepts kind='web'"),
        },
    ),
    (
        "a model joins a plain union",
        {"tool": (Search, Search())},
        {"tool": (Search | Calc, Search())},
        {("FIELD_TYPE_CHANGED", "tool", f"Calc joins Search: {JOINS}")},
    ),
    (
        "enum value removed",
        {"a": (Literal["x", "y"], "x")},
        {"a": (Literal["x"], "x")},
        {("ENUM_VALUE_REMOVED", "a", "no longer accepts 'y'")},
    ),
    (
        "Literal to a base type too short for a value",
        {"a": (Literal["x", "yyy"], "x")},
        {"a": (Annotated[str, Field(max_length=2)], "x")},
        {("ENUM_VALUE_REMOVED", "a", "no longer accepts 'yyy'")},
    ),
    (
        "bound tightened in a list item's model",
        {"table": (list[Row1], [])},
        {"table": (list[Row2], [])},
        {("CONSTRAINT_TIGHTENED", "table[].bonus", "<= 1 -> <= 0.5")},
    ),
    (
        "bound tightened under Optional",
        {"a": (Annotated[int | None, Field(le=100)], None)},
        {"a": (Annotated[int | None, Field(le=10)], None)},
        {("CONSTRAINT_TIGHTENED", "a", "<= 100 -> <= 10")},
    ),
    (
        "bound added",
        {"a": (int, 1)},
        {"a": (int, Field(1, ge=0))},
        {("CONSTRAINT_TIGHTENED", "a", "no minimum -> >= 0")},
    ),
    (
        "pattern added",
        {"a": (str, "")},
        {"a": (str, Field("", pattern="^x"))},
        {("CONSTRAINT_TIGHTENED", "a", "pattern None -> '^x'")},
    ),
    (
        "pattern widened (a character class that holds the old one)",
        {"a": (str, Field("", pattern="^[ab]*$"))},
        {"a": (str, Field("", pattern="^[abc]*$"))},
        {("CONSTRAINT_LOOSENED", "a", "pattern '^[ab]*$' -> '^[abc]*$'")},
    ),
    (
        "pattern changed to one that is not provably wider",
        {"a": (str, Field("", pattern="^(foo|bar)$"))},
        {"a": (str, Field("", pattern="^(foo|baz)$"))},
        {("CONSTRAINT_TIGHTENED", "a", "pattern '^(foo|bar)$' -> '^(foo|baz)$'")},
    ),
    (
        "multipleOf finer to coarser",
        {"a": (int, Field(0, multiple_of=2))},
        {"a": (int, Field(0, multiple_of=4))},
        {("CONSTRAINT_TIGHTENED", "a", "multipleOf 2 -> 4")},
    ),
    (
        "list to set",
        {"a": (list[int], [])},
        {"a": (set[int], set())},
        {("CONSTRAINT_TIGHTENED", "a", "items must now be unique: duplicates collapse (list -> set)")},
    ),
    (
        "str to Literal",
        {"a": (str, "x")},
        {"a": (Literal["x"], "x")},
        {("CONSTRAINT_TIGHTENED", "a", "string -> one of ['x']")},
    ),
    (
        "nested extra forbidden",
        {"r": (Row1, Row1())},
        {"r": (RowForbid, RowForbid())},
        {("CONSTRAINT_TIGHTENED", "r", 'extra="ignore" -> extra="forbid"')},
    ),
    (
        "nested extra no longer kept",
        {"r": (RowAllow, RowAllow())},
        {"r": (Row1, Row1())},
        {("CONSTRAINT_TIGHTENED", "r", 'extra="allow" -> extra="ignore"')},
    ),
    ("default changed", {"a": (int, 1)}, {"a": (int, 2)}, {("DEFAULT_CHANGED", "a", "1 -> 2")}),
    ("default added", {"a": (int, ...)}, {"a": (int, 3)}, {("DEFAULT_ADDED", "a", "default 3")}),
    ("field added", {}, {"a": (int, 3)}, {("FIELD_ADDED", "a", "default 3")}),
    (
        "defaulted field added to a list item's model",
        {"table": (list[Row1], [])},
        {"table": (list[RowExtra], [])},
        {("FIELD_ADDED", "table[].weight", "default 1.0")},
    ),
    (
        "tagged union member changed",
        {"tools": (list[Tool], [])},
        {"tools": (list[ToolV2], [])},
        {
            ("CONSTRAINT_TIGHTENED", "tools[search].index", "no maximum -> <= 10"),
            ("FIELD_ADDED", "tools[search].top_k", "default 5"),
            ("UNION_MEMBER_ADDED", "tools[web]", "now accepts kind='web'"),
        },
    ),
    (
        "made Optional",
        {"a": (int, 1)},
        {"a": (int | None, 1)},
        {("UNION_MEMBER_ADDED", "a", "now also accepts null")},
    ),
    (
        "one model becomes a tagged union",
        {"tool": (Search, Search())},
        {"tool": (Tool, Search())},
        {("UNION_MEMBER_ADDED", "tool[calc]", "now accepts kind='calc'")},
    ),
    (
        "enum value added",
        {"a": (Literal["x"], "x")},
        {"a": (Literal["x", "y"], "x")},
        {("ENUM_VALUE_ADDED", "a", "now accepts 'y'")},
    ),
    (
        "bound removed",
        {"a": (int, Field(1, le=5))},
        {"a": (int, 1)},
        {("CONSTRAINT_LOOSENED", "a", "<= 5 -> no maximum")},
    ),
    (
        "gt 0 -> ge 0 on a float",
        {"a": (float, Field(1, gt=0))},
        {"a": (float, Field(1, ge=0))},
        {("CONSTRAINT_LOOSENED", "a", "> 0 -> >= 0")},
    ),
    (
        "Literal to its base type",
        {"a": (Literal["x", "y"], "x")},
        {"a": (str, "x")},
        {("CONSTRAINT_LOOSENED", "a", "one of ['x', 'y'] -> string")},
    ),
    ("a type to Any", {"a": (int, 1)}, {"a": (Any, 1)}, {("CONSTRAINT_LOOSENED", "a", "integer -> any value")}),
    (
        "set to list",
        {"a": (set[int], set())},
        {"a": (list[int], [])},
        {("CONSTRAINT_LOOSENED", "a", "items need not be unique any more (set -> list)")},
    ),
    (
        "multipleOf coarser to finer",
        {"a": (int, Field(0, multiple_of=4))},
        {"a": (int, Field(0, multiple_of=2))},
        {("CONSTRAINT_LOOSENED", "a", "multipleOf 4 -> 2")},
    ),
    # no change at all, though the JSON differs
    ("gt 0 is ge 1 on an int", {"a": (int, Field(1, gt=0))}, {"a": (int, Field(1, ge=1))}, set()),
    ("a docstring", {"a": (int, Field(1, description="old"))}, {"a": (int, Field(1, description="new"))}, set()),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_change_is_named_with_its_rule_and_path(
    old: dict[str, Any], new: dict[str, Any], expected: set[tuple[str, str, str]]
) -> None:
    """diff_schemas names each change at its path, with its rule and a readable detail, and nothing else."""
    assert set(_diff(old, new)) == expected


def test_every_rule_has_a_direct_case() -> None:
    """Each rule in RULES is produced by at least one case above (CODE_CHANGED and BEHAVIOUR_CHANGED come from the lock
    file: tests/cli/test_schema_cli.py)."""
    produced = {rule for _, _, _, expected in CASES for rule, _, _ in expected}
    assert produced | {"CODE_CHANGED", "BEHAVIOUR_CHANGED"} == set(RULES)


def test_breaking_is_the_rule_s_verdict() -> None:
    """A Change is breaking exactly when its rule is, and prints as `RULE path: detail`."""
    change = Change("FIELD_TYPE_CHANGED", "weights{}", "number -> integer")
    assert change.breaking
    assert not Change("FIELD_ADDED", "a", "default 1").breaking
    assert str(change) == "FIELD_TYPE_CHANGED     weights{}: number -> integer"


def test_recursive_models_are_compared_once() -> None:
    """A change inside a recursive model is found, and the walk ends."""

    class Node(BaseModel):
        v: int = 0
        kids: list[Node] = []

    class NodeV2(BaseModel):
        v: int = Field(0, le=3)
        kids: list[NodeV2] = []

    assert _diff({"tree": (Node, Node())}, {"tree": (NodeV2, NodeV2())}) == [
        ("CONSTRAINT_TIGHTENED", "tree.v", "no maximum -> <= 3")
    ]


def _doc_table() -> list[tuple[str, str, str]]:
    text = DOCS.read_text()
    rows = re.findall(r"^\| `([A-Z_]+)` \| (yes|no) \| (.*) \|$", text, flags=re.M)
    return [(rule, breaking, why) for rule, breaking, why in rows]


def test_docs_rule_table_is_generated_from_rules() -> None:
    """docs/schema-evolution.md lists exactly RULES, in order, with their verdicts and reasons."""
    expected = [(r.id, "yes" if r.breaking else "no", r.why) for r in RULES.values()]
    assert _doc_table() == expected, "regenerate the table: python -m tests.core.test_evolution"


def rules_table(rules: dict[str, Rule]) -> str:
    """The markdown table docs/schema-evolution.md carries."""
    lines = ["| rule | breaking | why |", "|---|---|---|"]
    lines += [f"| `{r.id}` | {'yes' if r.breaking else 'no'} | {r.why} |" for r in rules.values()]
    return "\n".join(lines)


if __name__ == "__main__":  # print the docs table, to paste into docs/schema-evolution.md
    print(rules_table(RULES))


# --- the oracle: verdicts against what decode does with generated schema pairs ----------------------------
#
# Hypothesis builds an old schema (nested models, lists, sets, tuples, dicts, Optional, plain and tagged
# unions, Literal, constraints), applies one random edit at a random depth (add / remove / rename a field,
# change a type, tighten / loosen / add / remove a constraint, change a default, ...), and draws payloads valid
# under the old schema. Each payload is encoded with the old class and decoded with the new one through
# verl-ctx's real decode (same version: the skew path). Checked, in both directions of every pair:
#
# * compatible verdict  =>  every payload decodes to the same data (an independent, shape-aware comparison);
# * decode agrees with that comparison (it warns only when nothing changed, else SchemaMismatchError);
# * breaking verdict    =>  we look for a payload that fails or changes (also a config-style payload that
#   leaves out defaulted fields or carries a stray key), and count how often one is found.

REQUIRED = "<required>"
TAG = "kind"
STATS: dict[str, int] = {}


@dataclass(frozen=True)
class Ty:
    """A generated type: what it renders to in pydantic, and what values it holds."""

    kind: str  # int float str bool literal list set tuple dict optional union model tagged any
    cons: tuple[tuple[str, Any], ...] = ()
    args: tuple[Ty, ...] = ()
    fields: tuple[Fld, ...] = ()
    name: str = ""
    values: tuple[Any, ...] = ()
    extra: Extra = "ignore"
    #: a model's code besides its fields: ("K", n) a ClassVar; ("scale", f) a validator `v * cls.K` on int field f
    #: (not idempotent); ("same", f) a validator returning v unchanged (idempotent); ("S", n) the module constant
    #: SCALE that ("mscale", f) `v * SCALE` reads; ("M", n) the method `factor()` returning n that ("mcall", f)
    #: `v + cls.factor()` calls; ("lower", True) the model config str_to_lower
    code: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Fld:
    name: str
    ty: Ty
    default: Any = REQUIRED
    alias: str | None = None  # config sections use it; payloads carry the name


SCALARS = ("int", "float", "str", "bool", "literal")
# Types the wire carries as a str: the typed value differs from the str it travels as.
STR_LIKE = ("uuid", "path", "enum")


class Color(enum.Enum):
    X = "x"
    Y = "y"
    Z = "z"


PATTERNS = {"^[ab]*$": "ab", "^[abc]*$": "abc"}
FIELD_NAMES = ("a", "b", "c", "d", "e", "f")


def _bump(counter: str, tally: list[str] | None = None) -> None:
    """Count ``counter`` now, or in ``tally`` (merged once the whole example ran: discarded draws do not count)."""
    if tally is not None:
        tally.append(counter)
    else:
        STATS[counter] = STATS.get(counter, 0) + 1


# --- generating types ---


@st.composite
def int_cons(draw: st.DrawFn) -> tuple[tuple[str, Any], ...]:
    cons: dict[str, Any] = {}
    for key in draw(st.sets(st.sampled_from(["ge", "gt", "le", "lt", "multiple_of"]), max_size=2)):
        _set_bound(cons, key, draw(st.sampled_from([2, 3, 4])) if key == "multiple_of" else draw(st.integers(-3, 3)))
    return _sane(tuple(sorted(cons.items())), "int")


def _set_bound(cons: dict[str, Any], key: str, value: Any) -> None:
    """One bound per side: `ge` replaces `gt` (both at once is legal but unusual)."""
    twin = {"ge": "gt", "gt": "ge", "le": "lt", "lt": "le"}.get(key)
    if twin is not None:
        cons.pop(twin, None)
    cons[key] = value


@st.composite
def scalar(draw: st.DrawFn) -> Ty:
    kind = draw(st.sampled_from([*SCALARS, *SCALARS, *STR_LIKE]))
    if kind in STR_LIKE:
        return Ty(kind)
    if kind == "int":
        return Ty("int", draw(int_cons()))
    if kind == "float":
        cons: dict[str, Any] = {}
        for key in draw(st.sets(st.sampled_from(["ge", "gt", "le", "lt"]), max_size=2)):
            _set_bound(cons, key, draw(st.sampled_from([-2.5, -1.0, 0.0, 0.5, 1.0])))
        return Ty("float", _sane(tuple(sorted(cons.items())), "float"))
    if kind == "str":
        cons = {}
        for key in draw(st.sets(st.sampled_from(["min_length", "max_length", "pattern"]), max_size=2)):
            cons[key] = draw(st.sampled_from(list(PATTERNS))) if key == "pattern" else draw(st.integers(0, 3))
        return Ty("str", _sane(tuple(sorted(cons.items())), "str"))
    if kind == "literal":
        pool = draw(st.sampled_from([("x", "y", "z"), (1, 2, 3)]))
        return Ty("literal", values=tuple(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))))
    return Ty("bool")


def _sane(cons: tuple[tuple[str, Any], ...], kind: str) -> tuple[tuple[str, Any], ...]:
    """Constraints that some value meets (an empty type has no payloads to draw), else none."""
    c = dict(cons)
    if kind == "int":
        lo, hi, step = _int_range(c)
        if -(-lo // step) > hi // step:
            return ()
    if kind == "float":
        lo = max([c[k] for k in ("ge", "gt") if k in c], default=-10)
        hi = min([c[k] for k in ("le", "lt") if k in c], default=10)
        if lo >= hi:
            return ()
    if kind == "str" and c.get("min_length", 0) > c.get("max_length", 9):
        return ()
    return cons


@st.composite
def model(draw: st.DrawFn, depth: int, names: list[int], tag: str | None = None) -> Ty:
    names[0] += 1
    name = f"M{names[0]}"
    fields = [Fld(TAG, Ty("literal", values=(tag,)), tag)] if tag else []
    fnames = draw(st.lists(st.sampled_from(FIELD_NAMES), min_size=1 if not tag else 0, max_size=3, unique=True))
    for fname in fnames:
        ty = draw(types(depth + 1, names))
        # An alias is never another field's name (pydantic reads such a key as either field: not a user's schema).
        free = [n for n in FIELD_NAMES if n not in {f.alias for f in fields} | set(fnames)]
        alias = draw(st.sampled_from(free)) if free and draw(st.integers(0, 5)) == 0 else None
        fields.append(Fld(fname, ty, draw(default_for(ty)), alias))
    extra: Extra = draw(st.sampled_from(["ignore", "ignore", "forbid", "allow"]))
    return Ty("model", fields=tuple(fields), name=name, extra=extra, code=draw(model_code(tuple(fields))))


@st.composite
def model_code(draw: st.DrawFn, fields: tuple[Fld, ...]) -> tuple[tuple[str, Any], ...]:
    """Validators (idempotent and not) and the ClassVar one reads, on some of a model's fields."""
    code: list[tuple[str, Any]] = []
    for f in fields:
        if f.name == TAG:
            continue
        if f.ty.kind == "int" and not f.ty.cons and draw(st.integers(0, 1)) == 0:
            code.append((draw(st.sampled_from(["scale", "mscale", "mcall"])), f.name))
        elif draw(st.integers(0, 5)) == 0:
            code.append(("same", f.name))
    if any(k == "scale" for k, _ in code) or draw(st.integers(0, 5)) == 0:
        code.append(("K", draw(st.sampled_from([1, 2, 3]))))
    if any(k == "mscale" for k, _ in code):
        code.append(("S", draw(st.sampled_from([1, 2, 3]))))
    if any(k == "mcall" for k, _ in code):
        code.append(("M", draw(st.sampled_from([0, 1, 2]))))
    return tuple(code)


@st.composite
def types(draw: st.DrawFn, depth: int, names: list[int]) -> Ty:
    if depth >= 3:
        return draw(scalar())
    # Containers and models weigh as much as scalars: nested changes are what the walk is for.
    containers = ["list", "list", "set", "frozenset", "tuple", "dict", "optional", "union", "model", "model"]
    containers += ["tagged", "any"]
    kind = draw(st.sampled_from([*SCALARS, *SCALARS, *containers]))
    if kind in SCALARS:
        return draw(scalar())
    if kind == "list":
        cons = {
            k: v
            for k, v in (
                ("min_length", draw(st.sampled_from([None, 1]))),
                ("max_length", draw(st.sampled_from([None, 2, 3]))),
            )
            if v is not None
        }
        return Ty("list", tuple(cons.items()), args=(draw(types(depth + 1, names)),))
    if kind in ("set", "frozenset"):
        return Ty(kind, args=(draw(scalar().filter(lambda t: t.kind != "float")),))
    if kind == "tuple":
        return Ty("tuple", args=tuple(draw(st.lists(scalar(), min_size=1, max_size=2))))
    if kind == "dict":
        return Ty("dict", args=(draw(types(depth + 1, names)),))
    if kind == "optional":
        return Ty("optional", args=(draw(types(depth + 1, names).filter(lambda t: t.kind not in ("optional", "any"))),))
    if kind == "union":
        members = draw(st.lists(st.sampled_from(["int", "str", "float", "bool"]), min_size=2, max_size=3, unique=True))
        return Ty("union", args=tuple(Ty(m) for m in members))
    if kind == "model":
        return draw(model(depth, names))
    if kind == "tagged":
        tags = draw(st.lists(st.sampled_from(["t1", "t2", "t3"]), min_size=2, max_size=2, unique=True))
        return Ty("tagged", args=tuple(draw(model(depth, names, tag)) for tag in tags))
    return Ty("any")


@st.composite
def default_for(draw: st.DrawFn, ty: Ty) -> Any:
    """A default the type holds, or REQUIRED (models, and lists that need items, get none)."""
    if draw(st.integers(0, 3)) == 0:
        return REQUIRED
    if ty.kind in (*SCALARS, *STR_LIKE, "tuple", "union"):
        return draw(values(ty))
    if ty.kind == "list":
        return [] if dict(ty.cons).get("min_length", 0) == 0 else REQUIRED
    return {"set": set(), "frozenset": frozenset(), "dict": {}, "optional": None, "any": None}.get(ty.kind, REQUIRED)


# --- values of a type ---


def _int_range(c: dict[str, Any]) -> tuple[int, int, int]:
    lo = max(c.get("ge", -10), c.get("gt", -11) + 1)
    hi = min(c.get("le", 10), c.get("lt", 11) - 1)
    return lo, hi, c.get("multiple_of", 1)


def values(ty: Ty) -> st.SearchStrategy[Any]:
    c = dict(ty.cons)
    if ty.kind == "int":
        lo, hi, step = _int_range(c)
        return st.integers(-(-lo // step), hi // step).map(lambda k: k * step)
    if ty.kind == "float":
        finite = st.floats(
            min_value=max(c.get("ge", -10.0), c.get("gt", -10.0)),
            max_value=min(c.get("le", 10.0), c.get("lt", 10.0)),
            exclude_min="gt" in c and c.get("gt", -99) >= c.get("ge", -99),
            exclude_max="lt" in c and c.get("lt", 99) <= c.get("le", 99),
            allow_nan=False,
        )
        unbounded = not {"ge", "gt", "le", "lt"} & set(c) and c.get("allow_inf_nan", True)
        return st.one_of(finite, st.just(math.inf)) if unbounded else finite
    if ty.kind == "str":
        lo, hi = c.get("min_length", 0), c.get("max_length", max(4, c.get("min_length", 0)))
        if lo > hi:
            return st.nothing()  # no string is valid
        alphabet = PATTERNS.get(c.get("pattern", ""), "abX03")
        words = [w for w in ("off", "on", "3", "1.5", "true", "") if set(w) <= set(alphabet) and lo <= len(w) <= hi]
        return st.one_of(st.text(alphabet, min_size=lo, max_size=hi), *([st.sampled_from(words)] if words else []))
    if ty.kind == "bool":
        return st.booleans()
    if ty.kind == "literal":
        return st.sampled_from(ty.values)
    if ty.kind == "list":
        lo, hi = c.get("min_length", 0), c.get("max_length", max(3, c.get("min_length", 0)))
        # min_length above max_length: no list is valid, so there is no payload to draw
        return st.nothing() if lo > hi else st.lists(values(ty.args[0]), min_size=lo, max_size=hi)
    if ty.kind in ("set", "frozenset"):
        return st.lists(values(ty.args[0]), max_size=3).map(set if ty.kind == "set" else frozenset)
    if ty.kind == "uuid":
        return st.sampled_from([uuid.UUID(int=1), uuid.UUID(int=2**100)])
    if ty.kind == "path":
        return st.sampled_from([Path("/a"), Path("b/c")])
    if ty.kind == "enum":
        return st.sampled_from(list(Color))
    if ty.kind == "tuple":
        return st.tuples(*(values(a) for a in ty.args))
    if ty.kind == "dict":
        return st.dictionaries(st.sampled_from(["k1", "k2", "3"]), values(ty.args[0]), max_size=2)
    if ty.kind == "optional":
        return st.one_of(st.none(), values(ty.args[0]))
    if ty.kind == "union":
        return st.one_of(*(values(a) for a in ty.args))
    if ty.kind == "model":
        strategy = st.fixed_dictionaries({f.name: values(f.ty) for f in ty.fields})
        if ty.extra == "allow":  # an extra key the model keeps travels with it
            strategy = st.tuples(strategy, st.booleans()).map(lambda p: {**p[0], "zz": 7} if p[1] else p[0])
        return strategy
    if ty.kind == "tagged":
        return st.one_of(*(values(m) for m in ty.args))
    return st.one_of(st.none(), st.integers(-3, 3), st.text("ab", max_size=2))


def config_style(ty: Ty, value: Any) -> Any:
    """``value`` as a config section could hold it: defaulted fields left out, stray keys where ignored."""
    if ty.kind == "model" and isinstance(value, dict):
        out = {
            f.alias or f.name: config_style(f.ty, value[f.name])  # a config section: aliases, as validate reads
            for f in ty.fields
            if f.default is REQUIRED or f.name == TAG
        }
        return {**out, "zz": 7} if ty.extra == "ignore" else out
    if ty.kind == "list" and isinstance(value, list):
        return [config_style(ty.args[0], v) for v in value]
    if ty.kind == "tuple" and isinstance(value, (list, tuple)):
        return [config_style(a, v) for a, v in zip(ty.args, value, strict=True)]
    if ty.kind == "dict" and isinstance(value, dict):
        return {k: config_style(ty.args[0], v) for k, v in value.items()}
    if ty.kind in ("optional",) and value is not None:
        return config_style(ty.args[0], value)
    if ty.kind == "tagged" and isinstance(value, dict):
        member = next(m for m in ty.args if m.fields[0].default == value.get(TAG))
        return config_style(member, value)
    return value


# --- rendering a type as pydantic ---


def annotation(ty: Ty) -> Any:
    c = dict(ty.cons)
    if ty.kind in ("int", "float", "str", "bool"):
        base = {"int": int, "float": float, "str": str, "bool": bool}[ty.kind]
        return Annotated[base, Field(**c)] if c else base
    if ty.kind == "literal":
        return Literal[ty.values]
    if ty.kind == "list":
        # Annotated so that mypy reads a value built at run time, not a type alias.
        inner: Any = list[annotation(ty.args[0])]  # type: ignore[misc]
        return Annotated[inner, Field(**c)] if c else inner
    if ty.kind == "set":
        return set[annotation(ty.args[0])]  # type: ignore[misc]
    if ty.kind == "frozenset":
        return frozenset[annotation(ty.args[0])]  # type: ignore[misc]
    if ty.kind in STR_LIKE:
        return {"uuid": uuid.UUID, "path": Path, "enum": Color}[ty.kind]
    if ty.kind == "tuple":
        return tuple[tuple(annotation(a) for a in ty.args)]  # type: ignore[misc]
    if ty.kind == "dict":
        return dict[str, annotation(ty.args[0])]  # type: ignore[misc]
    if ty.kind == "optional":
        return Optional[annotation(ty.args[0])]  # noqa: UP045 - built at run time
    if ty.kind == "union":
        return Union[tuple(annotation(a) for a in ty.args)]  # noqa: UP007 - built at run time
    if ty.kind == "model":
        return render(ty)
    if ty.kind == "tagged":
        return Annotated[Union[tuple(render(m) for m in ty.args)], Field(discriminator=TAG)]  # noqa: UP007
    return Any


@overload
def render(ty: Ty, root: Literal[True]) -> type[RoleContext]: ...
@overload
def render(ty: Ty, root: Literal[False] = False) -> type[BaseModel]: ...
def render(ty: Ty, root: bool = False) -> type[BaseModel]:
    fields: dict[str, Any] = {
        f.name: (annotation(f.ty), Field(... if f.default is REQUIRED else f.default, alias=f.alias)) for f in ty.fields
    }
    code = dict(ty.code)
    validators: dict[str, Callable[..., Any]] = {
        f"_{kind}_{name}": field_validator(name)(_validator(kind, code))
        for kind, name in ty.code
        if kind in _VALIDATORS
    }
    base: dict[str, Any] = {"__validators__": validators}
    if root:
        base |= {"__base__": RoleContext, "__cls_kwargs__": {"role": "critic", "registry": ContextRegistry()}}
    else:
        base |= {"__config__": ConfigDict(extra=ty.extra, str_to_lower=bool(code.get("lower")))}
    made: Any = create_model("Ctx" if root else ty.name, **base, **fields)
    if "K" in code:
        setattr(made, "K", code["K"])  # noqa: B010 - a ClassVar the scale validator reads
    if "M" in code:
        setattr(made, "factor", classmethod(_factor(code["M"])))  # noqa: B010 - the method mcall calls
    return made


_VALIDATORS = ("scale", "same", "mscale", "mcall")


def _validator(kind: str, code: dict[str, Any]) -> Callable[..., Any]:
    if kind == "mscale":  # the same code reading another module's SCALE: a module constant changed
        return pytypes.FunctionType(_mscale.__code__, {**_mscale.__globals__, "SCALE": code.get("S", 1)}, "_mscale")
    return {"scale": _scale, "same": _same, "mcall": _mcall}[kind]


_FACTORS: dict[int, Callable[..., Any]] = {}


def _factor(n: int) -> Callable[..., Any]:
    """A method returning ``n``, compiled from source: the same name and shape, another constant."""
    if n not in _FACTORS:
        namespace: dict[str, Any] = {}
        exec(f"def factor(cls):\n    return {n}", namespace)  # a method body the test writes itself
        _FACTORS[n] = namespace["factor"]
    return _FACTORS[n]


def _scale(cls: Any, v: Any) -> Any:
    """Not idempotent: each validation multiplies again (an int; an edit may have retyped the field)."""
    return v * cls.K if type(v) is int else v


def _same(cls: Any, v: Any) -> Any:
    return v


def _mscale(cls: Any, v: Any) -> Any:
    """Not idempotent, reading a module constant (each render gives it its own globals)."""
    return v * SCALE if type(v) is int else v  # type: ignore[name-defined]  # noqa: F821 - set per render


def _mcall(cls: Any, v: Any) -> Any:
    """Not idempotent, calling a method of the model."""
    return v + cls.factor() if type(v) is int else v


# --- random edits at random depth ---


def sites(ty: Ty, path: tuple[tuple[str, int], ...] = ()) -> list[tuple[tuple[tuple[str, int], ...], Ty]]:
    """Every node of a type tree with its path (("f", i) = field i, ("a", i) = argument i)."""
    out = [(path, ty)]
    for i, f in enumerate(ty.fields):
        if f.name != TAG:
            out += sites(f.ty, (*path, ("f", i)))
    for i, a in enumerate(ty.args):
        out += sites(a, (*path, ("a", i)))
    return out


def replace_at(ty: Ty, path: tuple[tuple[str, int], ...], new: Ty, redefault: Any) -> Ty:
    """``ty`` with the node at ``path`` replaced; the innermost field on the path gets ``redefault``."""
    if not path:
        return new
    (step, i), rest = path[0], path[1:]
    if step == "a":
        args = list(ty.args)
        args[i] = replace_at(args[i], rest, new, redefault)
        return replace(ty, args=tuple(args))
    fields = list(ty.fields)
    inner = any(s == "f" for s, _ in rest)
    f = fields[i]
    fields[i] = replace(
        f,
        ty=replace_at(f.ty, rest, new, redefault),
        default=f.default if inner or f.default is REQUIRED else redefault,
    )
    return replace(ty, fields=tuple(fields))


@st.composite
def edited(draw: st.DrawFn, root: Ty, names: list[int], want: str) -> tuple[Ty, str]:
    """``root`` with one edit of kind ``want`` at a node it applies to; where none does, any edit at any node."""
    fits = [(p, n) for p, n in sites(root) if want in edit_options(n, n is root)]
    path, node = draw(st.sampled_from(fits or sites(root)))
    new, what = draw(edit(node, len(path), names, node is root, want if fits else None))
    redefault = draw(default_for(_innermost_field_type(replace_at(root, path, new, None), path)))
    return replace_at(root, path, new, redefault), what


@st.composite
def prepared(draw: st.DrawFn, root: Ty, want: str, names: list[int]) -> Ty:
    """``root`` with a node an edit of kind ``want`` applies to: where it has none, a field holding one is added (a
    nested model, a tagged union, a Literal; an int field whose validator reads a module constant or calls a
    method), so that each kind of edit is tried as often as the others."""
    if any(want in edit_options(n, n is root) for _, n in sites(root)):
        return root
    free = [n for n in FIELD_NAMES if n not in {f.name for f in root.fields} | {f.alias for f in root.fields}]
    if not free:
        return root
    code = root.code
    if want in ("module constant", "method"):
        validator, constant, value = ("mscale", "S", 1) if want == "module constant" else ("mcall", "M", 0)
        ty, code = Ty("int"), (*code, (validator, free[0]), (constant, value))
    elif want in ("extra", "config"):
        ty = draw(model(1, names))
    elif want == "tagged members":
        tags = ("t1", "t2")
        ty = Ty("tagged", args=tuple(draw(model(1, names, tag)) for tag in tags))
    elif want == "literal values":
        ty = Ty("literal", values=("x", "y"))
    else:
        return root
    return replace(root, fields=(*root.fields, Fld(free[0], ty, draw(default_for(ty)))), code=code)


def _innermost_field_type(root: Ty, path: tuple[tuple[str, int], ...]) -> Ty:
    node, found = root, root
    for step, i in path:
        if step == "f":
            found = node.fields[i].ty
            node = found
        else:
            node = node.args[i]
    return found


EDIT_KINDS = (
    *("retype", "tweak", "constraint", "literal values", "tagged members"),
    *("add field", "remove field", "rename field", "toggle default", "change default", "alias", "extra"),
    *("validator", "classvar", "module constant", "method", "config"),
)


def edit_options(node: Ty, is_root: bool) -> list[str]:
    """The kinds of edit that apply to ``node``."""
    options = [] if is_root else ["retype", "tweak"]
    if node.kind == "model":
        options += ["add field", "remove field", "rename field", "toggle default", "change default"]
        options += ["validator", "classvar", "alias"]
        options += ["module constant"] if any(k == "mscale" for k, _ in node.code) else []
        options += ["method"] if any(k == "mcall" for k, _ in node.code) else []
        options += [] if is_root else ["extra", "config"]
    if node.cons or node.kind in ("int", "float", "str", "list"):
        options += ["constraint"]
    if node.kind == "literal":
        options += ["literal values"]
    if node.kind == "tagged":
        options += ["tagged members"]
    return options


@st.composite
def edit(
    draw: st.DrawFn, node: Ty, depth: int, names: list[int], is_root: bool, want: str | None = None
) -> tuple[Ty, str]:
    what = want or draw(st.sampled_from(edit_options(node, is_root)))
    fields = list(node.fields)
    if what == "retype":
        return draw(types(depth + 1, names)), what
    if what == "tweak":
        return draw(tweak(node)), what
    if what == "add field":
        free = [n for n in FIELD_NAMES if n not in {f.name for f in fields} | {f.alias for f in fields}]
        if not free:
            return node, "no-op"
        ty = draw(types(depth + 1, names))
        fields.append(Fld(draw(st.sampled_from(free)), ty, draw(default_for(ty))))
    elif what in ("remove field", "rename field", "toggle default", "change default"):
        choices = [i for i, f in enumerate(fields) if f.name != TAG]
        if not choices or (what == "remove field" and len(fields) == 1):
            return node, "no-op"
        i = draw(st.sampled_from(choices))
        if what == "remove field":
            del fields[i]
        elif what == "rename field":
            free = [n for n in FIELD_NAMES if n not in {f.name for f in fields} | {f.alias for f in fields}]
            if not free:
                return node, "no-op"
            fields[i] = replace(fields[i], name=draw(st.sampled_from(free)))
        elif what == "toggle default":
            default = REQUIRED if fields[i].default is not REQUIRED else draw(default_for(fields[i].ty))
            fields[i] = replace(fields[i], default=default)
        else:
            fields[i] = replace(fields[i], default=draw(default_for(fields[i].ty)))
    elif what == "extra":
        return replace(node, extra=draw(st.sampled_from(["ignore", "forbid", "allow"]))), what
    elif what == "validator":  # one validator added or removed; the model's fields stay
        kept = [c for c in node.code if c[0] != "K"]
        plain = [f for f in fields if f.name != TAG]
        remove = draw(st.booleans())
        # Only a validator is removed: the constant ("S"), method ("M") and config entries stay, as a validator
        # left in place may still read them (an mcall without its factor() would fail to build, not to decode).
        removable = [i for i, c in enumerate(kept) if c[0] in _VALIDATORS]
        if removable and remove:
            del kept[draw(st.sampled_from(removable))]
        elif plain:
            f = draw(st.sampled_from(plain))
            kept.append(("scale" if f.ty.kind == "int" and not f.ty.cons else "same", f.name))
        else:
            return node, "no-op"
        k = dict(node.code).get("K", 2)
        return replace(node, code=(*kept, ("K", k))), what
    elif what == "module constant":  # the module-level value a validator reads, changed
        return replace(node, code=(*[c for c in node.code if c[0] != "S"], ("S", dict(node.code)["S"] % 3 + 1))), what
    elif what == "method":  # what a method a validator calls returns, changed
        return replace(node, code=(*[c for c in node.code if c[0] != "M"], ("M", dict(node.code)["M"] % 3 + 1))), what
    elif what == "config":  # str_to_lower on or off
        return replace(
            node, code=(*[c for c in node.code if c[0] != "lower"], ("lower", not dict(node.code).get("lower")))
        ), what
    elif what == "alias":  # an alias added or dropped, or a field renamed keeping its old name as alias
        choices = [i for i, f in enumerate(fields) if f.name != TAG]
        free = [n for n in FIELD_NAMES if n not in {f.name for f in fields} | {f.alias for f in fields}]
        if not choices or not free:
            return node, "no-op"
        i = draw(st.sampled_from(choices))
        f = fields[i]
        how = draw(st.sampled_from(["add", "rename keeping it"] if f.alias is None else ["drop", "rename keeping it"]))
        if how == "add":
            fields[i] = replace(f, alias=draw(st.sampled_from(free)))
        elif how == "drop":
            fields[i] = replace(f, alias=None)
        else:
            fields[i] = replace(f, name=draw(st.sampled_from(free)), alias=f.alias or f.name)
        code = tuple((k, fields[i].name if k in _VALIDATORS and n == f.name else n) for k, n in node.code)
        return replace(node, fields=tuple(fields), code=code), f"alias: {how}"
    elif what == "classvar":  # the value a validator reads, changed
        k = dict(node.code).get("K", 1)
        return replace(node, code=(*[c for c in node.code if c[0] != "K"], ("K", k % 3 + 1))), what
    elif what == "constraint":
        return draw(constraint(node)), what
    elif what == "literal values":
        pool = ("x", "y", "z") if isinstance(node.values[0], str) else (1, 2, 3)
        vals = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
        return replace(node, values=tuple(vals)), what
    elif what == "tagged members":
        members = list(node.args)
        if len(members) > 2 and draw(st.booleans()):
            del members[draw(st.integers(0, len(members) - 1))]
        else:
            free = [t for t in ("t1", "t2", "t3", "t4") if t not in {m.fields[0].default for m in members}]
            members.append(draw(model(depth, names, free[0])))
        return replace(node, args=tuple(members)), what
    return replace(node, fields=tuple(fields)), what


@st.composite
def tweak(draw: st.DrawFn, node: Ty) -> Ty:
    """A small change of type: int <-> float, list <-> set, Optional on / off, Literal <-> str, a member more."""
    k = node.kind
    options: list[Ty] = [Ty("any"), Ty("optional", args=(node,))] if k not in ("optional", "any") else []
    if k == "int":
        options += [Ty("float"), Ty("bool"), Ty("str"), Ty("union", args=(Ty("int"), Ty("str")))]
    if k == "float":
        options += [Ty("int"), Ty("union", args=(Ty("float"), Ty("int")))]
    if k == "str":
        options += [Ty("literal", values=("x", "y")), Ty("bool"), Ty("int"), Ty("uuid"), Ty("path"), Ty("enum")]
    if k in STR_LIKE:
        options += [Ty("str"), Ty("literal", values=("x", "y"))]
    if k == "literal":
        options += [Ty("str" if isinstance(node.values[0], str) else "int"), Ty("float")]
    if k == "bool":
        options += [Ty("int"), Ty("str")]
    if k == "list" and node.args[0].kind in SCALARS and node.args[0].kind != "float":
        options += [Ty("set", args=node.args), Ty("set", args=node.args), Ty("tuple", args=node.args)]
    if k == "set":
        options += [Ty("list", args=node.args), Ty("frozenset", args=node.args)]
    if k == "frozenset":
        options += [Ty("set", args=node.args), Ty("tuple", args=node.args)]
    if k == "optional":
        options += [node.args[0]]
    if k == "union":
        options += [
            Ty("union", args=(*node.args, Ty(m))) for m in ("int", "str", "float", "bool") if Ty(m) not in node.args
        ]
        options += [Ty("union", args=node.args[:-1]) if len(node.args) > 2 else node.args[0]]
    if k == "model":
        options += [Ty("dict", args=(Ty("any"),))]
    return draw(st.sampled_from(options)) if options else node


@st.composite
def constraint(draw: st.DrawFn, node: Ty) -> Ty:
    keys = {
        "int": ["ge", "gt", "le", "lt", "multiple_of", "strict"],
        "float": ["ge", "gt", "le", "lt", "strict", "allow_inf_nan"],
        "str": ["min_length", "max_length", "pattern", "strict"],
        "list": ["min_length", "max_length"],
    }.get(node.kind, [])
    if not keys:
        return node
    c = dict(node.cons)
    key = draw(st.sampled_from(keys))
    if key in c and draw(st.booleans()):
        del c[key]
    elif key in ("strict", "allow_inf_nan"):  # settings JSON Schema does not show: on, or off again
        c[key] = not c.get(key, key == "allow_inf_nan")
    elif key == "pattern":
        c[key] = draw(st.sampled_from(list(PATTERNS)))
    elif key == "multiple_of":
        c[key] = draw(st.sampled_from([2, 3, 4]))
    elif node.kind == "float":
        _set_bound(c, key, draw(st.sampled_from([-2.5, -1.0, 0.0, 0.5, 1.0, 2.0])))
    else:
        _set_bound(c, key, draw(st.integers(0 if "length" in key else -3, 3)))
    cons = _sane(tuple(sorted(c.items())), node.kind)
    return replace(node, cons=cons) if cons or not c else node


# --- one direction of one pair ---


def _has_code(ty: Ty) -> bool:
    """Whether a validator sits anywhere in ``ty``."""
    return any(k in _VALIDATORS for k, _ in ty.code) or any(
        _has_code(t) for t in (*ty.args, *(f.ty for f in ty.fields))
    )


def typed_same(sent: Any, got: Any) -> bool:
    """Whether the worker's typed value ``got`` is the driver's ``sent`` as a Python value: the same kinds at every
    level (a tuple is not a list, a set not a frozenset, an Enum member not its value, a model not a dict), the
    driver's model fields all there (the worker's own added fields aside)."""
    if isinstance(sent, BaseModel) or isinstance(got, BaseModel):
        if not (isinstance(sent, BaseModel) and isinstance(got, BaseModel)):
            return False
        theirs = {**sent.__dict__, **(sent.__pydantic_extra__ or {})}
        ours = {**got.__dict__, **(got.__pydantic_extra__ or {})}  # a field the worker keeps as an extra is there
        for name, spec in type(got).model_fields.items():  # a field renamed keeping the old name as its alias
            if spec.alias is not None and spec.alias not in ours:
                ours[spec.alias] = ours[name]
        return all(k in ours and typed_same(v, ours[k]) for k, v in theirs.items())
    if isinstance(sent, enum.Enum) or isinstance(got, enum.Enum):
        return type(sent).__name__ == type(got).__name__ and isinstance(got, enum.Enum) and sent.value == got.value
    if type(sent) is not type(got):
        return False
    if isinstance(sent, (set, frozenset)):
        return sorted(map(repr, sent)) == sorted(map(repr, got))
    if isinstance(sent, dict):
        return list(map(repr, sent)) == list(map(repr, got)) and all(
            typed_same(v, w) for v, w in zip(sent.values(), got.values(), strict=True)
        )
    if isinstance(sent, (list, tuple)):
        return len(sent) == len(got) and all(typed_same(a, b) for a, b in zip(sent, got, strict=True))
    if isinstance(sent, float):
        return sent == got and math.copysign(1, sent) == math.copysign(1, got)
    return bool(sent == got)


def same(sent: Any, got: Any, ty: Ty) -> bool:
    """Whether ``got`` carries exactly the values in ``sent``, read with ``ty`` (the receiving schema's shape).

    Written apart from verl-ctx's own proof on purpose: it knows the shapes from the generated types.
    """
    k = ty.kind
    if k == "optional":
        return sent is None and got is None if sent is None else same(sent, got, ty.args[0])
    if k == "tagged" and isinstance(sent, dict) and isinstance(got, dict):
        member = next((m for m in ty.args if m.fields[0].default == got.get(TAG)), None)
        return member is not None and same(sent, got, member)
    if k in ("set", "frozenset") and type(sent) is list and type(got) is list:
        return len(sent) == len(got) and sorted(map(_typed, sent)) == sorted(map(_typed, got))
    if type(sent) is not type(got):
        return False
    if isinstance(sent, dict):
        if k == "model":
            declared = {f.name: f.ty for f in ty.fields}
            # A field renamed keeping the old name as its alias reads the old key (by alias; payloads carry names).
            renamed: dict[str, str] = {
                str(f.alias): f.name for f in ty.fields if f.alias and f.alias not in declared and f.name not in sent
            }
            got = {**got, **{old: got[new] for old, new in renamed.items() if new in got}}
            return all(
                key in got and same(v, got[key], declared.get(str(renamed.get(key, key)), Ty("any")))
                for key, v in sent.items()
            ) and all(key in sent or key in declared for key in got if key not in renamed)
        values_ty = ty.args[0] if k == "dict" else Ty("any")
        return sorted(map(_typed, sent)) == sorted(map(_typed, got)) and all(
            same(v, got[key], values_ty) for key, v in sent.items()
        )
    if isinstance(sent, list):
        items = list(ty.args) if k == "tuple" else [ty.args[0] if k == "list" else Ty("any")] * len(sent)
        return len(sent) == len(got) and all(same(a, b, t) for a, b, t in zip(sent, got, items, strict=True))
    if isinstance(sent, float):
        return sent == got and math.copysign(1, sent) == math.copysign(1, got)
    return bool(sent == got)


def _typed(key: Any) -> tuple[str, str]:
    return type(key).__name__, repr(key)


def check_direction(data: st.DataObject, old_ty: Ty, new_ty: Ty, label: str, tally: list[str]) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Old, New = render(old_ty, root=True), render(new_ty, root=True)
            old_schema, new_schema = Old.model_json_schema(), New.model_json_schema()
    except Exception as e:  # noqa: BLE001 - an edit pydantic itself refuses to build: counted, not checked
        _bump(f"schemas pydantic refuses to build ({type(e).__name__})", tally)
        if os.environ.get("ORACLE_DEBUG"):
            print("BUILD", repr(e)[:300])
        return
    changes = diff_schemas(old_schema, new_schema)
    # What `schema check` adds from the lock file's digests (validators, class state, config, kinds), as it does.
    lock = {"fingerprint": schema_info(Old).fingerprint, "fields": dict(schema_info(Old).field_digests)}
    changes += _behaviour_changes(lock, New, changes)
    breaking = any(c.breaking for c in changes)
    _bump("directions checked", tally)
    _bump("breaking verdicts" if breaking else "compatible verdicts", tally)
    old_ty_has_code, new_ty_has_code = _has_code(old_ty), _has_code(new_ty)
    witness = None
    for _ in range(5 if breaking else 3):
        payload = data.draw(values(old_ty), label=f"{label} payload")
        try:
            instance = Old.model_validate(payload, by_name=True)  # a payload: field names, as encode writes
        except ValidationError as e:
            _bump("payloads the generator got wrong", tally)
            if os.environ.get("ORACLE_DEBUG"):
                print("GENERATOR", payload, old_ty, e)
            continue
        env = encode(instance)
        sent = decode_payload(env["payload"])
        try:
            direct = New.model_validate(sent, strict=False, by_name=True)
            lossless = same(sent, decode_payload(encode_payload(direct)), new_ty)
        except ValidationError:
            direct, lossless = None, False
        # The handshake's truth is the typed value (a set read as a list by an `Any` field is a change); `schema
        # check`'s verdicts are still judged on the wire's values below (its rules read JSON Schema only).
        typed = lossless and typed_same(instance, direct)
        refused_kind = False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SchemaSkewWarning)
                got = decode(env, New)
            decoded = True
        except SchemaMismatchError as e:
            decoded, refused_kind = False, "(its type: the same bytes" in str(e)
        if schema_info(Old).fingerprint == schema_info(New).fingerprint:
            # The same schema: the worker holds the driver's values, validated once (a validator that is not
            # idempotent does not run again), whatever validating them again would give.
            assert decoded, f"decode refused a payload of its own schema: {sent!r}"
            assert typed_same(instance, got), f"the worker's values are not the driver's: {instance!r} / {got!r}"
            _bump("same schema: the driver's values", tally)
            continue
        _bump("payloads decoded", tally)
        # Never another value: whatever decode accepts is the driver's value, typed (checked on what it returned).
        assert not decoded or typed_same(instance, got), f"decoded another value: {instance!r} -> {got!r}\n{changes}"
        # The resume (and `verl-ctx diff`) agree with the handshake: a checkpoint saved with this value under the old
        # schema resumes under the new one exactly when the worker would decode it, relaunched with the same value.
        resumed = _resume_changes(instance, got if decoded else direct)
        if resumed is not None:
            assert (not resumed) == decoded, f"resume {resumed or 'accepted'} where decode {decoded}: {sent!r}"
            _bump("resumes agreeing with the handshake", tally)
        if old_ty_has_code or new_ty_has_code:
            # With validators, the worker runs only those whose code differs from the driver's (the shared ones
            # ran there); `direct` above ran them all, so it is no truth here. A compatible verdict must decode.
            _bump("pairs with validators: safety and verdict checked", tally)
            assert breaking or decoded, f"verdict compatible, but decode refused {sent!r}; changes: {changes}"
            if breaking and not decoded:
                witness = witness if witness is not None else sent
                break
            continue
        _bump("typed changes the wire does not show" if lossless and not typed else "payloads typed alike", tally)
        if typed and refused_kind:
            # The handshake judges a type change between kinds the wire carries alike by the schemas, not by this
            # one value: `set[int] -> Any` is refused even for the empty set, whose typed value would survive.
            _bump("kind changes refused although this value survives", tally)
            return
        assert decoded == typed, (
            f"decode {'accepted' if decoded else 'refused'} a payload that the oracle says "
            f"{'changes' if decoded else 'arrives unchanged'}: {sent!r}\n{changes}"
        )
        if not lossless and witness is None:
            witness = sent
        assert breaking or lossless, f"verdict compatible, but {sent!r} does not decode unchanged; changes: {changes}"
        if breaking and not lossless:
            break
    if breaking and witness is None:
        section = config_style(old_ty, data.draw(values(old_ty), label=f"{label} config"))
        try:
            Old.model_validate(section)
        except ValidationError:
            section = None
        if section is not None:
            try:
                New.model_validate(section)
            except ValidationError:
                witness = section
    if breaking:
        _bump(
            "breaking verdicts with a failing or changing payload found"
            if witness is not None
            else "breaking verdicts with no witness found",
            tally,
        )
        if witness is None:
            for c in changes:
                if c.breaking:
                    _bump(f"  no witness: {c.rule}", tally)


def _resume_changes(saved: BaseModel, launched: BaseModel | None) -> list[str] | None:
    """What a resume from a checkpoint holding ``saved`` lists against a launch of ``launched`` (None: no launch
    value to compare, or the checkpoint module is not installed here)."""
    try:
        from verl_ctx.integrations.verl._checkpoint import Snapshot, compare_with_launch
    except ImportError:  # pragma: no cover - a core-only environment
        return None
    if launched is None:
        return None
    assert isinstance(saved, RoleContext)
    assert isinstance(launched, RoleContext)
    role = schema_info(type(saved)).roles[0]
    found = compare_with_launch(Snapshot.of({role: saved}, salt=b"0" * 16), {role: launched})
    return found.listing()


@st.composite
def schema_pairs(draw: st.DrawFn, want: str | None = None) -> tuple[Ty, Ty, str]:
    names = [0]
    want = want or draw(st.sampled_from(EDIT_KINDS))
    old = draw(prepared(replace(draw(model(0, names)), extra="forbid"), want, names))  # a RoleContext: forbid
    new, what = draw(edited(old, names, want))
    return old, new, what


def _oracle(data: st.DataObject, want: str | None = None) -> None:
    old, new, what = data.draw(schema_pairs(want), label="pair")
    tally: list[str] = []
    check_direction(data, old, new, "old -> new", tally)
    check_direction(data, new, old, "new -> old", tally)
    for counter in [*tally, "pairs", f"edit: {what}"]:
        _bump(counter)


_PROFILE = settings.default
assert _PROFILE is not None  # the stubs allow None; hypothesis always has a loaded profile once imported
ORACLE_SETTINGS = settings(
    max_examples=max(budget(120, 600), _PROFILE.max_examples),  # pairs per seed: 600 in `make campaigns`
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
# The fixed seed runs each kind of edit alike (pairs per kind): 600 pairs over the kinds in `make campaigns`.
PER_KIND = settings(ORACLE_SETTINGS, max_examples=max(8, -(-budget(120, 600) // len(EDIT_KINDS))))


@pytest.mark.campaign
@pytest.mark.parametrize("kind", EDIT_KINDS)
@seed(20260514)
@PER_KIND
@given(data=st.data())
def test_oracle_fixed_seed(kind: str, data: st.DataObject) -> None:
    """Generated schema pairs (fixed seed, each kind of edit): compatible verdicts never change a decoded value;
    decode agrees."""
    _oracle(data, kind)


@pytest.mark.campaign
@ORACLE_SETTINGS
@given(st.data())
def test_oracle_random_seed(data: st.DataObject) -> None:
    """Generated schema pairs (a new seed each run): compatible verdicts never change a decoded value."""
    _oracle(data)


@pytest.fixture(scope="module", autouse=True)
def _oracle_figures(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print the oracle's figures after the module's tests (and write them where VERL_CTX_ORACLE_REPORT says)."""
    yield
    if not STATS:
        return
    lines = [f"{k}: {v}" for k, v in sorted(STATS.items())]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # teardown output is captured otherwise
            reporter.write_line("\noracle figures:\n  " + "\n  ".join(lines))
    target = os.environ.get("VERL_CTX_ORACLE_REPORT")
    if target:
        Path(target).write_text(json.dumps(STATS, indent=2, sort_keys=True) + "\n")


def _check(old: type[RoleContext], new: type[RoleContext]) -> set[tuple[str, str]]:
    """`schema check`'s breaking verdicts for ``old`` (as exported) -> ``new``: the JSON Schema comparison and what the
    lock's digests add."""
    changes = diff_schemas(old.model_json_schema(), new.model_json_schema())
    lock = {"fingerprint": schema_info(old).fingerprint, "fields": dict(schema_info(old).field_digests)}
    changes += _behaviour_changes(lock, new, changes)
    return {(c.rule, c.path) for c in changes if c.breaking}


def _named(name: str, **fields: Any) -> Any:
    made: Any = create_model(
        "Ctx", __base__=RoleContext, __cls_kwargs__={"role": "critic", "registry": ContextRegistry()}, **fields
    )
    made.__qualname__ = name
    return made


def test_payload_names_decide_renames_that_keep_the_old_name_as_alias() -> None:
    """Payloads carry field names, JSON Schema shows aliases: a field renamed keeping its old name as alias reads old
    payloads (compatible, and the handshake decodes them); renamed back, old payloads carry a name no field reads."""
    plain = _named("R", s=(int, 0))
    renamed = _named("R", t=(int, Field(0, alias="s")))
    assert _check(plain, renamed) == set()
    with pytest.warns(SchemaSkewWarning):
        assert decode(encode(plain(s=3)), renamed).t == 3
    assert _check(renamed, plain) == {("FIELD_REMOVED", "R.t")}
    with pytest.raises(SchemaMismatchError):
        decode(encode(renamed(s=3)), plain)
    # Named also when code changed beside it (code changes are listed, field notes dropped: this is not a note).
    checked = _named("R", s=(int, 0), __validators__={"_v": field_validator("s")(_same)})
    assert ("FIELD_REMOVED", "R.t") in _check(renamed, checked)


def test_a_rename_keeping_the_old_name_as_alias_that_changes_the_kind_is_breaking() -> None:
    """tuple -> list under a new name: one JSON Schema (an array of integers), one wire, another typed value. `schema
    check` and the handshake both say so, by the old name; the same kind renamed stays compatible."""
    old = _named("K", s=(tuple[int, ...], ()))
    renamed = _named("K", t=(list[int], Field([], alias="s")))
    assert _check(old, renamed) == {("FIELD_TYPE_CHANGED", "K.s")}
    with pytest.raises(SchemaMismatchError, match=r"K\.s \(its type: the same bytes, read as t"):
        decode(encode(old(s=(1, 2))), renamed)
    same_kind = _named("K", t=(tuple[int, ...], Field((), alias="s")))
    assert _check(old, same_kind) == set()
    with pytest.warns(SchemaSkewWarning):
        assert decode(encode(old(s=(1, 2))), same_kind).t == (1, 2)


def test_a_required_field_named_like_another_field_s_alias_is_breaking() -> None:
    """Two fields, one JSON Schema property: old payloads (field names) lack the new required field."""
    old = _named("D", a=(int, Field(..., alias="b")))
    new = _named("D", a=(int, Field(..., alias="b")), b=(int, ...))
    assert ("REQUIRED_FIELD_ADDED", "D.b") in _check(old, new)


@pytest.mark.parametrize(
    ("old", "new", "wider"),
    [
        ("^[ab]*$", "^[abc]*$", True),
        ("^[a-z]+$", "^[a-z0-9_]+$", True),
        ("^(foo|bar)$", "^(foo|bar|baz)$", True),
        ("^a{2,3}$", "^a{1,5}$", True),
        ("^x(?!y)", "^[xz](?!y)", True),
        ("^[abc]*$", "^[ab]*$", False),
        ("^[^a]$", "^[^ab]$", False),
        ("(?i)a", "a", False),
        ("^x(?!y)", "^x(?!yz)", False),
        ("(", "a", False),
    ],
)
def test_a_pattern_is_wider_only_where_the_parse_trees_prove_it(old: str, new: str, wider: bool) -> None:
    assert pattern_wider(old, new) is wider


_ATOMS = ["a", "b", "c", "[ab]", "[abc]", "[a-c]", "[^a]", "."]
_COUNTS = ["", "*", "+", "?", "{1,2}", "{0,3}"]
# What each atom and count widens to (a class that holds more, a count that allows more).
_WIDER_ATOM = {"a": "[ab]", "b": "[abc]", "[ab]": "[abc]", "[a-c]": "[a-d]"}
_WIDER_COUNT = {"": "?", "?": "*", "+": "*", "{1,2}": "{0,3}"}


@st.composite
def _patterns(draw: st.DrawFn) -> tuple[str, str, bool]:
    """An old pattern and a new one: some part widened (``True``: provably wider), or another pattern altogether."""
    start, end = draw(st.sampled_from(["", "^"])), draw(st.sampled_from(["", "$"]))
    parts = draw(st.lists(st.tuples(st.sampled_from(_ATOMS), st.sampled_from(_COUNTS)), min_size=1, max_size=3))
    old = start + "".join(a + c for a, c in parts) + end
    if draw(st.booleans()):
        other = draw(st.lists(st.tuples(st.sampled_from(_ATOMS), st.sampled_from(_COUNTS)), min_size=1, max_size=3))
        return old, start + "".join(a + c for a, c in other) + end, False
    i = draw(st.integers(0, len(parts) - 1))
    atom, count = parts[i]
    parts[i] = (_WIDER_ATOM.get(atom, atom), _WIDER_COUNT.get(count, count) if draw(st.booleans()) else count)
    return old, start + "".join(a + c for a, c in parts) + end, True


@settings(max_examples=budget(200, 2000), deadline=None)
@given(_patterns(), st.lists(st.text("abcd", max_size=5), min_size=1, max_size=30))
def test_a_wider_pattern_matches_everything_the_old_one_matched(pair: tuple[str, str, bool], texts: list[str]) -> None:
    """Sound: where the proof says wider, no string the old pattern matches is refused by the new one. And it sees
    a widened class or count: an old pattern with one part widened is proven wider."""
    old, new, widened = pair
    wider = pattern_wider(old, new)
    if wider:
        assert all(re.search(new, t) for t in texts if re.search(old, t)), (old, new)
    if widened:
        assert wider, (old, new)


_AWARE = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


class _TagA(BaseModel):
    kind: Literal["a"] = "a"
    x: int = 0


class _TagB(BaseModel):
    kind: Literal["b"] = "b"
    y: int = 0


class _TagC(BaseModel):
    kind: Literal["c"] = "c"
    z: int = 0


_DISC = Annotated[Union[_TagA, _TagB], Field(discriminator="kind")]  # noqa: UP007 - the form users write
_DISC3 = Annotated[Union[_TagA, _TagB, _TagC], Field(discriminator="kind")]  # noqa: UP007


@pytest.mark.parametrize(
    ("old", "new", "breaking"),
    [
        pytest.param((str, ""), (Annotated[str, Field(strict=True)], ""), "CONSTRAINT_TIGHTENED", id="strict on"),
        pytest.param((Annotated[str, Field(strict=True)], ""), (str, ""), None, id="strict off"),
        pytest.param(
            (str, ""), (Annotated[str, StringConstraints(strip_whitespace=True)], ""), "CODE_CHANGED", id="strip"
        ),
        pytest.param(
            (Union[int, str], 0),  # noqa: UP007
            (Annotated[Union[int, str], Field(union_mode="left_to_right")], 0),  # noqa: UP007
            "CODE_CHANGED",
            id="union_mode",
        ),
        pytest.param(
            (float, 0.0), (Annotated[float, Field(allow_inf_nan=False)], 0.0), "CONSTRAINT_TIGHTENED", id="inf"
        ),
        pytest.param((dt.datetime, _AWARE), (AwareDatetime, _AWARE), "CONSTRAINT_TIGHTENED", id="aware datetime"),
        pytest.param((AwareDatetime, _AWARE), (dt.datetime, _AWARE), None, id="any datetime"),
        pytest.param(
            (Annotated[decimal.Decimal, Field(max_digits=5)], decimal.Decimal(1)),
            (Annotated[decimal.Decimal, Field(max_digits=3)], decimal.Decimal(1)),
            "CONSTRAINT_TIGHTENED",
            id="max_digits down",
        ),
        pytest.param(
            (Annotated[decimal.Decimal, Field(max_digits=3)], decimal.Decimal(1)),
            (Annotated[decimal.Decimal, Field(max_digits=5)], decimal.Decimal(1)),
            None,
            id="max_digits up",
        ),
        pytest.param((_DISC, _TagA()), (_DISC3, _TagA()), None, id="tagged member added"),
        pytest.param((_DISC, _TagA()), (Union[_TagA, _TagB], _TagA()), None, id="tagged to plain"),  # noqa: UP007
    ],
)
def test_settings_json_schema_does_not_show_are_judged_by_what_old_values_do(
    old: tuple[Any, Any], new: tuple[Any, Any], breaking: str | None
) -> None:
    """A validation setting JSON Schema leaves out (strict, a transform, a union's mode, inf/nan, a datetime's zone,
    a Decimal's digits) is breaking when an old-valid value may fail or read otherwise, not when it may not; a tagged
    union that gains a member, or keeps its tags as a plain union, stays compatible."""
    verdict = _check(_named("Set", f=old), _named("Set", f=new))
    assert {rule for rule, _ in verdict} == ({breaking} if breaking else set()), verdict


def test_the_handshake_decodes_what_reads_unchanged_after_a_narrowing() -> None:
    """`int | None` -> `int` and `int | str` -> `int`: an int the driver sent reads as that int (decoded), a value of
    the dropped kind is refused, never read as something else; a tagged union that gained a member decodes."""
    optional, required = _named("N", o=(Optional[int], None)), _named("N", o=(int, ...))  # noqa: UP045
    either, narrowed = _named("E", r=(Union[int, str], 0)), _named("E", r=(int, 0))  # noqa: UP007
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaSkewWarning)
        assert decode(encode(optional(o=3)), required).o == 3
        assert decode(encode(either(r=3)), narrowed).r == 3
        assert decode(
            encode(_named("U", t=(_DISC, _TagA()))(t=_TagB(y=2))), _named("U", t=(_DISC3, _TagA()))
        ).t == _TagB(y=2)
    with pytest.raises(ContextError):
        decode(encode(optional(o=None)), required)
    with pytest.raises(SchemaMismatchError):
        decode(encode(either(r="3")), narrowed)


def _configured(name: str, **config: Any) -> Any:
    settings: Any = ConfigDict(frozen=True, extra="forbid")
    settings.update(config)
    base = type(f"Base{name}", (RoleContext,), {"model_config": settings})
    made: Any = create_model(
        "Ctx", __base__=base, __cls_kwargs__={"role": "critic", "registry": ContextRegistry()}, i=(int, 0)
    )
    made.__qualname__ = name
    return made


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ({}, {"strict": True}, "CONSTRAINT_TIGHTENED"),
        ({"strict": True}, {}, "CONSTRAINT_LOOSENED"),
        ({}, {"str_strip_whitespace": True}, "CODE_CHANGED"),
        ({"str_to_lower": True}, {}, "CODE_CHANGED"),
        ({}, {"ser_json_bytes": "base64"}, "BEHAVIOUR_CHANGED"),
    ],
    ids=["strict on", "strict off", "strip on", "lower off", "serialization only"],
)
def test_a_model_config_change_is_judged_by_what_old_values_do(
    old: dict[str, Any], new: dict[str, Any], rule: str
) -> None:
    """Model-wide settings as their type-level kin: strict on accepts less (breaking), off more (compatible); a
    transform in either direction reads a config section's raw input otherwise; a serialization setting changes no
    decoded value."""
    old_cls, new_cls = _configured("Cfg", **old), _configured("Cfg", **new)
    changes = diff_schemas(old_cls.model_json_schema(), new_cls.model_json_schema())
    lock = {"fingerprint": schema_info(old_cls).fingerprint, "fields": dict(schema_info(old_cls).field_digests)}
    found = _behaviour_changes(lock, new_cls, changes)
    assert [c.rule for c in found] == [rule], found
