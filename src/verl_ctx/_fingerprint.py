"""What verl-ctx derives from a schema, once per class: its fingerprint, per-field digests, secret fields.

The fingerprint is a sha256 of the schema's canonical JSON Schema (documentation keys stripped, so a
docstring edit is not a schema change). ``strip_docs`` and ``inline_refs`` are shared with ``schema check``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._registry import qualified_name
from ._schema import RoleContext
from .errors import SchemaDefinitionError

__all__ = ["SchemaInfo", "cached_info", "inline_refs", "schema_info", "strip_docs"]


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


# --- derived facts, computed once per class ----------------------------------------------------------

# class -> its SchemaInfo. A module dict, not a class attribute: reading a class's __dict__ builds a
# mappingproxy each time, and this lookup runs on every encode and decode. Unbounded on purpose: it holds
# one entry per RoleContext class that was encoded or decoded, a number fixed by the program's source
# (a class re-defined in a notebook adds one entry per re-run, as Python's own caches do).
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
    """The ``SchemaInfo`` of a concrete ``RoleContext`` subclass, computed once."""
    info = cached_info(schema)
    if info is not None:
        return info
    if not (isinstance(schema, type) and issubclass(schema, RoleContext)):
        raise SchemaDefinitionError(f"expected a RoleContext subclass; got {schema!r}")
    if not schema.__verl_ctx_roles__:
        raise SchemaDefinitionError(
            f'{qualified_name(schema)} has no role; declare it as `class {schema.__name__}(RoleContext, role="...")`'
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
            f"{qualified_name(schema)} has a field type with no JSON Schema ({e}); "
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
        schema_id=qualified_name(schema),
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
