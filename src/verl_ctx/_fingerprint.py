"""What verl-ctx derives from a schema, once per class: its fingerprint and per-field digests.

The fingerprint covers everything that decides what a payload decodes to:

* the canonical JSON Schema (documentation keys stripped, so a docstring edit is not a schema change);
* the canonical pydantic core schema, which the JSON Schema does not show: validators and serializers
  (``field_validator``, ``model_validator``, ``Annotated`` Before/After/Plain/Wrap, default factories) by
  qualified name and a digest of their code, model config that changes validation (``str_to_lower``,
  ``strict``, ``extra``, ...), and types JSON Schema conflates (``list`` / ``tuple``, ``int`` / ``bool`` keys).

Code is digested from its bytecode, constants, names, defaults, closure cells, and the plain constants and
helper functions it reads from its module, recursively: never from ``id()``, addresses or ``hash()``, so two
processes (or two runs) with the same code agree. The root class's own name is left out, so the same schema
under another ``module:QualName`` keeps its fingerprint (``decode`` compares schema ids separately).

``SchemaInfo.field_digests`` maps each field name to a digest, and each validator, serializer and model
config to an ``@``-key (``@after-validator Ctx._scale on Ctx.x``, ``@config Inner``), so a worker names
exactly which of them differ from the driver's. ``strip_docs`` and ``inline_refs`` are shared with
``schema check``.
"""

from __future__ import annotations

import ast
import datetime as dt
import enum
import functools
import hashlib
import inspect
import math
import re
import textwrap
import threading
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from . import _schema_walk as schema_walk
from ._kinds import kind_entries
from ._registry import qualified_name
from ._schema import _MIGRATION_MARK, RoleContext
from ._secret_schema import secret_plan
from .errors import EnvelopeError, SchemaDefinitionError

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
        digests[name] = _digest(
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
        fingerprint=_digest({"json": canon, "core": root}),
        field_digests=digests,
        secret_fields=secret_plan(schema).field_names(),
        function_entries=core.function_entries,
    )


def _digest(obj: object) -> str:
    import json  # on first use: `import verl_ctx` stays as light as importing pydantic and msgspec (#15)

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
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")
# Callables from these modules are covered by the digest but not named: the user did not write them.
_LIBRARY_MODULES = frozenset({"pydantic", "pydantic_core", "builtins", "typing", "annotated_types"})
_PRIMITIVES = (str, int, float, bool, bytes, type(None), enum.Enum)


