"""Declaring role schemas: class keywords, registries, migrations, fingerprints, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, SecretBytes, SecretStr

from verl_ctx import ContextRegistry, RoleContext, migration
from verl_ctx.errors import SchemaDefinitionError
from verl_ctx.schema import schema_info


@pytest.mark.parametrize("role", ["actor", "ref", "critic", "rollout", "reward", "my_custom_worker"])
def test_each_role_registers_its_schema(registry: ContextRegistry, role: str) -> None:
    """Known verl roles and any identifier for a custom worker register under their name."""

    class Ctx(RoleContext, role=role, registry=registry):
        x: int = 1

    assert registry[role] is Ctx
    assert schema_info(Ctx).roles == (role,)


def test_schema_shared_by_roles_registers_for_each(registry: ContextRegistry) -> None:
    """role=(...) serves several roles with one schema."""

    class Shared(RoleContext, role=("actor", "ref"), registry=registry):
        x: int = 1

    assert registry["actor"] is registry["ref"] is Shared
    assert registry.schemas() == [Shared]


def test_second_schema_for_a_role_names_both_classes(registry: ContextRegistry) -> None:
    """Two schemas for one role in one registry is an error naming both."""

    class First(RoleContext, role="critic", registry=registry):
        pass

    with pytest.raises(SchemaDefinitionError, match=r"First.*Second|Second.*First"):

        class Second(RoleContext, role="critic", registry=registry):
            pass


def test_isolated_registries_do_not_collide() -> None:
    """The same role may have different schemas in different registries."""
    a, b = ContextRegistry("a"), ContextRegistry("b")

    class InA(RoleContext, role="critic", registry=a):
        pass

    class InB(RoleContext, role="critic", registry=b):
        pass

    assert a["critic"] is InA
    assert b["critic"] is InB


def test_redefining_the_same_class_replaces_it(registry: ContextRegistry) -> None:
    """A notebook re-run or module reload (same module:QualName) replaces the schema instead of failing."""

    def define() -> type[RoleContext]:
        class Again(RoleContext, role="critic", registry=registry):
            x: int = 1

        return Again

    first, second = define(), define()
    assert first is not second
    assert registry["critic"] is second


def test_abstract_base_without_role_is_not_registered(registry: ContextRegistry) -> None:
    """A subclass without role= is a base for others and cannot be encoded."""

    class Base(RoleContext, registry=registry):
        common: int = 0

    class Concrete(Base, role="actor", registry=registry):
        own: str = ""

    assert registry.roles() == ["actor"]
    assert set(Concrete.model_fields) == {"common", "own"}
    with pytest.raises(SchemaDefinitionError, match="has no role"):
        schema_info(Base)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"role": ""}, "identifiers"),
        ({"role": "has space"}, "identifiers"),
        ({"role": ()}, "non-empty tuple"),
        ({"role": ("a", "a")}, "twice"),
        ({"role": 3}, "role name"),
        ({"role": "x", "version": 0}, "int >= 1"),
        ({"role": "x", "version": "2"}, "int >= 1"),
    ],
)
def test_bad_class_keywords_are_explained(registry: ContextRegistry, kwargs: dict[str, object], match: str) -> None:
    """A wrong role= or version= fails at class definition with a message saying what is accepted."""
    with pytest.raises(SchemaDefinitionError, match=match):

        class Bad(RoleContext, registry=registry, **kwargs):
            pass


def test_migration_from_a_version_not_below_the_schema_is_rejected(registry: ContextRegistry) -> None:
    """A migration from version N upgrades to N+1, so N must be below the schema's version."""
    with pytest.raises(SchemaDefinitionError, match="migration from version 2"):

        class Ctx(RoleContext, role="critic", version=2, registry=registry):
            @migration(from_version=2)
            def _up(data: dict) -> dict:  # type: ignore[type-arg]
                return data


def test_unknown_fields_are_forbidden_and_instances_frozen(registry: ContextRegistry) -> None:
    """RoleContext forbids typos and mutation, like verl's own configs."""

    class Ctx(RoleContext, role="critic", registry=registry):
        value_clip: float = 0.2

    with pytest.raises(ValueError, match="value_clp"):
        Ctx(value_clp=0.3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="frozen"):
        Ctx().value_clip = 1.0  # type: ignore[misc]


def test_secret_fields_are_found_at_any_depth(registry: ContextRegistry) -> None:
    """Secrets in nested models are known, so errors and provenance can redact them."""

    class Inner(BaseModel):
        api_key: SecretStr
        url: str = ""

    class Ctx(RoleContext, role="reward", registry=registry):
        judge: Inner
        token: SecretStr | None = None

    assert schema_info(Ctx).secret_fields == {"api_key", "token"}


def test_exported_schemas_never_hold_a_secret_value(registry: ContextRegistry, tmp_path: Path) -> None:
    """A secret default, at any depth, appears in no exported file (JSON Schema, config schema, lock)."""
    from verl_ctx._files.export import export_schemas

    class Inner(BaseModel):
        api_key: SecretStr = SecretStr("sk-default-inner")

    class Ctx(RoleContext, role="reward", registry=registry):
        judge: Inner = Inner()
        token: SecretBytes = SecretBytes(b"sk-default-top")
        tokens: tuple[SecretStr, ...] = (SecretStr("sk-default-list"),)

    written = export_schemas(registry, tmp_path)
    text = "".join(path.read_text() for path in written)
    assert "api_key" in text
    for secret in ("sk-default-inner", "sk-default-top", "sk-default-list"):
        assert secret not in text


def test_field_type_without_json_schema_is_explained(registry: ContextRegistry) -> None:
    """An arbitrary class as a field type cannot be fingerprinted; the error says to use a supported type."""
    from pydantic import ConfigDict

    from verl_ctx import encode

    class Opaque:
        pass

    class Ctx(RoleContext, role="critic", registry=registry):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        thing: Opaque

    with pytest.raises(SchemaDefinitionError, match="no JSON Schema"):
        encode(Ctx(thing=Opaque()))
