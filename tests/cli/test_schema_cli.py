"""`verl-ctx schema export / check / envelope`, the committed schemas/, and editor (JSON Schema) support."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import REPO, Run

V1 = """
    from typing import Literal
    from pydantic import Field
    from verl_ctx import RoleContext, migration

    class CriticContext(RoleContext, role="critic", version={version}):
        value_clip: float = Field(0.2, gt={gt})
        shaping: Literal[{shapes}] = "none"
        {extra}
        {migration}
"""


def _module(
    version: int = 1, gt: float = 0, shapes: str = '"none", "length_penalty"', extra: str = "", migration: str = ""
) -> str:
    return V1.format(version=version, gt=gt, shapes=shapes, extra=extra, migration=migration)


@pytest.fixture
def exported(run_cli: Run, write: Callable[[str, str], Path], tmp_path: Path) -> Path:
    write("ctxmod.py", _module())
    res = run_cli("schema", "export", "-s", "ctxmod", "-o", "exported")
    assert res.code == 0, res.err
    return tmp_path / "exported"


def test_export_writes_one_schema_per_role_a_config_schema_and_a_lock(exported: Path) -> None:
    """The export holds critic.schema.json, config.schema.json and verl-ctx.lock.json."""
    assert sorted(p.name for p in exported.iterdir()) == [
        "config.schema.json",
        "critic.schema.json",
        "verl-ctx.lock.json",
    ]
    lock = json.loads((exported / "verl-ctx.lock.json").read_text())
    (entry,) = lock["schemas"]
    assert (entry["roles"], entry["schema_id"], entry["version"]) == (["critic"], "ctxmod:CriticContext", 1)
    assert len(entry["fingerprint"]) == 64


def test_unchanged_schema_passes(run_cli: Run, exported: Path) -> None:
    """Today's code equal to the export: exit 0."""
    res = run_cli("schema", "check", "-s", "ctxmod", "exported")
    assert res.code == 0, res.out + res.err


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"gt": 0.1}, "CONSTRAINT_TIGHTENED"),
        ({"shapes": '"none"'}, "ENUM_VALUE_REMOVED"),
        ({"extra": "beta: float"}, "REQUIRED_FIELD_ADDED"),
        ({"extra": "value_clip: int = 1"}, "FIELD_TYPE_CHANGED"),
    ],
)
def test_breaking_change_without_version_bump_fails(
    run_cli: Run, exported: Path, write: Callable[[str, str], Path], change: dict[str, object], rule: str
) -> None:
    """Each breaking rule is named, and without a version bump the check exits 1 saying what to add."""
    write("ctxmod.py", _module(**change))  # type: ignore[arg-type]
    res = run_cli("schema", "check", "-s", "ctxmod", "exported", "--format", "json")
    assert res.code == 1, res.out + res.err
    (report,) = res.json()["schemas"]
    assert rule in {c["rule"] for c in report["changes"] if c["breaking"]}
    assert "set version=2" in report["problem"]
    assert "@migration(from_version=1)" in report["problem"]


def test_version_bump_needs_a_migration(run_cli: Run, exported: Path, write: Callable[[str, str], Path]) -> None:
    """Bumping the version without a migration fails; with one it passes."""
    write("ctxmod.py", _module(version=2, extra="beta: float"))
    res = run_cli("schema", "check", "-s", "ctxmod", "exported")
    assert res.code == 1
    assert "missing: @migration(from_version=1)" in res.out
    mig = "@migration(from_version=1)\n        def _beta(data):\n            return {**data, 'beta': 0.0}"
    write("ctxmod.py", _module(version=2, extra="beta: float", migration=mig))
    res = run_cli("schema", "check", "-s", "ctxmod", "exported")
    assert res.code == 0, res.out
    # The breaking change is handled by the bump and its migration: said so, never "BREAKING ... compatible".
    assert "MIGRATED REQUIRED_FIELD_ADDED" in res.out
    assert "BREAKING" not in res.out
    assert "v1 payloads and checkpoints are migrated to version 2 by its migrations" in res.out
    assert "a config file written for v1 may need editing" in res.out
    assert "compatible" not in res.out


