"""``RoleContext``: the base class a user declares one schema per role with, and what we derive from it."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from ._errors import SchemaDefinitionError

if TYPE_CHECKING:
    from ._registry import ContextRegistry

__all__ = ["KNOWN_ROLES", "Migration", "RoleContext", "SchemaInfo", "cached_info", "migration", "schema_info"]

#: The roles verl itself starts workers for. Any other identifier is accepted for custom workers.
KNOWN_ROLES: tuple[str, ...] = ("actor", "ref", "critic", "rollout", "reward")

_ROLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MIGRATION_MARK = "__verl_ctx_migrates_from__"

Migration = Callable[[dict[str, Any]], dict[str, Any]]
_F = TypeVar("_F", bound=Callable[..., Any])


def migration(from_version: int) -> Callable[[_F], Any]:
    """Mark a function in a ``RoleContext`` body as the upgrade from ``from_version`` to ``from_version + 1``.

    The function takes the decoded payload of the old version (a plain ``dict``) and returns the dict of
    the next version. Migrations run in order, so a v1 payload read by a v3 schema goes through the
    ``from_version=1`` and ``from_version=2`` steps, then through validation::

        class CriticContext(RoleContext, role="critic", version=2):
            value_clip: float = 0.2

            @migration(from_version=1)
            def _clip_renamed(data):
                data["value_clip"] = data.pop("clip")
                return data
    """
    if not isinstance(from_version, int) or isinstance(from_version, bool) or from_version < 1:
        raise SchemaDefinitionError(f"migration(from_version=...) takes an int >= 1; got {from_version!r}")

    def mark(fn: _F) -> Any:
        func = fn.__func__ if isinstance(fn, staticmethod) else fn
        setattr(func, _MIGRATION_MARK, from_version)
        # A staticmethod is a "known" class attribute to pydantic, so it is not mistaken for a field.
        return staticmethod(func)

    return mark


@dataclass(frozen=True)
class SchemaInfo:
    """What the envelope carries about a schema, computed once per class."""

    schema_id: str
    roles: tuple[str, ...]
    version: int
    fingerprint: str
    #: field name -> short digest of that field's schema (nested models inlined), to name what differs.
    field_digests: dict[str, str]
    #: names of fields, at any depth, typed SecretStr / SecretBytes: redacted in errors and provenance.
    secret_fields: frozenset[str]


class RoleContext(BaseModel):
    """Base class of a role's typed context: frozen, unknown fields forbidden.

    Declare one subclass per role with the ``role=`` and ``version=`` class keywords::

        class CriticContext(RoleContext, role="critic", version=1):
            value_clip: float = 0.2

    ``role`` may be a tuple to share one schema between several roles. A subclass without ``role`` is an
    abstract base and is not registered. ``registry=`` registers into an isolated ``ContextRegistry``
    instead of the default one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    __verl_ctx_roles__: ClassVar[tuple[str, ...]] = ()
    __verl_ctx_version__: ClassVar[int] = 1
    __verl_ctx_migrations__: ClassVar[Mapping[int, Migration]] = {}

    @classmethod
    def __pydantic_init_subclass__(
        cls,
        *,
        role: str | tuple[str, ...] | None = None,
        version: int = 1,
        registry: ContextRegistry | None = None,
        **kwargs: Any,
    ) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise SchemaDefinitionError(f"{_qualified(cls)}: version= takes an int >= 1; got {version!r}")
        cls.__verl_ctx_version__ = version
        cls.__verl_ctx_migrations__ = _collect_migrations(cls, version)
        if role is None:
            cls.__verl_ctx_roles__ = ()
            return
        cls.__verl_ctx_roles__ = _check_roles(cls, role)
        if registry is None:
            from ._registry import default_registry

            registry = default_registry
        registry.register(cls)

    @classmethod
    def __init_subclass__(cls, **kwargs: Any) -> None:
        # pydantic hands class keywords to both hooks; ours are consumed in __pydantic_init_subclass__.
        for key in ("role", "version", "registry"):
            kwargs.pop(key, None)
        super().__init_subclass__(**kwargs)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _check_roles(cls: type, role: object) -> tuple[str, ...]:
    roles = (role,) if isinstance(role, str) else role
    if not isinstance(roles, tuple) or not roles or not all(isinstance(r, str) for r in roles):
        raise SchemaDefinitionError(
            f"{_qualified(cls)}: role= takes a role name or a non-empty tuple of names; got {role!r}"
        )
    bad = [r for r in roles if not _ROLE_RE.match(r)]
    if bad:
        raise SchemaDefinitionError(
            f"{_qualified(cls)}: role names must be identifiers (known verl roles: {', '.join(KNOWN_ROLES)}); "
            f"got {', '.join(map(repr, bad))}"
        )
    if len(set(roles)) != len(roles):
        raise SchemaDefinitionError(f"{_qualified(cls)}: role= names a role twice: {role!r}")
    return tuple(roles)