class _CoreCanon:
    """One schema's core schema as JSON-native data, with each function as a digest of its code.

    Definitions are canonicalised once each and then stand in by digest, so a model used in many places
    costs one walk. Validators, serializers and config are also collected as named entries.
    """

    def __init__(self, schema: type[BaseModel]) -> None:
        self.schema = schema
        self.defs = schema_walk.definitions(schema.__pydantic_core_schema__)
        self.def_digests: dict[str, str] = {}
        self.in_progress: dict[str, str] = {}  # ref -> placeholder while a recursive definition is walked
        self.entries: dict[str, str] = {}
        self.settings: dict[str, dict[str, Any]] = {}  # where -> the SETTINGS the types there set
        self.quiet = 0  # inside a branch only strict mode or JSON input takes: its settings are pydantic's
        self.function_entries: dict[int, str] = {}
        self.fields: dict[str, Any] = {}
        # The baseline config every RoleContext has (extra="forbid"): only a schema's own settings are named.
        self.base_config = _plain_config(RoleContext.__pydantic_core_schema__.get("config") or {})

    def root(self) -> Any:
        out = self.walk(self.schema.__pydantic_core_schema__, self.schema.__qualname__, root=True)
        import json  # here: `import verl_ctx` loads nothing a pydantic model does not

        self.entries[SETTINGS_RECORDED] = "1"
        for where, settings in self.settings.items():
            self.entries[f"{SETTING_KEY}{where}"] = json.dumps(settings, sort_keys=True)
        return out

    def walk(self, node: Any, where: str, root: bool = False) -> Any:
        if isinstance(node, dict):
            kind = node.get("type")
            if kind == "definitions":
                return self.walk(node["schema"], where, root)
            if kind == "definition-ref":
                return self.ref(node["schema_ref"], where)
            if isinstance(node.get("ref"), str) and not root and node["ref"] in self.defs:
                return self.ref(node["ref"], where)
            return self.node(node, where, root)
        if isinstance(node, list):
            return [self.walk(v, where) for v in node]
        return _plain(node)

    def ref(self, ref: str, where: str) -> Any:
        done = self.def_digests.get(ref)
        if done is not None:
            return {"def": done}
        if ref in self.in_progress:
            return {"recursive": self.in_progress[ref]}
        target = self.defs[ref]
        cls = target.get("cls")
        self.in_progress[ref] = cls.__qualname__ if isinstance(cls, type) else f"#{len(self.in_progress)}"
        try:
            digest = _digest(self.node(target, where, root=False))
        finally:
            del self.in_progress[ref]
        self.def_digests[ref] = digest
        return {"def": digest}

    def node(self, node: Mapping[str, Any], where: str, root: bool) -> Any:
        kind = node.get("type")
        kind = kind if isinstance(kind, str) else None  # a default value's dict may hold any "type" key
        cls = node.get("cls")
        if kind in ("model", "dataclass") and isinstance(cls, type):
            where = cls.__qualname__
        elif kind in _FUNCTION_KINDS:
            where = _wrapped_model(node) or where
        out: dict[str, Any] = {}
        settings = {
            k: _plain(v)
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
                out[key] = _plain(value)
            elif key == "cls":
                out[key] = "<root>" if root else _class_name(value)
            elif key == "config":
                out[key] = self.config(value, where, root)
            elif key == "fields" and isinstance(value, dict):
                out[key] = {name: self.walk(field, f"{where}.{name}") for name, field in value.items()}
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
                out[key] = [self.walk(v, where) for v in value]
            elif key == "choices" and isinstance(value, dict):  # tagged union: tag -> schema
                out[key] = {str(tag): self.walk(v, f"{where}[{tag}]") for tag, v in value.items()}
            elif key == "schema" and root and kind in ("definitions", "model", *_FUNCTION_KINDS):
                out[key] = self.walk(value, where, root=True)  # down to the root model's own fields
            elif (kind, key) in (("lax-or-strict", "strict_schema"), ("json-or-python", "json_schema")):
                self.quiet += 1
                try:
                    out[key] = self.walk(value, where)
                finally:
                    self.quiet -= 1
            else:
                out[key] = self.walk(value, _step(where, key))
        return out

    def config(self, config: Mapping[str, Any], where: str, root: bool) -> Any:
        plain = _plain_config(config)
        own = {k: v for k, v in plain.items() if not (root and self.base_config.get(k) == v)}
        if own:
            self.entries[f"{CONFIG_KEY}{where}"] = ", ".join(f"{k}={v}" for k, v in sorted(own.items()))
        return plain

    def function(self, spec: Mapping[str, Any], kind: str, where: str) -> Any:
        return {k: (self.code(v, kind, where) if k == "function" else _plain(v)) for k, v in spec.items()}

    def serialization(self, spec: Mapping[str, Any], where: str) -> Any:
        kind = "wrap-serializer" if spec.get("type") == "function-wrap" else "serializer"
        out = {}
        for key, value in spec.items():
            if key == "function":
                out[key] = self.code(value, kind, where)
            else:
                out[key] = self.walk(value, where)
        return out

    def computed(self, field: Mapping[str, Any], model: Mapping[str, Any]) -> Any:
        owner = model.get("cls") or self.schema
        name = field.get("property_name", "")
        prop = getattr(owner, name, None) if isinstance(owner, type) else None
        fget = getattr(prop, "fget", None) if prop is not None else None
        out = {k: self.walk(v, name) for k, v in field.items() if k not in _CORE_SKIPPED}
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
        digest = _digest(state)
        self.entries[f"@class {cls.__qualname__}"] = digest[:12]
        return digest

    def code(self, fn: Any, kind: str, where: str) -> str:
        """The digest of ``fn``; recorded as an entry ``@<kind> <qualname> on <where>`` to name it."""
        if fn is None:
            return "none"
        digest = code_digest(fn)
        module = str(getattr(_unwrap(fn), "__module__", None) or "")
        if module.split(".")[0] in _LIBRARY_MODULES:
            return digest  # pydantic's own (SecretStr, Path, ...): in the digest, but not the user's code to name
        key = f"@{kind} {_callable_name(fn)} on {where}"
        n = 2
        base = key
        while key in self.entries and self.entries[key] != digest[:12]:
            key, n = f"{base} #{n}", n + 1
        self.entries[key] = digest[:12]
        self.function_entries[id(_unwrap(fn))] = key
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
    return {k: _plain(v) for k, v in config.items() if k != "title"}


def _class_name(cls: Any) -> Any:
    return {"class": cls.__qualname__} if isinstance(cls, type) else _plain(cls)


def _plain(value: Any) -> Any:
    """``value`` as JSON-native data that is the same in every process (no addresses, no hash order)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, enum.Enum):
        return {"enum": f"{type(value).__qualname__}.{value.name}", "value": _plain(value.value)}
    if isinstance(value, BaseModel):
        fields = type(value).model_fields  # not a cached_property's value, which only a read puts in __dict__
        return {
            "model": type(value).__qualname__,
            "values": _plain({k: v for k, v in value.__dict__.items() if k in fields}),
        }
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _plain(v) for k, v in value.items()}
        return {"items": [[_plain(k), _plain(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        import json

        return {"set": sorted(json.dumps(_plain(v), sort_keys=True) for v in value)}
    if isinstance(value, type):
        return {"class": value.__qualname__}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, (dt.date, dt.time, dt.timedelta)):
        return {type(value).__name__: str(value)}
    if callable(value):
        return {"code": code_digest(value)}
    return {"repr": _ADDRESS.sub("", repr(value))}


# --- code digests ----------------------------------------------------------------------------------------


def code_digest(fn: Any) -> str:
    """A digest of what ``fn`` does: the same in every process that runs the same code."""
    return _digest(_code_of(fn, set()))


def _callable_name(fn: Any) -> str:
    target = _unwrap(fn)
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return str(name)


def _unwrap(fn: Any) -> Any:
    while True:
        if isinstance(fn, (staticmethod, classmethod, types.MethodType)):
            fn = fn.__func__
        elif isinstance(fn, property) and fn.fget is not None:
            fn = fn.fget
        else:
            return fn


def _code_of(fn: Any, seen: set[int]) -> Any:
    fn = _unwrap(fn)
    if isinstance(fn, functools.partial):
        return {
            "partial": _code_of(fn.func, seen),
            "args": [_const(a, fn, seen) for a in fn.args],
            "keywords": {k: _const(v, fn, seen) for k, v in fn.keywords.items()},
        }
    if isinstance(fn, types.FunctionType):
        if (fn.__module__ or "").partition(".")[0] in _LIBRARIES:
            # A library's own function (pydantic's SecretStr serializer, ...): its name says what it does.
            return {"library": f"{fn.__module__}.{fn.__qualname__}"}
        key = id(fn)  # only a recursion guard within this walk; never part of the digest
        if key in seen:
            return {"recursive": fn.__qualname__}
        seen.add(key)
        try:
            return {
                "name": fn.__qualname__,
                "code": _source_of(fn) or _code_object(fn.__code__, fn.__doc__),
                "defaults": [_const(v, fn, seen) for v in fn.__defaults__ or ()],
                "kwdefaults": {k: _const(v, fn, seen) for k, v in (fn.__kwdefaults__ or {}).items()},
                "closure": [_cell(c, fn, seen) for c in fn.__closure__ or ()],
                "globals": _globals_read(fn, seen),
            }
        finally:
            seen.discard(key)
    if isinstance(fn, (types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType)):
        return {"builtin": f"{getattr(fn, '__module__', None)}.{getattr(fn, '__qualname__', repr(fn))}"}
    if isinstance(fn, type):
        return {"class": f"{fn.__module__}.{fn.__qualname__}"}
    # A callable object (pydantic's own validator classes, a user's class with __call__): its class and
    # its state.
    call = type(fn).__dict__.get("__call__")
    state = getattr(fn, "__dict__", None)
    return {
        "object": type(fn).__qualname__,
        "call": _code_of(call, seen) if isinstance(call, types.FunctionType) else None,
        "state": {k: _const(v, None, seen) for k, v in sorted(state.items())} if isinstance(state, dict) else None,
        "repr": None if state else _ADDRESS.sub("", repr(fn)),
    }


# Packages whose functions are named, not read: their code is not the user's schema (and differs by version).
_LIBRARIES = frozenset({"pydantic", "pydantic_core", "annotated_types", "typing_extensions", "msgspec", "verl_ctx"})


def _source_of(fn: types.FunctionType) -> str | None:
    """``fn``'s source, normalised (docstrings and comments dropped, layout canonical), or None if unavailable.

    Source, not bytecode: bytecode differs between Python 3.10, 3.11 and 3.12, and a driver and its workers (or
    a lock file and today's code) may run different ones. Code without source (typed at a prompt, generated,
    or a lambda the parser cannot isolate) falls back to its bytecode.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def _code_object(code: types.CodeType, doc: str | None) -> Any:
    consts = list(code.co_consts)
    if doc is not None and consts and consts[0] == doc:
        consts = consts[1:]  # a docstring edit is not a behaviour change
    return {
        "bytecode": code.co_code.hex(),
        "names": list(code.co_names),
        "args": [code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount],
        "consts": [_code_object(c, None) if isinstance(c, types.CodeType) else _plain_const(c) for c in consts],
    }


def _plain_const(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain_const(v) for v in value]
    if isinstance(value, frozenset):
        import json

        return {"set": sorted(json.dumps(_plain_const(v)) for v in value)}
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {type(value).__name__: value} if isinstance(value, (bool, float)) else value
    return {"repr": _ADDRESS.sub("", repr(value))}


def _const(value: Any, fn: Any, seen: set[int]) -> Any:
    if callable(value) and not isinstance(value, type):
        return {"code": _code_of(value, seen)}
    return _plain(value)


def _cell(cell: types.CellType, fn: Any, seen: set[int]) -> Any:
    try:
        value = cell.cell_contents
    except ValueError:
        return "<empty>"
    return _const(value, fn, seen)


def _globals_read(fn: types.FunctionType, seen: set[int]) -> dict[str, Any]:
    """What ``fn`` (and the functions it defines) reads from its module, as far as it can shape a value.

    A validator ``v * SCALE`` changes behaviour when ``SCALE`` does, ``_helper(v)`` when ``_helper`` does,
    ``ALIASES[v]`` when the dict does, ``helperlib.SCALE`` when the imported module's attribute does, and
    ``Units.convert(v)`` when the helper class does, ``SETTINGS.limit`` when the module-level instance does.
    Covered: constants and containers of them, functions (also wrapped: ``lru_cache``, ``partial``), builtins bound
    to a name (``norm = str.strip``), the attributes an imported module is read for (every name the code reads that
    the module has), the state of user-written classes (``class_state``) and of module-level instances of them. Not
    covered: state reached through a call's result (a file's contents, a server's answer) or held by a library's
    object (a client), which no digest of code can see (docs/schema-evolution.md).
    """
    names: set[str] = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    out: dict[str, Any] = {}
    module_globals = fn.__globals__
    for name in sorted(names):
        if name not in module_globals:
            continue
        value = module_globals[name]
        if isinstance(value, types.ModuleType):
            read = {attr: _state_value(vars(value)[attr], seen) for attr in sorted(names) if attr in vars(value)}
            out[name] = {"module": value.__name__, "read": {k: v for k, v in read.items() if v is not None}}
        else:
            digest = _state_value(value, seen)
            if digest is not None:
                out[name] = digest
    return out


def _is_library(obj: Any) -> bool:
    module = str(getattr(obj, "__module__", None) or "")
    return module.partition(".")[0] in _LIBRARIES | _LIBRARY_MODULES | _STDLIB_SKIPPED


# Modules whose classes hold no user state worth a digest (and whose attributes are many).
_STDLIB_SKIPPED = frozenset({"abc", "enum", "collections", "dataclasses", "functools", "types"})


# Callables written in C: named, as what they do is their name (``norm = str.strip``).
_BUILTIN_CALLABLES = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
)