def test_non_breaking_changes_pass_and_are_listed(
    run_cli: Run, exported: Path, write: Callable[[str, str], Path]
) -> None:
    """A new defaulted field and a new Literal value are listed but do not fail the check."""
    write("ctxmod.py", _module(shapes='"none", "length_penalty", "other"', extra="beta: float = 0.0"))
    res = run_cli("schema", "check", "-s", "ctxmod", "exported")
    assert res.code == 0, res.out
    assert "FIELD_ADDED" in res.out
    assert "ENUM_VALUE_ADDED" in res.out


NESTED = """
    from typing import Annotated, Literal, Union
    from pydantic import AfterValidator, BaseModel, Field
    from verl_ctx import RoleContext

    class ShapingRow(BaseModel):
        bonus: float = Field(0.0, le={bonus_le})
        {row_extra}

    class Search(BaseModel):
        kind: Literal["search"] = "search"
        index: int = Field(0, ge=0{index_le})

    class Calc(BaseModel):
        kind: Literal["calc"] = "calc"

    class RewardContext(RoleContext, role="reward"):
        table: list[ShapingRow] = []
        limit: Annotated[int | None, Field(le={limit_le})] = None
        weights: dict[str, {weight}] = {{}}
        tools: list[Annotated[Union[Search, Calc], Field(discriminator="kind")]] = []
        scale: {scale} = 1
"""


def _nested(
    bonus_le: float = 1,
    row_extra: str = "",
    index_le: str = "",
    limit_le: int = 100,
    weight: str = "float",
    scale: str = "int",
) -> str:
    return NESTED.format(
        bonus_le=bonus_le, row_extra=row_extra, index_le=index_le, limit_le=limit_le, weight=weight, scale=scale
    )


@pytest.fixture
def nested_export(run_cli: Run, write: Callable[[str, str], Path], tmp_path: Path) -> Path:
    write("nestedmod.py", _nested())
    res = run_cli("schema", "export", "-s", "nestedmod", "-o", "exported")
    assert res.code == 0, res.err
    return tmp_path / "exported"


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"bonus_le": 0.5}, "CONSTRAINT_TIGHTENED   table[].bonus: <= 1 -> <= 0.5"),
        ({"limit_le": 10}, "CONSTRAINT_TIGHTENED   limit: <= 100 -> <= 10"),
        ({"weight": "int"}, "FIELD_TYPE_CHANGED     weights{}: number -> integer"),
        ({"index_le": ", le=10"}, "CONSTRAINT_TIGHTENED   tools[search].index: no maximum -> <= 10"),
    ],
    ids=["list item's model", "Optional", "dict values", "tagged union member"],
)
def test_breaking_change_inside_a_nested_type_fails_naming_its_path(
    run_cli: Run, nested_export: Path, write: Callable[[str, str], Path], change: dict[str, object], line: str
) -> None:
    """A breaking change at any depth fails the check, and the line names where, with the old and new rule."""
    write("nestedmod.py", _nested(**change))  # type: ignore[arg-type]
    res = run_cli("schema", "check", "-s", "nestedmod", "exported")
    assert res.code == 1, res.out + res.err
    assert f"BREAKING {line}" in res.out
    assert "set version=2" in res.out


def test_defaulted_field_in_a_list_item_model_is_compatible(
    run_cli: Run, nested_export: Path, write: Callable[[str, str], Path]
) -> None:
    """A field with a default added to a model used as a list item passes, listed at its path."""
    write("nestedmod.py", _nested(row_extra="weight: float = 1.0"))
    res = run_cli("schema", "check", "-s", "nestedmod", "exported", "--format", "json")
    assert res.code == 0, res.out + res.err
    (report,) = res.json()["schemas"]
    assert report["changes"] == [
        {
            "rule": "FIELD_ADDED",
            "path": "table[].weight",
            "detail": "default 1.0",
            "breaking": False,
            "why": "a new field with a default",
        }
    ]


