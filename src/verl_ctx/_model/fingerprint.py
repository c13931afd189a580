"""What verl-ctx derives from a schema, once per class: its fingerprint and per-field digests.

The fingerprint covers everything that decides what a payload decodes to:

* the canonical JSON Schema (documentation keys stripped, so a docstring edit is not a schema change);
* the canonical pydantic core schema, which the JSON Schema does not show: validators and serializers
  (``field_validator``, ``model_validator``, ``Annotated`` Before/After/Plain/Wrap, default factories) by
  qualified name and a digest of their code, model config that changes validation (``str_to_lower``,
  ``strict``, ``extra``, ...), and types JSON Schema conflates (``list`` / ``tuple``, ``int`` / ``bool`` keys).

Code is digested (``code_digest``) from its bytecode, constants, names, defaults, closure cells, and the plain
constants and helper functions it reads from its module, recursively: never from ``id()``, addresses or ``hash()``,
so two processes (or two runs) with the same code agree. The root class's own name is left out, so the same schema
under another ``module:QualName`` keeps its fingerprint (``decode`` compares schema ids separately).

``SchemaInfo.field_digests`` maps each field name to a digest, and each validator, serializer and model
config to an ``@``-key (``@after-validator Ctx._scale on Ctx.x``, ``@config Inner``), so a worker names
exactly which of them differ from the driver's. ``strip_docs`` and ``inline_refs`` are shared with
``schema check``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .._analysis import walk as schema_walk
from .._analysis.kinds import kind_entries
from .._secrets.plan import secret_plan
from ..errors import EnvelopeError, SchemaDefinitionError
from .code_digest import LIBRARY_MODULES, callable_name, class_state, code_digest, json_digest, plain, unwrap
from .registry import qualified_name
from .role_context import RoleContext

__all__ = ["roles_for", "CONFIG_KEY", "SchemaInfo", "cached_info", "inline_refs", "schema_info", "strip_docs"]


@dataclass(frozen=True)
class SchemaInfo:
    """What the envelope carries about a schema, computed once per class."""

    schema_id: str
    roles: tuple[str, ...]
    version: int
    fingerprint: str
    #: field name -> short digest of everything about that field (its JSON Schema and core schema, nested
    #: models, validators and config included); ``@``-keys -> one validator, serializer or model config each
    #: (a digest of its code; the config's settings as text), to name what differs.
    field_digests: dict[str, str]
    #: names of the fields, at any depth, whose value can be or hold a secret (where ``secret_plan`` finds one).
    secret_fields: frozenset[str]
    #: id() of each user function in the class's core schema -> its ``@``-entry in ``field_digests``: which
    #: validators a skewed worker shares with the driver (this process's objects only; never sent or digested).
    function_entries: Mapping[int, str] = field(default_factory=dict, compare=False, repr=False)


#: Prefix of a model-config entry in ``SchemaInfo.field_digests``.
CONFIG_KEY = "@config "
#: Prefix of a validation-setting entry (``@setting Model.field``: JSON of ``SETTINGS`` a type there sets), for what
#: JSON Schema does not show: ``schema check`` judges whether each change accepts less, reads otherwise, or more.
SETTING_KEY = "@setting "
#: An entry every schema's digests hold since setting entries were: a lock without it predates them, so a setting
#: entry it lacks tells nothing.
SETTINGS_RECORDED = "@setting *"
# Settings at their pydantic defaults, as pydantic writes them into some types' schemas (a str's lax branch):
# recorded as absent, so only what a schema itself sets is compared.
_SETTING_DEFAULTS = {"strict": False, "microseconds_precision": "truncate", "coerce_numbers_to_str": False}
#: The core-schema keys that change which inputs validate, or to what, and that JSON Schema leaves out. ``mode`` is
#: a union's (``union_mode``).
SETTINGS = frozenset(
    {
        "strict",
        "allow_inf_nan",
        "max_digits",
        "decimal_places",
        "tz_constraint",
        "now_op",
        "now_utc_offset",
        "microseconds_precision",
        "strip_whitespace",
        "to_lower",
        "to_upper",
        "coerce_numbers_to_str",
        "regex_engine",
        "mode",
    }
)

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
    except KeyError as e:  # pydantic's own reference bookkeeping: a "$ref" key where it looks for references
        raise SchemaDefinitionError(
            f"{qualified_name(schema)}: pydantic cannot build its JSON Schema (a KeyError inside pydantic), which a "
            'default or json_schema_extra holding a dict with a "$ref" key causes; verl-ctx fingerprints schemas '
            "through JSON Schema, so rename that key or give the field a default_factory"
        ) from e
    except Exception as e:  # pydantic raises several types for types without a JSON Schema
        raise SchemaDefinitionError(
            f"{qualified_name(schema)} has a field type with no JSON Schema ({e}); "
            "verl-ctx fingerprints and validates schemas through JSON Schema, so use a supported type"
        ) from e
    canon = strip_docs(raw)
    defs = canon.get("$defs", {})
    required = set(canon.get("required", ()))
    props = canon.get("properties", {})
    core = _CoreCanon(schema)
    root = core.root()
    digests: dict[str, str] = {}
    for name, spec in schema.model_fields.items():
        prop_name = spec.validation_alias if isinstance(spec.validation_alias, str) else spec.alias or name
        prop = props.get(prop_name, props.get(name))
        digests[name] = json_digest(
            {
                "required": prop_name in required or name in required,
                "schema": inline_refs(prop, defs, ()),
                "core": core.fields.get(name),
            }
        )[:12]
    digests.update(core.entries)
    digests.update(kind_entries(schema.__pydantic_core_schema__))
    return SchemaInfo(
        schema_id=qualified_name(schema),
        roles=schema.__verl_ctx_roles__,
        version=schema.__verl_ctx_version__,
        fingerprint=json_digest({"json": canon, "core": root}),
        field_digests=digests,
        secret_fields=secret_plan(schema).field_names(),
        function_entries=core.function_entries,
    )


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
    """A JSON Schema with its ``$defs`` references inlined (a recursive model stands for itself).

    Keys next to a ``$ref`` (a model-typed field's ``default``) are kept.
    """
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            siblings = {k: inline_refs(v, defs, seen) for k, v in node.items() if k != "$ref"}
            if name in seen:  # recursive model: the name stands for itself
                return {"$recursive": name, **siblings}
            return {**inline_refs(defs.get(name, {}), defs, (*seen, name)), **siblings}
        return {k: inline_refs(v, defs, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [inline_refs(v, defs, seen) for v in node]
    return node


# --- the core schema, canonical: what validation runs, by name and code -------------------------------

# Core-schema keys that only feed JSON Schema generation (docs, examples): not behaviour.
_CORE_SKIPPED = frozenset({"metadata", "ref", "model_name"})
_FUNCTION_KINDS = {
    "function-before": "before-validator",
    "function-after": "after-validator",
    "function-wrap": "wrap-validator",
    "function-plain": "plain-validator",
}


class _CoreCanon(schema_walk.Fold[Any]):
    """One schema's core schema as JSON-native data, with each function as a digest of its code.

    A fold of the one schema walk (``_analysis.walk.Fold``), in the context ``(where, root)``: ``where`` names the
    model or field for the entries, ``root`` is true down the root model's own path (its class is ``<root>``, its
    config compared with the baseline, its fields kept for the per-field digests), where nodes are folded in place.
    Definitions are canonicalised once each and then stand in by digest, so a model used in many places costs one
    fold. Validators, serializers and config are also collected as named entries.
    """

    def __init__(self, schema: type[BaseModel]) -> None:
        super().__init__(schema.__pydantic_core_schema__)
        self.schema = schema
        self.entries: dict[str, str] = {}
        self.settings: dict[str, dict[str, Any]] = {}  # where -> the SETTINGS the types there set
        self.quiet = 0  # inside a branch only strict mode or JSON input takes: its settings are pydantic's
        self.function_entries: dict[int, str] = {}
        self.fields: dict[str, Any] = {}
        # The baseline config every RoleContext has (extra="forbid"): only a schema's own settings are named.
        self.base_config = _plain_config(RoleContext.__pydantic_core_schema__.get("config") or {})

    def root(self) -> Any:
        out = self.fold(self.schema.__pydantic_core_schema__, self.schema.__qualname__, True)
        import json  # here: `import verl_ctx` loads nothing a pydantic model does not

        self.entries[SETTINGS_RECORDED] = "1"
        for where, settings in self.settings.items():
            self.entries[f"{SETTING_KEY}{where}"] = json.dumps(settings, sort_keys=True)
        return out

    # -- how the fold reaches definitions and plain values

    def leaf(self, value: Any, where: str, root: bool = False) -> Any:
        if isinstance(value, list):
            return [self.fold(v, where) for v in value]
        return plain(value)

    def shared(self, where: str, root: bool = False) -> bool:
        return not root

    def inside(self, where: str, root: bool = False) -> tuple[Any, ...]:
        return (where, False)

    def reference(self, ref: str, folded: Any) -> Any:
        return {"def": json_digest(folded)}

    def recursion(self, ref: str, depth: int) -> Any:
        cls = self.defs[ref].get("cls")
        return {"recursive": cls.__qualname__ if isinstance(cls, type) else f"#{depth}"}

    # -- one node

    def visit(self, node: Mapping[str, Any], where: str, root: bool = False) -> Any:
        kind = node.get("type")
        kind = kind if isinstance(kind, str) else None  # a default value's dict may hold any "type" key
        cls = node.get("cls")
        if kind in ("model", "dataclass") and isinstance(cls, type):
            where = cls.__qualname__
        elif kind in _FUNCTION_KINDS:
            where = _wrapped_model(node) or where
        out: dict[str, Any] = {}
        settings = {
            k: plain(v)
            for k, v in node.items()
            if k in SETTINGS and (k != "mode" or kind == "union") and _SETTING_DEFAULTS.get(k, object()) != v
        }
        # A model's settings are its config (its own entries); a branch only strict mode or JSON takes is pydantic's.
        if settings and not self.quiet and kind not in ("model", "model-fields", "dataclass", "dataclass-args"):
            self.settings.setdefault(where, {}).update(settings)
        if kind in ("model", "dataclass") and isinstance(cls, type):
            state = self.class_code(cls)
            if state is not None:  # absent, not null: a class without methods or attributes keeps its fingerprint
                out["class_code"] = state
        for key, value in node.items():
            if key in _CORE_SKIPPED:
                continue
            if key in schema_walk.DATA_KEYS:  # the user's value, not schema: a default {"config": 0} is never a config
                out[key] = plain(value)
            elif key == "cls":
                out[key] = "<root>" if root else _class_name(value)
            elif key == "config":
                out[key] = self.config(value, where, root)
            elif key == "fields" and isinstance(value, dict):
                out[key] = {name: self.fold(field, f"{where}.{name}") for name, field in value.items()}
                if root and kind == "model-fields":
                    self.fields = out[key]
            elif key == "function" and isinstance(value, dict):
                out[key] = self.function(value, _FUNCTION_KINDS.get(str(kind), str(kind)), where)
            elif key == "serialization" and isinstance(value, dict):
                out[key] = self.serialization(value, where)
            elif key == "default_factory":
                out[key] = self.code(value, "default-factory", where)
            elif key == "post_init" and isinstance(value, str) and isinstance(cls, type):
                out[key] = self.code(getattr(cls, value, None), "post-init", where)
            elif key == "custom_init" and value and isinstance(cls, type):
                init = next((c.__dict__["__init__"] for c in cls.__mro__ if "__init__" in c.__dict__), None)
                out[key] = self.code(init, "custom-init", where)
            elif key == "computed_fields" and isinstance(value, list):
                out[key] = [self.computed(field, node) for field in value]
            elif key in ("choices", "items_schema") and isinstance(value, list):
                out[key] = [self.fold(v, where) for v in value]
            elif key == "choices" and isinstance(value, dict):  # tagged union: tag -> schema
                out[key] = {str(tag): self.fold(v, f"{where}[{tag}]") for tag, v in value.items()}
            elif key == "schema" and root and kind in ("definitions", "model", *_FUNCTION_KINDS):
                out[key] = self.fold(value, where, True)  # down to the root model's own fields
            elif (kind, key) in (("lax-or-strict", "strict_schema"), ("json-or-python", "json_schema")):
                self.quiet += 1
                try:
                    out[key] = self.fold(value, where)
                finally:
                    self.quiet -= 1
            else:
                out[key] = self.fold(value, _step(where, key))
        return out

    def config(self, config: Mapping[str, Any], where: str, root: bool) -> Any:
        plain = _plain_config(config)
        own = {k: v for k, v in plain.items() if not (root and self.base_config.get(k) == v)}
        if own:
            self.entries[f"{CONFIG_KEY}{where}"] = ", ".join(f"{k}={v}" for k, v in sorted(own.items()))
        return plain

    def function(self, spec: Mapping[str, Any], kind: str, where: str) -> Any:
        return {k: (self.code(v, kind, where) if k == "function" else plain(v)) for k, v in spec.items()}

    def serialization(self, spec: Mapping[str, Any], where: str) -> Any:
        kind = "wrap-serializer" if spec.get("type") == "function-wrap" else "serializer"
        out = {}
        for key, value in spec.items():
            if key == "function":
                out[key] = self.code(value, kind, where)
            else:
                out[key] = self.fold(value, where)
        return out

    def computed(self, field: Mapping[str, Any], model: Mapping[str, Any]) -> Any:
        owner = model.get("cls") or self.schema
        name = field.get("property_name", "")
        prop = getattr(owner, name, None) if isinstance(owner, type) else None
        fget = getattr(prop, "fget", None) if prop is not None else None
        out = {k: self.fold(v, name) for k, v in field.items() if k not in _CORE_SKIPPED}
        out["function"] = self.code(fget, "computed-field", f"{getattr(owner, '__qualname__', '')}.{name}")
        return out

    def class_code(self, cls: type) -> str | None:
        """The digest of what ``cls`` and its user-written bases hold besides fields (methods, static and class
        methods, properties, class attributes and ``ClassVar``s), named ``@class <QualName>``; None if nothing.

        A validator reads ``cls.SCALE`` or calls ``self.helper()``: the value it produces changes when they do.
        """
        state = class_state(cls, set())
        if not state:
            return None
        digest = json_digest(state)
        self.entries[f"@class {cls.__qualname__}"] = digest[:12]
        return digest

    def code(self, fn: Any, kind: str, where: str) -> str:
        """The digest of ``fn``; recorded as an entry ``@<kind> <qualname> on <where>`` to name it."""
        if fn is None:
            return "none"
        digest = code_digest(fn)
        module = str(getattr(unwrap(fn), "__module__", None) or "")
        if module.split(".")[0] in LIBRARY_MODULES:
            return digest  # pydantic's own (SecretStr, Path, ...): in the digest, but not the user's code to name
        key = f"@{kind} {callable_name(fn)} on {where}"
        n = 2
        base = key
        while key in self.entries and self.entries[key] != digest[:12]:
            key, n = f"{base} #{n}", n + 1
        self.entries[key] = digest[:12]
        self.function_entries[id(unwrap(fn))] = key
        return digest


def _step(where: str, key: str) -> str:
    """The location a core-schema key leads to, in `schema check` path style."""
    if key == "items_schema":
        return f"{where}[]"
    if key == "values_schema":
        return f"{where}{{}}"
    if key == "keys_schema":
        return f"{where}{{key}}"
    return where


def _wrapped_model(node: Mapping[str, Any]) -> str | None:
    """The model a chain of function validators wraps (a ``model_validator``), if any."""
    inner: Any = node
    while isinstance(inner, dict) and inner.get("type") in _FUNCTION_KINDS:
        inner = inner.get("schema")
    if isinstance(inner, dict) and inner.get("type") in ("model", "dataclass") and isinstance(inner.get("cls"), type):
        return str(inner["cls"].__qualname__)
    return None


def _plain_config(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: plain(v) for k, v in config.items() if k != "title"}


def _class_name(cls: Any) -> Any:
    return {"class": cls.__qualname__} if isinstance(cls, type) else plain(cls)


def roles_for(info: SchemaInfo, role: str | None) -> tuple[str, ...]:
    """The roles to read for ``info``'s schema: all it serves, or ``role`` if given (which it must serve)."""
    if role is None:
        return info.roles
    if role not in info.roles:
        raise EnvelopeError(f"{info.schema_id} serves roles {', '.join(info.roles)}, not '{role}'")
    return (role,)