def _state_value(value: Any, seen: set[int]) -> Any:
    """The digestible form of a module global or class attribute, or None for what cannot shape a value."""
    if isinstance(value, (types.FunctionType, functools.partial, staticmethod, classmethod, property)):
        return _code_of(value, seen)
    if isinstance(value, _BUILTIN_CALLABLES):
        return {"builtin": f"{getattr(value, '__module__', None)}.{getattr(value, '__qualname__', repr(value))}"}
    wrapped = getattr(value, "__wrapped__", None)
    if callable(value) and not isinstance(value, type) and isinstance(wrapped, types.FunctionType):
        # functools.lru_cache / cache and other wrappers that keep the function they wrap: its code is what runs
        return {"wraps": type(value).__qualname__, "code": _code_of(wrapped, seen)}
    if isinstance(value, type):
        if issubclass(value, enum.Enum):
            return {"enum": value.__qualname__, "members": {m.name: _plain(m.value) for m in value}}
        if _is_library(value) or id(value) in seen:
            return None
        return {"class": value.__qualname__, "state": class_state(value, seen)}
    if isinstance(value, types.ModuleType) or callable(value):
        return None
    if isinstance(value, (*_PRIMITIVES, tuple, list, dict, set, frozenset)):
        try:
            return _plain(value)
        except RecursionError:  # a container holding itself: its size is what a digest can say
            return {"recursive": type(value).__name__}
    return _instance_state(value, seen)