def _collect_migrations(cls: type, version: int) -> dict[int, Migration]:
    found: dict[int, Migration] = {}
    for klass in reversed(cls.__mro__):
        for value in vars(klass).values():
            func = value.__func__ if isinstance(value, staticmethod) else value
            step = getattr(func, _MIGRATION_MARK, None)
            if step is not None:
                found[step] = func
    late = sorted(step for step in found if step >= version)
    if late:
        raise SchemaDefinitionError(
            f"{_qualified(cls)} is version {version} but has a migration from version {late[0]}; "
            f"a migration from version N upgrades to N+1, so N must be below {version}. "
            "Bump version= or remove the migration."
        )
    return found


# --- derived facts, computed once per class ----------------------------------------------------------

# class -> its SchemaInfo. A module dict, not a class attribute: reading a class's __dict__ builds a
# mappingproxy each time, and this lookup runs on every encode and decode.
_infos: dict[type, SchemaInfo] = {}
_info_lock = threading.Lock()
# Keys that document a schema without changing what validates: a docstring edit is not a schema change.
_DOC_KEYS = frozenset({"title", "description", "examples"})
# Keys whose value maps *names* to sub-schemas: the names are data, never doc keys to strip.
_NAME_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})


def cached_info(cls: type) -> SchemaInfo | None:
    """The ``SchemaInfo`` computed for ``cls`` already, if any: one dict lookup, for the hot paths."""
    return _infos.get(cls)


def schema_info(schema: type[RoleContext]) -> SchemaInfo:
    """The ``SchemaInfo`` of a concrete ``RoleContext`` subclass (cached on the class)."""
    info = cached_info(schema)
    if info is not None:
        return info
    if not (isinstance(schema, type) and issubclass(schema, RoleContext)):
        raise SchemaDefinitionError(f"expected a RoleContext subclass; got {schema!r}")
    if not schema.__verl_ctx_roles__:
        raise SchemaDefinitionError(
            f'{_qualified(schema)} has no role; declare it as `class {schema.__name__}(RoleContext, role="...")`'
        )
    with _info_lock:
        info = _infos.get(schema)
        if info is None:
            info = _infos[schema] = _compute_info(schema)
    return info


def _compute_info(schema: type[RoleContext]) -> SchemaInfo:
    try:
        raw = schema.model_json_schema()
    except Exception as e:  # pydantic raises several types for types without a JSON Schema
        raise SchemaDefinitionError(
            f"{_qualified(schema)} has a field type with no JSON Schema ({e}); "
            "verl-ctx fingerprints and validates schemas through JSON Schema, so use a supported type"
        ) from e
    canon = strip_docs(raw)
    defs = canon.get("$defs", {})
    required = set(canon.get("required", ()))
    digests = {
        name: _digest({"required": name in required, "schema": inline_refs(prop, defs, ())})[:12]
        for name, prop in canon.get("properties", {}).items()
    }
    return SchemaInfo(
        schema_id=_qualified(schema),
        roles=schema.__verl_ctx_roles__,
        version=schema.__verl_ctx_version__,
        fingerprint=_digest(canon),
        field_digests=digests,
        secret_fields=frozenset(_secret_names(raw)),
    )


def _digest(obj: object) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def strip_docs(node: Any, names: bool = False) -> Any:
    """A JSON Schema without its documentation keys; shared by the fingerprint and `schema check`."""
    if isinstance(node, dict):
        if names:
            return {k: strip_docs(v) for k, v in node.items()}
        return {
            k: strip_docs(v, names=k in _NAME_MAPS)
            for k, v in node.items()
            if not (k in _DOC_KEYS and not isinstance(v, dict))
        }
    if isinstance(node, list):
        return [strip_docs(v) for v in node]
    return node


def inline_refs(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    """A JSON Schema with its ``$defs`` references inlined (a recursive model stands for itself)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen:  # recursive model: the name stands for itself
                return {"$recursive": name}
            return inline_refs(defs.get(name, {}), defs, (*seen, name))
        return {k: inline_refs(v, defs, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [inline_refs(v, defs, seen) for v in node]
    return node


def _secret_names(node: Any) -> set[str]:
    """Property names whose schema is pydantic's secret marker (``format: password`` and ``writeOnly``)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if _is_secret(prop):
                found.add(name)
        for value in node.values():
            found |= _secret_names(value)
    elif isinstance(node, list):
        for value in node:
            found |= _secret_names(value)
    return found


def _is_secret(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return False
    if prop.get("writeOnly") and prop.get("format") == "password":
        return True
    return any(_is_secret(p) for key in ("anyOf", "oneOf", "allOf") for p in prop.get(key, ()))
