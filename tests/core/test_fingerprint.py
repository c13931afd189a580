"""The fingerprint sees everything that changes a decoded value, names it, and is the same in every process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from pydantic import Field

from verl_ctx import ContextRegistry, RoleContext
from verl_ctx._worker.decode import FAIL_FAST_BYTES
from verl_ctx.schema import SchemaInfo, schema_info

HEADER = """
from typing import Annotated, Any
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer,
    PlainValidator, WrapValidator, field_serializer, field_validator, model_serializer, model_validator)
from verl_ctx import ContextRegistry, RoleContext
"""

BASE = """
SCALE = 100

class Row(BaseModel):
    a: int = 1

class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
    '''The critic's context.'''
    x: int = 5
    name: str = "n"
    rows: list[Row] = []
"""


def _info(source: str, module: str = "schemamod") -> SchemaInfo:
    """The SchemaInfo of `Ctx` as defined by ``source`` (a module of its own)."""
    namespace: dict[str, object] = {"__name__": module}
    exec(
        compile(textwrap.dedent(HEADER) + textwrap.dedent(source), f"<{module}>", "exec", dont_inherit=True), namespace
    )
    return schema_info(namespace["Ctx"])  # type: ignore[arg-type]


def _body(*lines: str) -> str:
    """BASE with ``lines`` appended to the class body of `Ctx`."""
    return BASE + "".join(f"    {line}\n" for line in "\n".join(lines).splitlines())


def _swap(old: str, new: str) -> str:
    assert old in BASE
    return BASE.replace(old, new)


# Each one changes what some payload decodes to (or how it serialises), with the same JSON Schema.
CHANGES = {
    "field_validator": _body("@field_validator('x')", "@classmethod", "def _v(cls, v): return v * 100"),
    "model_validator (before)": _body(
        "@model_validator(mode='before')", "@classmethod", "def _m(cls, data): return data"
    ),
    "model_validator (after)": _body("@model_validator(mode='after')", "def _m(self): return self"),
    "AfterValidator": _swap("x: int = 5", "x: Annotated[int, AfterValidator(lambda v: -v)] = 5"),
    "BeforeValidator": _swap("x: int = 5", "x: Annotated[int, BeforeValidator(lambda v: v)] = 5"),
    "PlainValidator": _swap("x: int = 5", "x: Annotated[int, PlainValidator(int)] = 5"),
    "WrapValidator": _swap("x: int = 5", "x: Annotated[int, WrapValidator(lambda v, h: h(v))] = 5"),
    "field_serializer": _body("@field_serializer('x')", "def _s(self, v): return v"),
    "model_serializer": _body("@model_serializer", "def _s(self): return {}"),
    "PlainSerializer": _swap("x: int = 5", "x: Annotated[int, PlainSerializer(str)] = 5"),
    "validator on a list item's model": _swap("a: int = 1", "a: Annotated[int, AfterValidator(lambda v: v)] = 1"),
    "str_to_lower": _body("model_config = ConfigDict(str_to_lower=True)"),
    "strict": _body("model_config = ConfigDict(strict=True)"),
    "a nested model's extra": _swap("    a: int = 1", "    model_config = ConfigDict(extra='forbid')\n    a: int = 1"),
    "Field(strict=True)": _swap("x: int = 5", "x: int = Field(5, strict=True)"),
    "tuple instead of list": _swap("rows: list[Row] = []", "rows: tuple[Row, ...] = ()"),
    "int keys instead of str keys": _swap("rows: list[Row] = []", "rows: dict[int, Row] = {}"),
}


@pytest.mark.parametrize("variant", list(CHANGES))
def test_fingerprint_sees_what_json_schema_does_not(variant: str) -> None:
    """Validators, serializers, config and Python-only type distinctions change the fingerprint."""
    base = BASE if variant != "int keys instead of str keys" else _swap("list[Row] = []", "dict[str, Row] = {}")
    assert _info(CHANGES[variant]).fingerprint != _info(base).fingerprint


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("def _v(cls, v): return v * 100", "def _v(cls, v): return v * 10"),
        ("def _v(cls, v): return v * SCALE", "def _v(cls, v): return v * SCALE2"),
        ("def _v(cls, v): return v.lower()", "def _v(cls, v): return v.upper()"),
        ("def _v(cls, v): return _helper(v)", "def _v(cls, v): return _helper2(v)"),
    ],
)
def test_editing_a_validators_code_changes_the_fingerprint(old: str, new: str) -> None:
    """Bytecode, constants, attribute names and the helpers a validator calls are all part of its digest."""
    helpers = "\nSCALE2 = 10\ndef _helper(v): return v + 1\ndef _helper2(v): return v - 1\n"
    lines = ("@field_validator('x', 'name')", "@classmethod")
    a = _info(helpers + _body(*lines, old))
    b = _info(helpers + _body(*lines, new))
    assert a.fingerprint != b.fingerprint


def test_a_module_constant_a_validator_reads_is_part_of_it() -> None:
    """`v * SCALE` behaves differently when SCALE does, so its value is digested with the code."""
    body = _body("@field_validator('x')", "@classmethod", "def _v(cls, v): return v * SCALE")
    assert _info(body).fingerprint != _info(body.replace("SCALE = 100", "SCALE = 10")).fingerprint


def test_a_closure_value_is_part_of_the_validator() -> None:
    """Two validators built by one factory with different captured values differ."""
    factory = "def _times(k):\n    return lambda v: v * k\n"
    a = _info(factory + _swap("x: int = 5", "x: Annotated[int, AfterValidator(_times(2))] = 5"))
    b = _info(factory + _swap("x: int = 5", "x: Annotated[int, AfterValidator(_times(3))] = 5"))
    assert a.fingerprint != b.fingerprint


@pytest.mark.parametrize(
    "edit",
    [
        _swap("'''The critic's context.'''", "'''Another docstring.'''"),
        _swap('name: str = "n"', 'name: str = Field("n", description="documented")'),
        _body("@field_validator('x')", "@classmethod", "def _v(cls, v):", "    '''Edited doc.'''", "    return v"),
    ],
    ids=["class docstring", "field description", "validator docstring"],
)
def test_documentation_is_not_behaviour(edit: str) -> None:
    """Docstrings and descriptions do not change the fingerprint (the validator's own docstring neither)."""
    if "_v(cls, v)" in edit:
        plain = _body("@field_validator('x')", "@classmethod", "def _v(cls, v):", "    '''Doc.'''", "    return v")
        assert _info(edit).fingerprint == _info(plain).fingerprint
    else:
        assert _info(edit).fingerprint == _info(BASE).fingerprint


def test_the_schemas_own_name_is_not_part_of_it() -> None:
    """The same schema in another module (a script's `__main__` vs its package) keeps its fingerprint."""
    assert _info(BASE, module="__main__").fingerprint == _info(BASE, module="pkg.contexts").fingerprint


def test_validators_and_config_are_named_by_where_they_apply() -> None:
    """Each user validator, serializer and non-default config has an entry that says what and where."""
    info = _info(
        _swap("a: int = 1", "a: Annotated[int, AfterValidator(lambda v: v)] = 1")
        + "    model_config = ConfigDict(str_to_lower=True)\n"
        + "    @field_validator('x')\n    @classmethod\n    def _v(cls, v): return v\n"
        + "    @field_serializer('name')\n    def _s(self, v): return v\n"
    )
    named = {k: v for k, v in info.field_digests.items() if k.startswith("@") and not k.startswith("@kind ")}
    assert set(named) == {
        "@after-validator Row.<lambda> on Row.a",
        "@after-validator Ctx._v on Ctx.x",
        "@serializer Ctx._s on Ctx.name",
        "@config Ctx",
        "@setting *",  # the mark that this schema's validation settings are recorded (none is set here)
    }
    assert named["@config Ctx"] == "str_to_lower=True"
    kinds = {"@kind Ctx.x", "@kind Ctx.name", "@kind Ctx.rows", "@kind Row.a"}  # one per field of every model
    assert set(info.field_digests) - set(named) == {"x", "name", "rows", *kinds}


def test_field_digests_change_only_for_the_field_that_changed() -> None:
    """A validator on `x` changes x's digest, not name's; one in the list item's model changes rows'."""
    base = _info(BASE).field_digests
    on_x = _info(CHANGES["field_validator"]).field_digests
    on_row = _info(CHANGES["validator on a list item's model"]).field_digests
    assert (on_x["x"] != base["x"], on_x["name"] == base["name"], on_x["rows"] == base["rows"]) == (True, True, True)
    assert (on_row["rows"] != base["rows"], on_row["x"] == base["x"]) == (True, True)


PROBE = """
import json, sys
sys.path.insert(0, {tests!r})
from core.test_fingerprint import CHANGES, _info
source = CHANGES["WrapValidator"] + (
    "    tags: set[str] = {{'a', 'b', 'c', 'd'}}\\n"
    "    @field_validator('name')\\n"
    "    @classmethod\\n"
    "    def _v(cls, v): return v if v in {{'x', 'y', 'z'}} else v.strip()\\n"
)
info = _info(source)
print(json.dumps([info.fingerprint, info.field_digests]))
"""


def test_fingerprint_is_the_same_in_every_process() -> None:
    """Two interpreters with different hash seeds agree (no id(), address or set order in the digest)."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outputs = set()
    for seed in ("1", "2", "31337"):
        proc = subprocess.run(
            [sys.executable, "-c", PROBE.format(tests=tests)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        outputs.add(proc.stdout)
    assert len(outputs) == 1


def _fingerprint_of(doc: str, default: float, bound: float) -> str:
    reg = ContextRegistry()

    class Ctx(RoleContext, role="critic", registry=reg):
        value_clip: float = Field(default, gt=bound, description=doc)

    Ctx.__doc__ = doc
    return schema_info(Ctx).fingerprint


def test_fingerprint_ignores_docs_but_not_shape() -> None:
    """Editing a description keeps the fingerprint; changing a default or a constraint changes it."""
    base = _fingerprint_of("clip", 0.2, 0)
    assert _fingerprint_of("clip range for the value loss", 0.2, 0) == base
    assert _fingerprint_of("clip", 0.3, 0) != base
    assert _fingerprint_of("clip", 0.2, 0.1) != base


def test_fields_named_like_doc_keys_still_count(registry: ContextRegistry) -> None:
    """A field called `title` or `description` is data, not documentation, in the fingerprint."""

    class A(RoleContext, role="a", registry=registry):
        title: str = ""

    class B(RoleContext, role="b", registry=registry):
        other: str = ""

    assert schema_info(A).fingerprint != schema_info(B).fingerprint
    assert set(schema_info(A).field_digests) == {"title", f"@kind {A.__qualname__}.title", "@setting *"}


def test_schema_info_is_computed_once_per_class(registry: ContextRegistry) -> None:
    """The fingerprint costs a JSON Schema build, so it is computed once per class."""

    class Ctx(RoleContext, role="critic", registry=registry):
        x: int = 1

    assert schema_info(Ctx) is schema_info(Ctx)


def test_a_default_models_cached_property_read_first_is_not_part_of_it() -> None:
    """A frozen default instance is shared by every context; reading its cached_property puts the value in its
    __dict__, and a fingerprint taken after that differed from the worker's (a SchemaMismatchError for nothing)."""
    from functools import cached_property

    from pydantic import BaseModel, ConfigDict

    def fingerprint(read: bool) -> str:
        class Item(BaseModel):
            model_config = ConfigDict(frozen=True)
            n: int

            @cached_property
            def double(self) -> int:
                return 2 * self.n

        class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
            one: Item = Item(n=1)

        if read:
            assert Ctx().one.double == 2
            assert "double" in Ctx.model_fields["one"].default.__dict__
        return schema_info(Ctx).fingerprint

    assert fingerprint(read=True) == fingerprint(read=False)


def test_a_default_dict_with_a_ref_key_is_refused_with_what_to_do() -> None:
    """pydantic's JSON Schema generation fails on a default holding a "$ref" key (a bare KeyError inside it): the
    schema is refused saying so and what to do; the same value from a default_factory is not in the JSON Schema."""
    from verl_ctx.errors import SchemaDefinitionError

    class Given(RoleContext, role="critic", registry=ContextRegistry()):
        refs: dict[str, str] = {"$ref": "#/x"}  # noqa: RUF012 - a pydantic default, copied per instance

    class Factory(RoleContext, role="critic", registry=ContextRegistry()):
        refs: dict[str, str] = Field(default_factory=lambda: {"$ref": "#/x"})

    with pytest.raises(SchemaDefinitionError, match=r'a dict with a "\$ref" key .* default_factory'):
        schema_info(Given)
    assert schema_info(Factory).fingerprint


# Defaults shaped like pydantic-core schema nodes: keys the walks over that schema read with a meaning of their own.
_SCHEMA_SHAPED: list[dict[str, Any]] = [
    {"config": 0},
    {"type": "model", "cls": 1, "fields": {"a": 2}},
    {"default_factory": 1, "post_init": "x", "custom_init": True},
    {"computed_fields": [1], "function": {"function": 2}, "serialization": {"type": "function-wrap"}},
    {"metadata": 1, "ref": "r", "model_name": "m"},
    {"schema": {"type": "definitions", "schema": 1}},
    {"type": "definition-ref", "schema_ref": "nowhere"},
    {"type": "definition-ref"},
    {"type": "typed-dict", "fields": 3},
    {"type": "dataclass-args", "fields": [1]},
    {"type": "model", "cls": "C", "schema": {"type": "model-fields", "fields": {"a": 1}}},
    {"type": ["list"], "items_schema": {"type": "list"}},
]


@pytest.mark.parametrize("default", _SCHEMA_SHAPED, ids=[",".join(d) + f"#{i}" for i, d in enumerate(_SCHEMA_SHAPED)])
def test_a_default_shaped_like_a_schema_node_is_data(default: dict[str, Any]) -> None:
    """A dict default is the user's data: one with a "config", "fields" or "type" key was walked as a pydantic-core
    schema node by the fingerprint, the kinds, the secret plan or the class-code walk, so encode raised a bare
    AttributeError or KeyError (``{"config": 0}``, found by test_compiled's generated models). Each is carried and
    fingerprinted as its value: another value, another fingerprint. A payload large enough for the fail-fast validator
    is decoded too: its schema copy rewrote defaults as nodes (``{"type": [...]}`` raised a bare TypeError, and a
    default ``{"type": "list"}`` came back with a ``fail_fast`` key)."""
    from verl_ctx import decode, encode

    def model(value: dict[str, Any]) -> type[RoleContext]:
        class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
            table: dict[str, Any] = Field(default=value)
            pad: str = ""

        return Ctx

    changed = {key: [value] for key, value in default.items()}
    cls = model(default)
    assert decode(encode(cls()), cls).model_dump() == {"table": default, "pad": ""}
    large = "x" * (FAIL_FAST_BYTES + 1)
    assert decode(encode(cls.model_validate({"pad": large})), cls).model_dump() == {"table": default, "pad": large}
    assert schema_info(cls).fingerprint != schema_info(model(changed)).fingerprint


_READS_STATE = """
import dataclasses, functools

@dataclasses.dataclass
class Limits:
    limit: int

LIMITS = Limits(limit={limit})

@functools.lru_cache
def shifted(v):
    return v + {shift}

norm = {norm}

class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
    x: int = 5
    name: str = "n"

    @field_validator("x")
    @classmethod
    def _capped(cls, v):
        return min(shifted(v), LIMITS.limit)

    @field_validator("name")
    @classmethod
    def _normed(cls, v):
        return norm(v)
"""


@pytest.mark.parametrize(
    "edit",
    [{"limit": "10"}, {"shift": "1"}, {"norm": "str.lower"}],
    ids=["module-level instance's attribute", "lru_cache helper's body", "builtin bound to a name"],
)
def test_what_a_validator_reads_through_objects_wrappers_and_builtins_is_fingerprinted(edit: dict[str, str]) -> None:
    """A validator reading `LIMITS.limit` (a module-level dataclass instance), calling an `lru_cache`-wrapped helper,
    or a builtin bound to a name (`norm = str.strip`): changing what it reads changes the fingerprint, so a skewed
    worker is told instead of silently keeping values the new code would not give."""
    values = {"limit": "100", "shift": "0", "norm": "str.strip"}

    def source(given: dict[str, str]) -> str:
        return _READS_STATE.format(**given)

    base = _info(source(values), module="stateful")
    assert _info(source(values), module="stateful").fingerprint == base.fingerprint  # stable
    assert _info(source({**values, **edit}), module="stateful").fingerprint != base.fingerprint