def _instance_state(value: Any, seen: set[int]) -> Any:
    """A module-level instance of a user-written class (``SETTINGS = Settings(limit=100)``, read as
    ``SETTINGS.limit``): its class and the digestible form of each attribute; None for a library's object (a client,
    a lock), whose state no digest should hold."""
    cls = type(value)
    if _is_library(value) or _is_library(cls) or id(value) in seen:
        return None
    attrs = getattr(value, "__dict__", None)
    if not isinstance(attrs, dict):
        slots = [n for klass in cls.__mro__ for n in getattr(klass, "__slots__", ()) if isinstance(n, str)]
        attrs = {n: getattr(value, n) for n in slots if hasattr(value, n)}
    seen.add(id(value))
    try:
        state = {name: _state_value(attr, seen) for name, attr in sorted(attrs.items())}
    finally:
        seen.discard(id(value))
    return {"instance": f"{cls.__module__}.{cls.__qualname__}", "attrs": state}


_DECORATOR_GROUPS = (
    "validators",
    "field_validators",
    "root_validators",
    "field_serializers",
    "model_serializers",
    "model_validators",
    "computed_fields",
)


def class_state(cls: type, seen: set[int]) -> dict[str, Any]:
    """``cls``'s own state and that of its user-written bases: methods, class attributes, ``ClassVar``s.

    pydantic's and verl-ctx's own attributes (fields, validators' bookkeeping, config, generated dunders) are
    left out: the core schema covers what they decide.
    """
    seen.add(id(cls))
    out: dict[str, Any] = {}
    for base in cls.__mro__:
        if base is object or _is_library(base):
            continue
        own: dict[str, Any] = {}
        # Validators, serializers and computed fields are digested where the core schema applies them.
        decorators = base.__dict__.get("__pydantic_decorators__")
        registered = {name for group in _DECORATOR_GROUPS for name in getattr(decorators, group, None) or ()}
        for name, value in base.__dict__.items():
            dunder = name.startswith("__") and name.endswith("__")
            # A dunder is the user's when they wrote it (pydantic generates __hash__ for frozen models, ...).
            if (
                name in registered
                or name in ("model_config", "_abc_impl")
                or (
                    dunder
                    and (not isinstance(value, (types.FunctionType, staticmethod, classmethod)) or _is_library(value))
                )
            ):
                continue
            if hasattr(_unwrap(value), _MIGRATION_MARK):
                continue  # it shapes an older version's payload; the version number covers it
            digest = _state_value(value, seen)
            if digest is not None:
                own[name] = digest
        if own:
            out[base.__qualname__] = own
    return out


def roles_for(info: SchemaInfo, role: str | None) -> tuple[str, ...]:
    """The roles to read for ``info``'s schema: all it serves, or ``role`` if given (which it must serve)."""
    if role is None:
        return info.roles
    if role not in info.roles:
        raise EnvelopeError(f"{info.schema_id} serves roles {', '.join(info.roles)}, not '{role}'")
    return (role,)