def test_a_validator_json_schema_cannot_show_is_named(
    run_cli: Run, nested_export: Path, write: Callable[[str, str], Path]
) -> None:
    """A new validator leaves the JSON Schema as it was; the check names it from the lock's digests, and calls it
    breaking: the same input may now validate to other values (the handshake refuses a value it changes)."""
    write("nestedmod.py", _nested(scale="Annotated[int, AfterValidator(lambda v: v * 100)]"))
    res = run_cli("schema", "check", "-s", "nestedmod", "exported")
    assert res.code == 1, res.out + res.err
    assert (
        "BREAKING CODE_CHANGED           RewardContext.scale: after-validator RewardContext.<lambda> added" in res.out
    )
    assert "set version=2" in res.out


def test_a_kind_the_wire_carries_alike_is_a_type_change(run_cli: Run, write: Callable[[str, str], Path]) -> None:
    """`list[int]` -> `tuple[int, ...]` has the same JSON Schema and the same bytes, but old values would be read as
    another kind of value: breaking, as the handshake refuses it."""
    write("nestedmod.py", _nested(scale="list[int]").replace("scale: list[int] = 1", "scale: list[int] = []"))
    assert run_cli("schema", "export", "-s", "nestedmod", "-o", "exported").code == 0
    write("nestedmod.py", _nested(scale="tuple[int, ...]").replace("= 1\n", "= ()\n", 1))
    res = run_cli("schema", "check", "-s", "nestedmod", "exported")
    assert res.code == 1, res.out + res.err
    assert "BREAKING FIELD_TYPE_CHANGED     RewardContext.scale: list[int] -> tuple[int,...]" in res.out


def test_a_serializer_is_listed_not_breaking(
    run_cli: Run, nested_export: Path, write: Callable[[str, str], Path]
) -> None:
    """A serializer never touches the payload (payloads carry field values): listed, not breaking."""
    module = _nested(scale="Annotated[int, PlainSerializer(lambda v: str(v))]")
    write("nestedmod.py", module.replace("AfterValidator, BaseModel", "AfterValidator, BaseModel, PlainSerializer"))
    res = run_cli("schema", "check", "-s", "nestedmod", "exported")
    assert res.code == 0, res.out + res.err
    assert "BEHAVIOUR_CHANGED      RewardContext.scale: serializer RewardContext.<lambda> added" in res.out


def test_check_without_lock_is_a_usage_error(run_cli: Run, write: Callable[[str, str], Path]) -> None:
    """Pointing check at a directory with no export says how to create one."""
    write("ctxmod.py", _module())
    res = run_cli("schema", "check", "-s", "ctxmod", ".")
    assert res.code == 2
    assert "verl-ctx schema export" in res.err


def _validator(export_dir: Path) -> object:
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from referencing import Registry, Resource

    resources = []
    for path in export_dir.glob("*.schema.json"):
        resources.append((f"./{path.name}", Resource.from_contents(json.loads(path.read_text()))))
    config_schema = json.loads((export_dir / "config.schema.json").read_text())
    Draft202012Validator.check_schema(config_schema)
    return Draft202012Validator(config_schema, registry=Registry().with_resources(resources))


def test_exported_schema_checks_a_config_section_as_an_editor_would() -> None:
    """The committed config schema is valid JSON Schema: it accepts the example config and rejects a bad one."""
    import yaml

    validator = _validator(REPO / "schemas" / "examples")
    good = yaml.safe_load((REPO / "examples" / "custom_recipe" / "config.yaml").read_text())
    assert list(validator.iter_errors(good)) == []  # type: ignore[attr-defined]
    bad = {"trainer": {"any": "thing"}, "extra_context": {"critic": {"value_clip": -1, "typo": 1}, "critc": {}}}
    messages = sorted(e.message for e in validator.iter_errors(bad))  # type: ignore[attr-defined]
    assert messages == [
        "-1 is less than or equal to the minimum of 0",
        "Additional properties are not allowed ('critc' was unexpected)",
        "Additional properties are not allowed ('typo' was unexpected)",
    ]


