"""The worker holds exactly the values the driver validated: no validator runs twice, and code the fingerprint
cannot see is no longer silent."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from itertools import count
from pathlib import Path
from typing import Annotated, Any
from uuid import UUID

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    WrapValidator,
    field_validator,
    model_validator,
)

from verl_ctx import ContextRegistry, RoleContext, decode, encode
from verl_ctx.envelope import from_text
from verl_ctx.errors import EnvelopeError, SchemaMismatchError, SchemaSkewWarning
from verl_ctx.schema import schema_info

REGISTRY = ContextRegistry("validated once")
_ticket = count(1)


class Row(BaseModel):
    weight: Annotated[int, AfterValidator(lambda v: v + 1)]  # not idempotent: +1 on every run
    tag: str = ""
    _seen: list[int] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any) -> None:
        self._seen.append(self.weight)
        self.__dict__["tag"] = self.tag + "!"  # a hook that assigns a field: the driver's result must stand


class Shaped(RoleContext, role="critic", registry=REGISTRY):
    n: int = 1
    name: str = "x"
    rows: list[Row] = Field(default_factory=list)
    ticket: int = Field(default_factory=lambda: next(_ticket))  # a computed default: a new value per instance
    wrapped: Annotated[int, WrapValidator(lambda v, h: h(v) * 2)] = 0
    secret: SecretStr = SecretStr("")
    where: tuple[Path, ...] = ()  # built from the payload's list of str: types still checked and rebuilt
    runs: int = 0

    @field_validator("n")
    @classmethod
    def _triple(cls, v: int) -> int:
        return v * 3

    @field_validator("name", mode="before")
    @classmethod
    def _prefix(cls, v: Any) -> Any:
        return f"p-{v}"

    @model_validator(mode="before")
    @classmethod
    def _count(cls, data: Any) -> Any:
        return {**data, "runs": int(data.get("runs", 0)) + 1} if isinstance(data, dict) else data


def _same(a: BaseModel, b: BaseModel) -> None:
    """Field by field, types included (a tuple is not a list, a SecretStr is not a str)."""
    assert type(a) is type(b)
    for name in type(a).model_fields:
        x, y = getattr(a, name), getattr(b, name)
        assert type(x) is type(y), (name, type(x), type(y))
        if isinstance(x, SecretStr):
            assert x.get_secret_value() == y.get_secret_value()
        elif isinstance(x, (list, tuple)):
            assert len(x) == len(y)
            for p, q in zip(x, y, strict=True):
                _same(p, q) if isinstance(p, BaseModel) else None
                assert isinstance(p, BaseModel) or (type(p) is type(q) and p == q)
        else:
            assert x == y, name


@given(
    n=st.integers(-1000, 1000),
    name=st.text(max_size=8),
    weights=st.lists(st.integers(-50, 50), max_size=5),
    wrapped=st.integers(-100, 100),
    secret=st.text(max_size=8),
    large=st.booleans(),
)
def test_non_idempotent_validators_post_init_and_computed_defaults_run_once(
    n: int, name: str, weights: list[int], wrapped: int, secret: str, large: bool
) -> None:
    """Every validator kind, model_post_init and default factories: the worker's instance is the driver's."""
    rows = [Row(weight=w, tag="t") for w in weights]
    if large:  # past the fail-fast threshold: the bounded-error validator takes the same trusted path
        rows += [Row(weight=0, tag="x" * 64)] * 1100
    sent = Shaped(n=n, name=name, rows=rows, wrapped=wrapped, secret=SecretStr(secret), where=(Path("/a"),))
    got = decode(encode(sent), Shaped)
    _same(got, sent)
    assert [r._seen for r in got.rows[:5]] == [[r.weight] for r in got.rows[:5]]  # the worker's private state


def test_a_payload_edited_after_validation_is_still_refused() -> None:
    """Types and constraints are still checked on the trusted path; an edited payload is an EnvelopeError."""
    env = encode(Shaped(n=2))
    data = msgspec.msgpack.decode(env["payload"])
    for field, bad in [("n", "two"), ("rows", [{"weight": "heavy", "tag": ""}]), ("extra", 1)]:
        edited = {**env, "payload": msgspec.msgpack.encode({**data, field: bad})}
        with pytest.raises(EnvelopeError, match=field):
            decode(edited, Shaped)


# --- two processes: a driver encodes, this process (the worker) decodes ----------------------------------

BASE = """
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Literal
from uuid import UUID
from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from verl_ctx import ContextRegistry, RoleContext
{imports}
{module}

