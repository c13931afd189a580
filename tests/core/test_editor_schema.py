"""The editor's ``config.schema.json`` refuses an unknown key exactly where ``validate`` refuses it, at every depth.

Schemas are generated (a nested model of each ``extra`` setting, held directly, optionally, in a list, in a dict, two
levels down, or as a tagged union member) and so are documents (valid, or with one unknown key at each place a key
can go); every pair gets the same verdict from both. Values are otherwise valid, so the verdicts differ only if the
two disagree about unknown keys.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, create_model

from verl_ctx import ContextRegistry, RoleContext, validate
from verl_ctx._files.export import config_json_schema
from verl_ctx.errors import ContextValidationError

jsonschema = pytest.importorskip("jsonschema")

EXTRAS: tuple[str | None, ...] = (None, "ignore", "forbid", "allow")
HOLDERS = ("direct", "optional", "list", "dict", "two_levels", "union")


def _inner(extra: str | None, tag: str = "a") -> type[BaseModel]:
    config = ConfigDict() if extra is None else ConfigDict(extra=extra)  # type: ignore[typeddict-item]
    tag_type: Any = Literal[tag]
    return create_model(f"Inner_{tag}_{extra}", __config__=config, kind=(tag_type, tag), timeout_s=(float, 1.0))


def _schema(reg: ContextRegistry, extra: str | None, holder: str) -> type[RoleContext]:
    inner = _inner(extra)
    annotation: Any = {
        "direct": inner,
        "optional": inner | None,
        "list": list[inner],  # type: ignore[valid-type]
        "dict": dict[str, inner],  # type: ignore[valid-type]
        "two_levels": create_model(f"Middle_{extra}", __config__=inner.model_config, inner=(inner, ...)),
        "union": inner | _inner(extra, "b"),
    }[holder]
    body = {"__annotations__": {"judge": annotation}}
    return type(f"Ctx_{extra}_{holder}", (RoleContext,), body, role="actor", registry=reg)


def _documents(holder: str) -> dict[str, Any]:
    """A valid document and, by name, one with an unknown key at each place ``holder`` lets one go."""
    node: dict[str, Any] = {"kind": "a", "timeout_s": 2.0}
    typo: dict[str, Any] = {"kind": "a", "timout_s": 2.0}
    placed: tuple[Any, Any] = {
        "direct": (node, typo),
        "optional": (node, typo),
        "list": ([node, node], [node, typo]),
        "dict": ({"x": node}, {"x": node, "y": typo}),
        "two_levels": ({"inner": node}, {"inner": typo}),
        "union": ({"kind": "b", "timeout_s": 2.0}, {"kind": "b", "timeout_s": 2.0, "ennd": 1}),
    }[holder]
    docs: dict[str, Any] = {"valid": {"judge": placed[0]}, "unknown nested": {"judge": placed[1]}}
    docs["unknown at the role"] = {"judge": placed[0], "jugde": 1}
    if holder == "two_levels":
        docs["unknown in the middle"] = {"judge": {"inner": node, "innr": 1}}
    return docs


def _validate_says(reg: ContextRegistry, doc: dict[str, Any]) -> bool:
    try:
        validate({"extra_context": {"actor": doc}}, registry=reg)
    except ContextValidationError:
        return False
    return True


def _editor_says(schema: type[RoleContext], doc: dict[str, Any]) -> bool:
    editor = jsonschema.Draft202012Validator(config_json_schema([schema]))
    return not list(editor.iter_errors({"trainer": {"any": "key"}, "extra_context": {"actor": doc}}))


@pytest.mark.parametrize(("extra", "holder"), list(itertools.product(EXTRAS, HOLDERS)))
def test_the_editor_refuses_an_unknown_key_exactly_where_validate_does(extra: str | None, holder: str) -> None:
    reg = ContextRegistry(f"editor-{extra}-{holder}")
    schema = _schema(reg, extra, holder)
    verdicts = {}
    for name, doc in _documents(holder).items():
        verdicts[name] = (_validate_says(reg, doc), _editor_says(schema, doc))
    assert all(by_validate == by_editor for by_validate, by_editor in verdicts.values()), verdicts
    assert verdicts["valid"] == (True, True)
    # validate's own rule (docs/editor.md): an unknown key is refused unless the model there allows extras.
    assert verdicts["unknown nested"][0] is (extra == "allow")


def test_the_example_config_schema_refuses_a_typo_in_a_nested_model() -> None:
    """The committed example: ``judge.timout_s`` (a plain nested BaseModel) is refused, as validate refuses it."""
    from examples.custom_recipe.contexts import RewardContext

    editor = jsonschema.Draft202012Validator(config_json_schema([RewardContext]))
    errors = [e.message for e in editor.iter_errors({"extra_context": {"reward": {"judge": {"timout_s": 3}}}})]
    assert errors == ["Additional properties are not allowed ('timout_s' was unexpected)"]