def test_committed_schemas_are_fresh(tmp_path: Path) -> None:
    """schemas/ equals a fresh export; if not, regenerate it with `make schemas`."""
    import subprocess

    from .conftest import console_script

    out = tmp_path / "fresh"
    subprocess.run(
        [console_script(), "schema", "export", "-s", "examples.custom_recipe.contexts", "-o", str(out / "examples")],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [console_script(), "schema", "envelope", "-o", str(out / "envelope.schema.json")],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    committed = REPO / "schemas"
    fresh_files = sorted(p.relative_to(out) for p in out.rglob("*.json"))
    assert fresh_files == sorted(p.relative_to(committed) for p in committed.rglob("*.json")), (
        "schemas/ has other files than a fresh export: run `make schemas`"
    )
    stale = [str(p) for p in fresh_files if (out / p).read_text() != (committed / p).read_text()]
    assert not stale, f"stale committed schemas {stale}: run `make schemas` and commit the result"


SECRETS = """
    from dataclasses import dataclass
    import pydantic
    from pydantic import BaseModel, Field, SecretBytes, SecretStr
    from typing_extensions import TypedDict
    from verl_ctx import RoleContext

    class Judge(BaseModel):
        url: str
        api_key: SecretStr

    class Creds(TypedDict):
        user: str
        token: SecretBytes

    @dataclass
    class Pin:
        label: str
        pin: pydantic.Secret[int]

    class RewardContext(RoleContext, role="reward"):
        name: str
        token: SecretStr
        maybe: SecretStr | None
        keys: list[SecretStr]
        by_host: dict[str, SecretBytes]
        judge: Judge
        panel: list[Judge] = []
        creds: Creds
        pin: Pin
"""


def test_editor_schema_leaves_every_secret_field_optional(
    run_cli: Run, write: Callable[[str, str], Path], tmp_path: Path
) -> None:
    """A config section that leaves its secrets to an override or ${oc.env:...} is valid in the editor, at any depth;
    every other required field stays required; <role>.schema.json stays the exact record `schema check` reads."""
    write("secretmod.py", SECRETS)
    res = run_cli("schema", "export", "-s", "secretmod", "-o", "exported")
    assert res.code == 0, res.err
    exported = tmp_path / "exported"
    validator = _validator(exported)
    section = {
        "name": "judged",
        "judge": {"url": "http://judge"},
        "panel": [{"url": "http://a"}],
        "creds": {"user": "me"},
        "pin": {"label": "door"},
    }
    config = {"trainer": {"any": "thing"}, "extra_context": {"reward": section}}
    assert list(validator.iter_errors(config)) == []  # type: ignore[attr-defined]
    bare: dict[str, object] = {"extra_context": {"reward": {"judge": {}, "creds": {}, "pin": {}}}}
    messages = sorted(e.message for e in validator.iter_errors(bare))  # type: ignore[attr-defined]
    assert messages == [
        "'label' is a required property",
        "'name' is a required property",
        "'url' is a required property",
        "'user' is a required property",
    ]
    role = json.loads((exported / "reward.schema.json").read_text())
    assert {"token", "maybe", "keys", "by_host"} <= set(role["required"])
    assert "api_key" in role["$defs"]["Judge"]["required"]
    res = run_cli("schema", "check", "-s", "secretmod", "exported")
    assert res.code == 0, res.out + res.err


def test_editor_schema_is_each_role_schema_but_for_secrets() -> None:
    """Apart from the secret fields' `required`, and unknown keys refused in nested models (as validate refuses them),
    the config schema holds each role's schema exactly as exported."""
    import examples.custom_recipe.contexts  # noqa: F401  (registers the example's schemas)

    from verl_ctx._files.export import config_json_schema
    from verl_ctx._model.registry import default_registry

    schemas = [s for s in default_registry.schemas() if s.__module__ == "examples.custom_recipe.contexts"]
    editor = config_json_schema(schemas)
    for schema in schemas:
        own = schema.model_json_schema()
        for name, definition in own.pop("$defs", {}).items():
            assert editor["$defs"][name] == {**definition, "additionalProperties": False}, name
        assert editor["$defs"][schema.__name__] == own