class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
    {body}
"""


def _body(field: str, returns: str, *before: str) -> str:
    """A class body: ``field``, the lines ``before`` its validator, and a field validator returning ``returns``."""
    name = field.split(":")[0]
    lines = [field, *before, f"@field_validator('{name}')", "@classmethod", f"def _t(cls, v): return {returns}"]
    return "\n    ".join(lines)


_COLOR = "class Color(str, Enum):\n    RED = 'red'"
_INNER = "class Inner(BaseModel):\n    a: int = 1"
# A nested model that keeps unknown keys: a field the worker's copy lacks arrives as plain data in its extras.
_OPEN = _INNER + "\nclass Open(BaseModel, extra='allow'):\n    b: int = 0"
_OPEN_ID = "class OpenId(BaseModel, extra='allow'):\n    {field}"
# Lossless changes: the driver's typed value decodes unchanged, with a SchemaSkewWarning.
LOSSLESS: dict[str, tuple[dict[str, str], dict[str, str], dict[str, Any]]] = {
    "int -> int | None (a widening)": ({"body": "x: int = 0"}, {"body": "x: int | None = 0"}, {"x": 3}),
    "a field added beside a validator that is not idempotent": (
        {"body": _body("n: int = 1", "v * 3")},
        {"body": _body("n: int = 1", "v * 3", "x: int = 3")},
        {"n": 1},
    ),
    "a nested field added with a default": (
        {"module": _INNER, "body": "x: Inner = Inner()"},
        {"module": _INNER + "\n    b: int = 0", "body": "x: Inner = Inner()"},
        {"x": {"a": 2}},
    ),
    "a field renamed keeping its old name as alias": (
        {"body": "x: int = 0"},
        {"body": "y: int = Field(0, alias='x')"},
        {"x": 3},
    ),
    # The oracle's seed 2026-12-03: the old key was taken for an unknown one the model keeps untyped, and refused.
    "a UUID field of a model that keeps unknown keys renamed keeping its old name as alias": (
        {"module": _OPEN_ID.format(field="u: UUID = UUID(int=0)"), "body": "x: OpenId = OpenId()"},
        {"module": _OPEN_ID.format(field="v: UUID = Field(UUID(int=0), alias='u')"), "body": "x: OpenId = OpenId()"},
        {"x": {"u": str(UUID(int=7))}},
    ),
    "a plain field removed from a model that keeps unknown keys": (
        {"module": _OPEN + "\n    c: int = 0", "body": "x: Open = Open()"},
        {"module": _OPEN, "body": "x: Open = Open()"},
        {"x": {"c": 3}},
    ),
}
_AFTER_BUMP = (
    "@model_validator(mode='after')\n    def _m(self):\n        object.__setattr__(self, 'n', self.n + self._bump())"
)
# case -> (driver source parts, worker source parts, the context's arguments). Each edit is invisible to the
# JSON Schema and to the validator's own bytecode; the value it produces differs.
CASES: dict[str, tuple[dict[str, str], dict[str, str], dict[str, Any]]] = {
    "same code, non-idempotent validator": (
        {"body": _body("n: int = 1", "v * 3")},
        {"body": _body("n: int = 1", "v * 3")},
        {"n": 2},
    ),
    "a ClassVar a validator reads": (
        {"body": _body("n: int = 1", "v * cls.K", "K: ClassVar[int] = 2")},
        {"body": _body("n: int = 1", "v * cls.K", "K: ClassVar[int] = 6")},
        {"n": 1},
    ),
    "a staticmethod helper": (
        {"body": _body("s: str = ''", "cls._norm(v)", "@staticmethod", "def _norm(v): return v.lower()")},
        {"body": _body("s: str = ''", "cls._norm(v)", "@staticmethod", "def _norm(v): return v.upper()")},
        {"s": "abc"},
    ),
    "a method a model_validator calls": (
        {"body": "n: int = 0\n    def _bump(self): return 1\n    " + _AFTER_BUMP + "\n        return self"},
        {"body": "n: int = 0\n    def _bump(self): return 5\n    " + _AFTER_BUMP + "\n        return self"},
        {"n": 0},
    ),
    "an imported module's attribute": (
        {"imports": "import {helper}", "helper": "SCALE = 0.5", "body": _body("x: float = 1.0", "v * {helper}.SCALE")},
        {"imports": "import {helper}", "helper": "SCALE = 5.0", "body": _body("x: float = 1.0", "v * {helper}.SCALE")},
        {"x": 1.0},
    ),
    # Types the wire carries alike: the worker re-encodes the same bytes but holds another kind of value.
    "tuple -> list": ({"body": "x: tuple[int, ...] = ()"}, {"body": "x: list[int] = []"}, {"x": [1, 2]}),
    "set -> list": ({"body": "x: set[int] = set()"}, {"body": "x: list[int] = []"}, {"x": [1]}),
    "frozenset -> set": ({"body": "x: frozenset[int] = frozenset()"}, {"body": "x: set[int] = set()"}, {"x": [1]}),
    "Enum -> Literal": (
        {"module": _COLOR, "body": "x: Color = Color.RED"},
        {"module": _COLOR, "body": "x: Literal['red'] = 'red'"},
        {"x": "red"},
    ),
    "str -> Path": ({"body": "x: str = ''"}, {"body": "x: Path = Path('.')"}, {"x": "/a"}),
    "str -> UUID": ({"body": "x: str = ''"}, {"body": "x: UUID = UUID(int=0)"}, {"x": str(UUID(int=7))}),
    "nested model -> dict": (
        {"module": _INNER, "body": "x: Inner = Inner()"},
        {"module": _INNER, "body": "x: dict[str, Any] = {}"},
        {"x": {"a": 2}},
    ),
    "a nested model removed from a model that keeps unknown keys (held as a dict)": (
        {"module": _OPEN + "\n    c: Inner | None = None", "body": "x: Open = Open()"},
        {"module": _OPEN, "body": "x: Open = Open()"},
        {"x": {"c": {"a": 2}}},
    ),
    "UUID -> str, renamed keeping its old name as alias in a model that keeps unknown keys": (
        {"module": _OPEN_ID.format(field="u: UUID = UUID(int=0)"), "body": "x: OpenId = OpenId()"},
        {"module": _OPEN_ID.format(field="v: str = Field('', alias='u')"), "body": "x: OpenId = OpenId()"},
        {"x": {"u": str(UUID(int=7))}},
    ),
    "SecretStr -> str": ({"body": "x: SecretStr = SecretStr('')"}, {"body": "x: str = ''"}, {"x": "tok"}),
    "a module-level dict constant": (
        {"module": "ALIASES = {'gpt': 'gpt'}", "body": _body("m: str = ''", "ALIASES.get(v, v)")},
        {"module": "ALIASES = {'gpt': 'gpt-5'}", "body": _body("m: str = ''", "ALIASES.get(v, v)")},
        {"m": "gpt"},
    ),
}


ALL = {**CASES, **LOSSLESS}
# What a refusal names, where it is not the context's own field ``Ctx.<first argument>``.
NAMED = {
    "a nested model removed from a model that keeps unknown keys (held as a dict)": "Open.c (its type",
    "UUID -> str, renamed keeping its old name as alias in a model that keeps unknown keys": "OpenId.u (its type",
}


def _write(root: Path, case: int, parts: dict[str, str]) -> str:
    """Write case ``case``'s module (and its helper module) under ``root``; return the module's name."""
    name, helper = f"skew_ctx_{case}", f"skew_helper_{case}"
    root.mkdir(parents=True, exist_ok=True)
    fill = {"imports": "", "module": "", **{k: v.replace("{helper}", helper) for k, v in parts.items()}}
    (root / f"{name}.py").write_text(BASE.format(**fill))
    (root / f"{helper}.py").write_text(fill.get("helper", "") + "\n")
    return name


DRIVER = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
from verl_ctx import encode
from verl_ctx.envelope import to_text
out = {}
for i, (name, kwargs) in enumerate(json.loads(sys.argv[2])):
    ctx = importlib.import_module(name).Ctx(**kwargs)
    out[i] = [to_text(encode(ctx)), {k: getattr(ctx, k) for k in kwargs}]
print(json.dumps(out, default=repr))
"""


