"""The one walk over pydantic's core schema (``verl_ctx._analysis.walk``): its own contract.

Every reader of a core schema (the secret plan, field kinds, declared validators, the fingerprint, the compiled
codec, the editor schema) goes through it, so its rules are tested here once: a default is data, definitions are
followed once per path (folded once per schema), steps read as paths do.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from pydantic import BaseModel, SecretStr, create_model, field_validator

from verl_ctx import ContextRegistry, RoleContext, decode, encode
from verl_ctx._analysis import walk as schema_walk
from verl_ctx._analysis.trusted import _strip, declared_validators
from verl_ctx._analysis.trusted import function_of as trusted_function
from verl_ctx._worker.limits import with_fail_fast

# A default shaped like a core schema: a model node with a reference, a post-init hook and a secret's serializer.
SCHEMA_SHAPED = {
    "type": "model",
    "ref": "Shadow:1",
    "cls": dict,
    "post_init": "hook",
    "schema": {"type": "model-fields", "fields": {"leak": {"type": "model-field", "schema": {"type": "str"}}}},
}


class Inner(BaseModel):
    token: SecretStr | None = None
    n: int = 0

    @field_validator("n")
    @classmethod
    def _positive(cls, v: int) -> int:
        return abs(v)


class Tree(BaseModel):
    inner: Inner = Inner()
    kids: list[Tree] = []
    by_name: dict[str, Inner] = {}
    pair: tuple[int, Inner] | None = None
    options: dict[str, Any] = SCHEMA_SHAPED


class _Paths:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.recursions: list[tuple[str, str]] = []

    def enter(self, node: Any, path: str, above: tuple[str, ...]) -> bool:
        self.seen.append((path, str(node.get("type"))))
        return True

    def again(self, ref: str, path: str) -> None:
        self.recursions.append((ref, path))


def test_a_default_shaped_like_schema_is_data_for_every_reader() -> None:
    core = Tree.__pydantic_core_schema__
    defs = schema_walk.definitions(core)
    assert "Shadow:1" not in defs
    assert {cls for cls, _ in schema_walk.classes(core)} == {Tree, Inner}
    visitor = _Paths()
    schema_walk.walk(core, visitor, defs)
    assert not any("leak" in path for path, _ in visitor.seen)
    # The trusted validator's copy of the schema keeps the default as the user wrote it (it was rewritten before:
    # its post-init hook dropped, a custom-init flag added).
    stripped = _strip(core, declared_validators(core), set())
    fields = schema_walk.resolve(stripped, schema_walk.definitions(stripped))["schema"]["fields"]
    assert fields["options"]["schema"]["default"] == SCHEMA_SHAPED
    # So does the fail-fast validator's copy (it marked a default shaped like a container node as one).
    shaped_list = {"type": "list", "items_schema": {"type": "int"}}

    class Listy(BaseModel):
        table: dict[str, Any] = shaped_list
        rows: list[int] = []

    fast = with_fail_fast(Listy.__pydantic_core_schema__)
    fields = schema_walk.resolve(fast, schema_walk.definitions(fast))["schema"]["fields"]
    assert fields["table"]["schema"]["default"] == shaped_list
    assert fields["rows"]["schema"]["schema"]["fail_fast"] is True


class _Sizes(schema_walk.Fold[int]):
    """How many nodes each definition holds below it, each definition counted once and then by reference."""

    def __init__(self, root: Any) -> None:
        super().__init__(root)
        self.visits: list[str] = []
        self.recursions: list[tuple[str, int]] = []

    def visit(self, node: Any, *context: Any) -> int:
        self.visits.append(str(node.get("type")))
        return 1 + sum(self.fold(child) for _, child in schema_walk.children(node))

    def reference(self, ref: str, folded: int) -> int:
        return 1  # a definition stands in once folded

    def recursion(self, ref: str, depth: int) -> int:
        self.recursions.append((ref.split(":")[0].rsplit(".", 1)[-1], depth))
        return 0


def test_a_fold_folds_each_definition_once_and_is_told_a_recursion() -> None:
    core = Tree.__pydantic_core_schema__
    sizes = _Sizes(core)
    assert sizes.fold(core) == 1
    assert sizes.visits.count("model") == 2  # Tree and Inner, each once, however often referenced
    assert [name for name, _ in sizes.recursions] == ["Tree"]  # kids: list[Tree], told once, not folded again
    assert sizes.recursions[0][1] == 0  # Tree was the first definition open


def test_a_rewrite_copies_schema_nodes_and_keeps_what_is_no_schema() -> None:
    marked = schema_walk.rewrite(Tree.__pydantic_core_schema__, lambda original, copy: {**copy, "seen": True})
    fields = schema_walk.resolve(marked, schema_walk.definitions(marked))["schema"]["fields"]
    assert fields["inner"]["seen"]
    assert fields["inner"]["schema"]["seen"]
    assert fields["options"]["schema"]["default"] == SCHEMA_SHAPED  # no "seen" inside the user's value
    assert "seen" not in (fields["inner"]["schema"].get("metadata") or {})


def test_the_walk_names_each_step_as_paths_read_and_follows_a_recursion_once() -> None:
    visitor = _Paths()
    core = Tree.__pydantic_core_schema__
    schema_walk.walk(core, visitor, schema_walk.definitions(core))
    paths = {path for path, _ in visitor.seen}
    assert {"inner.token", "kids[*]", "by_name{key}", "by_name{*}.n", "pair[0]", "pair[1].token"} <= paths
    assert [path for _, path in visitor.recursions] == ["kids[*]"]  # the recursive model: told, not walked again


def test_union_choices_are_read_alike_whether_labelled_or_tagged() -> None:
    plain = {"type": "union", "choices": [{"type": "int"}, ({"type": "str"}, "label")]}
    tagged = {"type": "tagged-union", "choices": {"a": {"type": "int"}, "b": {"type": "str"}}}
    assert schema_walk.choices(plain) == schema_walk.choices(tagged) == [{"type": "int"}, {"type": "str"}]
    assert [c for _, c in schema_walk.children(plain)] == schema_walk.choices(plain)


class Deep(BaseModel):
    n: int = 0
    rows: list[int] = []

    @field_validator("n")
    @classmethod
    def _doubled(cls, v: int) -> int:
        return v * 2


_KEY_NAMES = ("type", "default", "config", "metadata", "ref", "serialization", "fields")  # "schema": a BaseModel method


def _named_like_schema_keys() -> type[RoleContext]:
    """A context whose fields are named as core-schema keys are, each holding a model with a validator (used once,
    so pydantic writes it in place under the field's name, not as a shared definition)."""
    fields: dict[str, Any] = {name: (Deep, Deep()) for name in _KEY_NAMES}
    fields["free"] = (Any, None)  # a dict of Any: pydantic's path, not the compiled one
    return create_model(
        "Named", __base__=RoleContext, __cls_kwargs__={"role": "critic", "registry": ContextRegistry()}, **fields
    )


def test_fields_named_as_schema_keys_are_fields_for_every_reader() -> None:
    """A model's fields map holds the user's names: one named ``type`` made the trusted and fail-fast copies compare
    a field's schema with kind names (a bare TypeError: every context with a ``type`` field, decoded from over 64 KiB
    on pydantic's path), and ones named ``default``, ``config``, ``metadata`` ... were skipped as schema keys (their
    models' validators not found, their lists not made fail-fast)."""
    named = _named_like_schema_keys()
    core = named.__pydantic_core_schema__
    assert Deep in {cls for cls, _ in schema_walk.classes(core)}
    assert id(trusted_function(Deep._doubled)) in declared_validators(core)
    fast = with_fail_fast(core)
    fields = schema_walk.resolve(fast, schema_walk.definitions(fast))["schema"]["fields"]
    for name in _KEY_NAMES:
        deep = schema_walk.resolve(fields[name]["schema"]["schema"], schema_walk.definitions(fast), defaults=True)
        assert deep["schema"]["fields"]["rows"]["schema"]["schema"]["fail_fast"] is True, name
    for size in (10, 70_000):  # under and over the fail-fast size
        ctx = named.model_validate({name: {"n": 1, "rows": [0] * size} for name in _KEY_NAMES})
        assert decode(encode(ctx), named) == ctx


def test_a_recursive_alias_kind_is_finite_and_the_same_in_every_process() -> None:
    """Kinds are a fold too: a recursive type alias is spelled out once and its recursion named by depth (its ref
    holds an id, which differs between processes). It was expanded 64 levels deep, every branch: a JSON-like alias
    with two recursive branches took ~2^32 steps, so encoding any context holding one never returned."""
    source = """
from typing import Union
from typing_extensions import TypeAliasType
from verl_ctx import ContextRegistry, RoleContext, decode, encode
from verl_ctx._analysis.kinds import _Kinds
from verl_ctx.schema import schema_info

Json = TypeAliasType("Json", "Union[dict[str, Json], list[Json], int]")

class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
    tree: Json = 0

kinds = _Kinds(Ctx.__pydantic_core_schema__)
tree = next(fields["tree"] for model, fields in kinds.models() if model == "Ctx")
ctx = Ctx(tree={"a": [1, {"b": 2}]})
assert decode(encode(ctx), Ctx) == ctx
print(kinds.kind(tree), schema_info(Ctx).field_digests["@kind Ctx.tree"])
"""
    runs = {
        subprocess.run([sys.executable, "-c", source], check=True, capture_output=True, text=True, timeout=120).stdout
        for _ in "ab"
    }
    assert len(runs) == 1
    assert runs.pop().split()[0] == "union[dict[str,recursive#0]|list[recursive#0]|int]"