@pytest.fixture(scope="module")
def driver_texts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, dict[str, Any]]]:
    """One driver process encodes every case with its driver-side code."""
    root = tmp_path_factory.mktemp("driver")
    plan = [[_write(root, i, driver), kwargs] for i, (driver, _, kwargs) in enumerate(ALL.values())]
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(root), json.dumps(plan)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    return {case: (out[str(i)][0], out[str(i)][1]) for i, case in enumerate(ALL)}


def _worker_schema(root: Path, case: int, parts: dict[str, str]) -> Any:
    name = _write(root, case, parts)
    sys.path.insert(0, str(root))
    try:
        spec = importlib.util.spec_from_file_location(name, root / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.Ctx
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(f"skew_helper_{case}", None)


@pytest.mark.parametrize("case", list(CASES))
def test_the_worker_never_holds_other_values_than_the_driver(
    case: str, driver_texts: dict[str, tuple[str, dict[str, Any]]], tmp_path: Path
) -> None:
    """Same code: the driver's values, validated once. Code that shapes values, or a type the wire carries alike,
    changed on the worker's side: decoding refuses, naming what changed, never decodes another value silently."""
    text, driver_values = driver_texts[case]
    schema = _worker_schema(tmp_path, list(ALL).index(case), CASES[case][1])
    if CASES[case][0] == CASES[case][1]:
        got = decode(text, schema)
        assert {k: getattr(got, k) for k in driver_values} == driver_values
        return
    assert from_text(text)["fingerprint"] != schema_info(schema).fingerprint
    with pytest.raises(SchemaMismatchError) as caught:
        decode(text, schema)
    field = next(iter(CASES[case][2]))
    message = str(caught.value)  # the value that would change, or the field whose kind changed, is named
    assert f"collapsed): {field}" in message or NAMED.get(case, f"Ctx.{field} (its type") in message
    assert "tok" not in str(caught.value)  # the SecretStr case: the secret is not in the message


@pytest.mark.parametrize("case", list(LOSSLESS))
def test_a_change_that_keeps_every_typed_value_decodes_with_a_warning(
    case: str, driver_texts: dict[str, tuple[str, dict[str, Any]]], tmp_path: Path
) -> None:
    """A widening to an optional, a nested field added with a default: the typed values are the driver's."""
    text, _ = driver_texts[case]
    schema = _worker_schema(tmp_path, list(ALL).index(case), LOSSLESS[case][1])
    with pytest.warns(SchemaSkewWarning):
        got = decode(text, schema)
    if "n" in LOSSLESS[case][2]:  # the shared validator ran on the driver only: 1 * 3, not 9
        assert got.n == 3
    elif "UUID" in case:
        assert got.x.v == UUID(int=7)
        assert got.x.model_extra == {}
    elif "alias" in case:
        assert got.y == 3
    elif isinstance(LOSSLESS[case][2]["x"], dict) and "c" in LOSSLESS[case][2]["x"]:
        assert got.x.model_extra == {"c": 3}
    else:
        assert got.x == 3 or got.x.a == 2


def test_the_fingerprint_ignores_a_migration_and_keeps_a_plain_class() -> None:
    """A migration shapes an older version's payload (the version covers it), and a class with no methods or
    class attributes has the fingerprint it had before class state was digested."""

    def make(step: str) -> type[RoleContext]:
        namespace: dict[str, Any] = {}
        exec(  # two versions of one class body
            textwrap.dedent(f"""
            from verl_ctx import ContextRegistry, RoleContext, migration
            class Ctx(RoleContext, role="critic", version=2, registry=ContextRegistry()):
                n: int = 1
                @migration(from_version=1)
                def _up(data):
                    data["n"] = {step}
                    return data
            """),
            namespace,
        )
        return namespace["Ctx"]  # type: ignore[no-any-return]

    assert schema_info(make("1")).fingerprint == schema_info(make("2")).fingerprint
    assert not [k for k in schema_info(make("1")).field_digests if k.startswith("@class")]


class Tree(BaseModel):
    label: Annotated[str, AfterValidator(lambda v: v + "+")] = ""  # not idempotent
    kids: list[Tree] = Field(default_factory=list)


class Forest(RoleContext, role="ref", registry=REGISTRY):
    tree: Tree = Field(default_factory=Tree)


def test_a_recursive_model_is_described_once_and_validated_once() -> None:
    """A model that refers to itself: its kinds and trusted validator are built (no endless walk), and every node's
    validator ran once, on the driver."""
    sent = Forest(tree=Tree(label="a", kids=[Tree(label="b", kids=[Tree(label="c")])]))
    got = decode(encode(sent), Forest)
    assert got == sent
    assert got.tree.kids[0].kids[0].label == "c+"
    assert "@kind Tree.kids" in schema_info(Forest).field_digests
